"""Recorders for TorchScript's own pickle helpers, and the allowlist of a TorchScript archive's
pickles (README "Safety").

torch.jit.save writes a typed list as `torch.jit._pickle.build_intlist([1, 2])` (and
build_doublelist, build_boollist, build_tensorlist), a container's static type as
`restore_type_tag(value, "Dict[str, int]")` and a tensor of the tensor table as
`build_tensor_from_id(3)`. Each returns its argument (torch/jit/_pickle.py; the C++ unpickler
of torch.jit.load builds the same list or dict): none calls, imports or unpickles what it is
given. Each recorder takes exactly what torch writes, anything else is BadCall (kept opaque,
with a warning). They are allowed in a TorchScript archive's pickles only: everywhere else
`torch.jit` stays on the deny list.
"""

from __future__ import annotations

from typing import Any

from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS
from ckpt_browser.readers.pickle_safe.checks import BadCall, arity
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.standins import Opaque, TensorRef

INT64 = 2**63
MAX_TYPE = 4096  # characters of a type string ("Dict[str, List[int]]" ...)
TENSOR_CALLS = ("torch._utils._rebuild_",)  # quantized and sparse tensors stay opaque calls


def _list_of(args: tuple, fits, what: str) -> list:
    (data,) = arity(args, 1, 1)
    if type(data) is not list or not all(fits(x) for x in data):
        raise BadCall(f"expected a list of {what}, got {short(data)}")
    return data


def _int(x) -> bool:
    return type(x) is int and -INT64 <= x < INT64  # TorchScript's int is 64 bits


def _tensor(x) -> bool:
    return type(x) is TensorRef or (type(x) is Opaque and bool(x.args)
                                    and x.qualname.startswith(TENSOR_CALLS))


def build_intlist(u, args):
    return _list_of(args, _int, "ints")


def build_doublelist(u, args):
    return _list_of(args, lambda x: type(x) is float, "floats")


def build_boollist(u, args):
    return _list_of(args, lambda x: type(x) is bool, "bools")


def build_tensorlist(u, args):
    return _list_of(args, _tensor, "tensors")


def build_tensor_from_id(u, args):  # an index into the archive's tensor table
    (index,) = arity(args, 1, 1)
    if type(index) is not int or not 0 <= index < INT64:
        raise BadCall(f"expected a tensor index, got {short(index)}")
    return index


def restore_type_tag(u, args):  # (a list or dict, its TorchScript type)
    value, type_str = arity(args, 2, 2)
    if type(value) not in (list, dict):  # the C++ unpickler restores tags on these only
        raise BadCall(f"expected a list or dict, got {short(value)}")
    if type(type_str) is not str or len(type_str) > MAX_TYPE or not type_str.isprintable():
        raise BadCall(f"expected a type name, got {short(type_str)}")
    return value


JIT_PICKLE = "torch.jit._pickle."
TORCHSCRIPT_RECORDERS: dict[str, Any] = {
    JIT_PICKLE + "build_intlist": build_intlist,
    JIT_PICKLE + "build_doublelist": build_doublelist,
    JIT_PICKLE + "build_boollist": build_boollist,
    JIT_PICKLE + "build_tensorlist": build_tensorlist,
    JIT_PICKLE + "build_tensor_from_id": build_tensor_from_id,
    JIT_PICKLE + "restore_type_tag": restore_type_tag,
}
# what the pickles of a TorchScript archive may name: torch's allowlist and TorchScript's own
TORCHSCRIPT_GLOBALS: dict[str, Any] = {**TORCH_GLOBALS, **TORCHSCRIPT_RECORDERS}
