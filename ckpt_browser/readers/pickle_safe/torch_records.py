"""Recorders for torch: storages (persistent ids), tensor and parameter rebuilders, Size,
device and layout. Each returns a TensorRef or a plain value; nothing of torch is imported."""

from __future__ import annotations

from dataclasses import replace

from ckpt_browser.readers.pickle_safe.calls import hazard, plain, tensor_class
from ckpt_browser.readers.pickle_safe.checks import U63, BadCall, Reaches, arity, dims
from ckpt_browser.readers.pickle_safe.dtypes import ITEMSIZE
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.standins import TensorRef


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


def _hooks(hooks) -> None:
    """torch.save always writes an empty OrderedDict of backward hooks; torch.load stores what
    it is given as the tensor's hooks, which backward() calls."""
    if not (type(hooks) is dict and not hooks):
        raise BadCall(f"backward hooks {short(hooks)}")


def _metadata(metadata) -> None:  # torch._C._set_tensor_metadata's dict of flags
    if metadata is not None and not plain(metadata):
        raise BadCall(f"metadata {short(metadata)}")


def rebuild_tensor_v2(u, args):  # (storage, offset, size, stride, requires_grad, hooks[, metadata])
    storage, offset, size, stride, requires_grad, hooks = arity(args, 6, 7)[:6]
    _hooks(hooks)
    _metadata(args[6] if len(args) == 7 else None)
    return _tensor(storage, offset, size, stride, requires_grad)


def rebuild_tensor_v3(u, args):  # (..., requires_grad, hooks, dtype[, metadata])
    storage, offset, size, stride, requires_grad, hooks, dtype = arity(args, 7, 8)[:7]
    _hooks(hooks)
    _metadata(args[7] if len(args) == 8 else None)
    return _tensor(storage, offset, size, stride, requires_grad, dtype)


def rebuild_parameter(u, args):  # (data, requires_grad, hooks[, state])
    data, requires_grad, hooks = arity(args, 3, 4)[:3]
    if type(data) is not TensorRef:
        raise BadCall(f"data is {short(data)}")
    _hooks(hooks)
    if len(args) == 4:
        object_state(u, args[3])
    return replace(data, requires_grad=requires_grad is True, is_parameter=True)


def object_state(u, state) -> None:
    """torch._utils._set_obj_state: setattr of each key on the tensor. A dunder key reaches
    the tensor's class (`__class__`) or its hooks; a value that can run code would be kept where
    torch calls it."""
    dicts = state if type(state) is tuple and len(state) == 2 else (state,)
    for d in dicts:
        if d is None:
            continue
        if type(d) is not dict:
            raise BadCall(f"state {short(d)}")
        for key in d:
            if type(key) is not str or key.startswith("__"):
                raise Reaches(f"sets the attribute {short(key)} of a tensor")
    found = hazard(u, state)
    if found:
        raise Reaches(f"stores {found} on a tensor")


def rebuild_from_type(u, args):  # torch._tensor._rebuild_from_type_v2(func, new_type, args, state)
    """ret = func(*args), then ret.as_subclass(new_type) and new_type's __setstate__(state)
    when it has its own: the class must be torch's tensor or parameter."""
    func, new_type, inner, state = arity(args, 4, 4)
    tensor_class(u, new_type, "__setstate__")
    object_state(u, state)
    result = u.call(func, inner)
    if type(result) is TensorRef and new_type.qualname.endswith(".Parameter"):
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
