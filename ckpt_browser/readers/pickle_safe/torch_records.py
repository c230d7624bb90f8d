"""Recorders for torch: storages (persistent ids), tensor and parameter rebuilders, Size,
device and layout. Each returns a TensorRef or a plain value; nothing of torch is imported."""

from __future__ import annotations

from dataclasses import replace

from ckpt_browser.readers.pickle_safe.checks import U63, BadCall, arity, dims
from ckpt_browser.readers.pickle_safe.dtypes import ITEMSIZE
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.standins import Opaque, TensorRef


def storage_ref(u, pid: tuple) -> TensorRef | None:
    """A ("storage", tag, key, location, numel[, view]) persistent id as a flat TensorRef over
    the whole storage; None when it is not one."""
    legacy = u.storage_ids == "legacy"
    if len(pid) != (6 if legacy else 5):
        return None
    _, tag, key, location, numel = pid[:5]
    if (type(tag) is not str or tag not in ITEMSIZE or type(key) is not str
            or type(location) is not str or type(numel) is not int or not 0 <= numel < U63):
        return None
    offset = 0
    if legacy and pid[5] is not None:  # view_metadata: (view key, byte offset, view bytes)
        view = pid[5]
        if not (type(view) is tuple and len(view) == 3 and type(view[1]) is int
                and 0 <= view[1] < U63):
            return None
        offset = view[1] // ITEMSIZE[tag]
    seen = u.storages.setdefault(key, (tag, numel))
    if seen != (tag, numel):
        u.note(f"storage {key} is declared as both {seen[1]:,} x {seen[0]} "
               f"and {numel:,} x {tag}")
    return TensorRef(tag, (numel,), (1,), key, offset, numel)


def _tensor(storage, offset, size, stride, requires_grad, dtype=None) -> TensorRef:
    if type(storage) is not TensorRef:
        raise BadCall(f"storage is {short(storage)}")
    if type(offset) is not int or not 0 <= offset < U63:
        raise BadCall(f"storage offset is {short(offset)}")
    shape, strides = dims(size, "size"), dims(stride, "stride")
    if not strides and shape:  # torch's set_ takes no stride as the contiguous one
        strides = _contiguous(shape)
    if len(shape) != len(strides):
        raise BadCall(f"size {shape} and stride {strides} differ in length")
    base, numel = storage.storage_offset, storage.storage_numel
    if dtype is not None and dtype != storage.dtype:  # v3: an untyped (byte) storage
        if type(dtype) is not str or dtype not in ITEMSIZE:
            raise BadCall(f"dtype is {short(dtype)}")
        if numel is None:  # never, as every TensorRef a pickle builds has one (export's lack it)
            raise BadCall("the storage's size is unknown")
        unit, size_of = ITEMSIZE[storage.dtype], ITEMSIZE[dtype]
        base, numel = base * unit // size_of, numel * unit // size_of
    return TensorRef(dtype or storage.dtype, shape, strides, storage.storage_key, base + offset,
                     numel, requires_grad is True)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= max(d, 1)
    return tuple(strides)


def rebuild_tensor(u, args):  # _rebuild_tensor(storage, offset, size, stride)
    storage, offset, size, stride = arity(args, 4, 4)
    return _tensor(storage, offset, size, stride, False)


def rebuild_tensor_v2(u, args):  # (storage, offset, size, stride, requires_grad, hooks[, metadata])
    storage, offset, size, stride, requires_grad = arity(args, 6, 7)[:5]
    return _tensor(storage, offset, size, stride, requires_grad)


def rebuild_tensor_v3(u, args):  # (..., requires_grad, hooks, dtype[, metadata])
    storage, offset, size, stride, requires_grad, _, dtype = arity(args, 7, 8)[:7]
    return _tensor(storage, offset, size, stride, requires_grad, dtype)


def rebuild_parameter(u, args):  # (data, requires_grad, hooks[, state])
    data, requires_grad = arity(args, 3, 4)[:2]
    if type(data) is not TensorRef:
        raise BadCall(f"data is {short(data)}")
    return replace(data, requires_grad=requires_grad is True, is_parameter=True)


def rebuild_from_type(u, args):  # torch._tensor._rebuild_from_type_v2(func, new_type, args, state)
    func, new_type, inner, _ = arity(args, 4, 4)
    result = u.call(func, inner)
    if type(new_type) is Opaque and u.is_global(new_type):
        u.rebuilt(new_type)  # torch restores the subclass with its own __setstate__
    if type(result) is TensorRef and type(new_type) is Opaque \
            and new_type.qualname.endswith(".Parameter"):
        result = replace(result, is_parameter=True)
    return result


def torch_size(u, args):
    return dims(arity(args, 1, 1)[0], "size")


def torch_device(u, args):
    kind, *index = arity(args, 1, 2)
    if type(kind) is not str or (index and type(index[0]) not in (int, type(None))):
        raise BadCall(short(args))
    return f"{kind}:{index[0]}" if index and index[0] is not None else kind


def torch_layout(u, args):  # torch.serialization._get_layout("torch.strided")
    name = arity(args, 1, 1)[0]
    if type(name) is not str:
        raise BadCall(short(name))
    return name
