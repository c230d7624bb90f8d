"""The torch allowlist: dotted name -> a dtype tag (a value global) or a recorder
`fn(unpickler, args) -> object` that stands in for the call. Anything else is Opaque."""

from __future__ import annotations

from typing import Any

from ckpt_browser.readers.pickle_safe.builtin_records import (
    codecs_encode,
    counter,
    default_dict,
    deque,
    make_bytearray,
    make_bytes,
    make_complex,
    make_frozenset,
    make_set,
    make_slice,
    newobj,
    newobj_ex,
    ordered_dict,
    reconstructor,
)
from ckpt_browser.readers.pickle_safe.dtypes import TAG_GLOBALS
from ckpt_browser.readers.pickle_safe.numpy_records import (
    DTYPE_CLASSES,
    numpy_reconstruct,
    numpy_scalar,
    unpickle_seed_sequence,
)
from ckpt_browser.readers.pickle_safe.torch_records import (
    rebuild_from_type,
    rebuild_parameter,
    rebuild_tensor,
    rebuild_tensor_v2,
    rebuild_tensor_v3,
    torch_device,
    torch_layout,
    torch_size,
)

TORCH_GLOBALS: dict[str, Any] = {
    **TAG_GLOBALS,
    "torch._utils._rebuild_tensor": rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": rebuild_parameter,
    "torch._tensor._rebuild_from_type_v2": rebuild_from_type,
    "torch.Size": torch_size,
    "torch.device": torch_device,
    "torch.serialization._get_layout": torch_layout,
    "collections.OrderedDict": ordered_dict,
    "collections.defaultdict": default_dict,
    "collections.Counter": counter,
    "collections.deque": deque,
    "builtins.set": make_set,
    "builtins.frozenset": make_frozenset,
    "builtins.complex": make_complex,
    "builtins.slice": make_slice,
    "builtins.bytes": make_bytes,
    "builtins.bytearray": make_bytearray,
    "_codecs.encode": codecs_encode,
    "copyreg._reconstructor": reconstructor,
    "copyreg.__newobj__": newobj,
    "copyreg.__newobj_ex__": newobj_ex,
    "numpy.core.multiarray._reconstruct": numpy_reconstruct,
    "numpy._core.multiarray._reconstruct": numpy_reconstruct,
    "numpy.core.multiarray.scalar": numpy_scalar,
    "numpy._core.multiarray.scalar": numpy_scalar,
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence": unpickle_seed_sequence,
    **DTYPE_CLASSES,
}
# numpy.ndarray and numpy.dtype need no recorder: Opaque("numpy.dtype", args) is the record.

# recorders that check every argument exactly (or only store values they are given, never
# call them): the others first have their arguments searched for anything that can run code
EXACT_RECORDERS = frozenset({
    "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state", "torch._tensor._rebuild_from_type_v2",
    "torch.Size", "torch.device", "torch.serialization._get_layout", "collections.OrderedDict",
    "collections.defaultdict", "collections.Counter", "collections.deque", "builtins.set",
    "builtins.frozenset", "builtins.complex", "builtins.slice", "builtins.bytes",
    "builtins.bytearray", "_codecs.encode", "copyreg._reconstructor", "copyreg.__newobj__",
    "copyreg.__newobj_ex__", "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence",
})
