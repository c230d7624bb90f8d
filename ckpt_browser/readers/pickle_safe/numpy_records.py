"""Recorders for numpy values (RNG state in checkpoints): arrays keep dtype and shape only,
simple scalars become Python numbers. numpy is never imported."""

from __future__ import annotations

import struct
from collections.abc import Callable

from ckpt_browser.readers.pickle_safe.calls import plain
from ckpt_browser.readers.pickle_safe.checks import BadCall, Reaches, arity, dims
from ckpt_browser.readers.pickle_safe.limits import short
from ckpt_browser.standins import NumpyArray, Opaque

NUMPY_CODES = {
    "b1": "bool", "i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32",
    "u4": "uint32", "i8": "int64", "u8": "uint64", "f2": "float16", "f4": "float32",
    "f8": "float64", "f12": "float96", "f16": "float128", "c8": "complex64", "c16": "complex128",
    "c32": "complex256", "O4": "object", "O8": "object",
}
_SCALAR_FORMATS = {"b1": "?", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I",
                   "i8": "q", "u8": "Q", "f2": "e", "f4": "f", "f8": "d"}
_NP_CLASS = {"Bool": "b1", "Int8": "i1", "UInt8": "u1", "Int16": "i2", "UInt16": "u2",
             "Int32": "i4", "UInt32": "u4", "Int64": "i8", "UInt64": "u8", "Float16": "f2",
             "Float32": "f4", "Float64": "f8", "Complex64": "c8", "Complex128": "c16",
             "Object": "O8", "Long": "i8", "ULong": "u8", "LongLong": "i8", "ULongLong": "u8",
             "Byte": "i1", "UByte": "u1", "Short": "i2", "UShort": "u2", "Int": "i4",
             "UInt": "u4", "Half": "f2", "Double": "f8"}


def _numpy_code(dtype) -> str | None:
    if type(dtype) is Opaque and dtype.qualname == "numpy.dtype" and dtype.args \
            and type(dtype.args[0]) is str:
        return dtype.args[0]
    return None


def _big_endian(dtype) -> bool:
    state = dtype.state if type(dtype) is Opaque else None
    return type(state) is list and len(state) > 1 and state[1] == ">"


def numpy_reconstruct(u, args):  # _reconstruct(ndarray, (0,), b"b"); BUILD fills it in
    """numpy makes an array of the class it is given, running its __array_finalize__: only
    ndarray itself is what numpy writes."""
    subtype, shape, code = arity(args, 3, 3)
    if not (type(subtype) is Opaque and u.is_global(subtype)
            and subtype.qualname == "numpy.ndarray"):
        name = subtype.qualname if type(subtype) is Opaque else short(subtype)
        raise Reaches(f"makes an array of the class {name}, whose methods run")
    if not plain(shape) or not plain(code):
        raise BadCall(short(args))
    return NumpyArray("?", (0,))


SEED_SEQUENCE = "numpy.random.bit_generator.SeedSequence"


def unpickle_seed_sequence(u, args):
    """Cython's __pyx_unpickle_SeedSequence(cls, checksum, state): cls.__new__(cls), then the
    state (BUILD). Only SeedSequence itself is what numpy writes."""
    cls, checksum, state = arity(args, 3, 3)
    if not (type(cls) is Opaque and u.is_global(cls) and cls.qualname == SEED_SEQUENCE):
        name = cls.qualname if type(cls) is Opaque else short(cls)
        raise Reaches(f"makes an object of the class {name}")
    if type(checksum) is not int or not plain(state):
        raise BadCall(short(args))
    return Opaque(SEED_SEQUENCE)


def build_ndarray(u, inst: NumpyArray, state) -> None:
    # (version, shape, dtype, is_fortran, raw) or, from old numpy, without the version
    if type(state) is tuple and len(state) == 4:
        state = (1, *state)
    if not (type(state) is tuple and len(state) == 5):
        u.note(f"numpy array state {short(state)} not understood")
        return
    code = _numpy_code(state[2])
    try:
        shape = dims(state[1], "shape")
    except BadCall as e:
        u.note(f"numpy array {e}")
        return
    name = NUMPY_CODES.get(code, code or "?") if code else "?"
    object.__setattr__(inst, "dtype", (">" + name) if code and _big_endian(state[2]) else name)
    object.__setattr__(inst, "shape", shape)  # the raw bytes are dropped with the state


def _dtype_class(qualname: str) -> Callable:
    stem = qualname.rsplit(".", 1)[1].removesuffix("DType")
    code = _NP_CLASS.get(stem)

    def record(u, args):  # numpy.dtypes.UInt32DType(...) -> the numpy.dtype stand-in
        if not plain(args):
            raise BadCall(short(args))
        return Opaque("numpy.dtype", args if args else ((code,) if code else ()))
    return record


DTYPE_CLASSES = {f"numpy.dtypes.{c}DType": _dtype_class(f"numpy.dtypes.{c}DType")
                 for c in _NP_CLASS}


def numpy_scalar(u, args):  # scalar(dtype, raw bytes) -> a Python number when simple
    dtype, raw = arity(args, 2, 2)
    code = _numpy_code(dtype)
    fmt = _SCALAR_FORMATS.get(code or "")
    if fmt is None or type(raw) is not bytes or len(raw) != struct.calcsize(fmt):
        raise BadCall(f"a {code or short(dtype)} scalar")
    return struct.unpack((">" if _big_endian(dtype) else "<") + fmt, raw)[0]
