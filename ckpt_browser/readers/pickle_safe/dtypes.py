"""dtype tags: torch dtypes and storage classes in safetensors spelling, and their sizes."""

from __future__ import annotations

from ckpt_browser.model import DTYPE_BITS

# torch.<dtype> -> tag, in safetensors spelling where safetensors has one.
TORCH_DTYPES = {
    "float32": "F32", "float": "F32", "float64": "F64", "double": "F64", "float16": "F16",
    "half": "F16", "bfloat16": "BF16", "int64": "I64", "long": "I64", "int32": "I32", "int": "I32",
    "int16": "I16", "short": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32",
    "uint64": "U64", "bool": "BOOL", "complex64": "C64", "cfloat": "C64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0",
    # no safetensors spelling:
    "complex128": "C128", "cdouble": "C128", "complex32": "C32", "chalf": "C32",
    "float4_e2m1fn_x2": "F4_X2", "qint8": "QI8", "quint8": "QU8", "qint32": "QI32",
    "quint4x2": "QU4X2", "quint2x4": "QU2X4", "bits8": "B8", "bits16": "B16", "bits1x8": "B1X8",
    "bits2x4": "B2X4", "bits4x2": "B4X2",
}
# torch.<X>Storage -> tag. UntypedStorage counts bytes; _rebuild_tensor_v3 names the dtype.
STORAGE_TAGS = {
    "FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
    "ByteStorage": "U8", "BoolStorage": "BOOL", "ComplexFloatStorage": "C64",
    "ComplexDoubleStorage": "C128", "QInt8Storage": "QI8", "QUInt8Storage": "QU8",
    "QInt32Storage": "QI32", "QUInt4x2Storage": "QU4X2", "QUInt2x4Storage": "QU2X4",
    "UntypedStorage": "U8",
}
ITEMSIZE = {tag: bits // 8 for tag, bits in DTYPE_BITS.items() if bits % 8 == 0} | {
    "C128": 16, "C32": 4, "F4_X2": 1, "QI8": 1, "QU8": 1, "QI32": 4, "QU4X2": 1, "QU2X4": 1,
    "B8": 1, "B16": 2, "B1X8": 1, "B2X4": 1, "B4X2": 1,
}

DTYPE_GLOBALS = {f"torch.{k}": v for k, v in TORCH_DTYPES.items()}


def _tag_globals() -> dict[str, str]:
    values = dict(DTYPE_GLOBALS)
    for cls, tag in STORAGE_TAGS.items():
        values[f"torch.{cls}"] = values[f"torch.cuda.{cls}"] = tag  # torch.cuda: old files
    values["torch.storage.UntypedStorage"] = "U8"
    return values


TAG_GLOBALS = _tag_globals()  # every torch global that unpickles to a plain tag
