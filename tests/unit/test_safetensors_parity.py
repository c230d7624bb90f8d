"""Parity with the Rust safetensors loader: each variant below is written to a file, opened by
the real `safe_open` (safetensors' compiled crate) and read by our reader, and the two must
agree: the crate opens it and we list it (no error), or the crate refuses it and we call it
damaged, with the reason in one line naming the file.

The table is the record of what was found (FORMATS.md "Safetensors"): `crate` is what
safetensors 0.8.0 does (asserted too, so a new wheel that changes its mind fails here), and
`before` what this reader said before it parsed as the loader parses ("ok" where the two
disagreed). One difference is deliberate, `STRICTER`: a tensor name written twice, which the
loader reads (the last copy wins) but which other readers may read as the first copy.
"""

from __future__ import annotations

import json
import random
import struct

import pytest

from ckpt_browser.readers.safetensors import read_header
from ckpt_browser.readers.stjson import serde_f64_finite

E = b'"dtype":"F32","shape":[1],"data_offsets":[0,4]'  # one valid F32 [1] entry
D4 = bytes(4)
OK, NO = True, False
STRICTER = "stricter"  # the crate accepts; we call it damaged, on purpose (see the docstring)


def entry(dtype=b'"F32"', shape=b"[1]", offsets=b"[0,4]", extra=b"") -> bytes:
    return b'{"dtype":%s,"shape":%s,"data_offsets":%s%s}' % (dtype, shape, offsets, extra)


def one(value: bytes, name: bytes = b"w") -> bytes:
    return b'{"%s":%s}' % (name, value)


def with_extra(value: bytes) -> bytes:
    """A valid header whose one entry carries an unknown field: the loader ignores its value
    but its parser still reads it, so only how it is written can matter."""
    return one(entry(extra=b',"x":' + value))


def nested(depth: int) -> bytes:
    """A header whose containers nest `depth` deep (the header object is level 1)."""
    inner = depth - 2  # the header and the entry
    return with_extra(b"[" * inner + b"]" * inner)


ZERO = b'{"dtype":"F32","shape":[0],"data_offsets":[%d,%d]}'

# id: (header, data, crate accepts?, our verdict before this change: "ok" or "DAMAGED")
VARIANTS: dict[str, tuple[bytes, bytes, bool | str, str]] = {
    # -- the envelope ------------------------------------------------------------------------
    "canonical": (one(entry()), D4, OK, "ok"),
    "empty header {}": (b"{}", b"", OK, "ok"),
    "padded with spaces to 8 bytes": (b"{}      ", b"", OK, "ok"),
    "header length not a multiple of 8": (one(entry()) + b" ", D4, OK, "ok"),
    "leading spaces, tab and newline": (b" \t\n" + one(entry()), D4, OK, "ok"),
    "trailing tab, CR and newline": (one(entry()) + b"\t\r\n", D4, OK, "ok"),
    "trailing NUL": (one(entry()) + b"\0", D4, NO, "DAMAGED"),
    "trailing non-space byte": (one(entry()) + b"x", D4, NO, "DAMAGED"),
    "UTF-8 byte order mark": (b"\xef\xbb\xbf" + one(entry()), D4, NO, "DAMAGED"),
    "header is a list": (b"[]", b"", NO, "DAMAGED"),
    "header is null": (b"null", b"", NO, "DAMAGED"),
    "header is empty": (b"", b"", NO, "DAMAGED"),
    "form feed is not whitespace": (one(entry()) + b"\x0c", D4, NO, "DAMAGED"),
    "invalid UTF-8 in a name": (one(entry(), b"\xff"), D4, NO, "DAMAGED"),
    "overlong UTF-8": (one(entry(), b"\xc0\xaf"), D4, NO, "DAMAGED"),
    "UTF-8 encoded surrogate": (one(entry(), b"\xed\xa0\x80"), D4, NO, "DAMAGED"),
    "raw control character in a name": (one(entry(), b"a\x01"), D4, NO, "DAMAGED"),
    "DEL in a name": (one(entry(), b"a\x7f"), D4, OK, "ok"),
    "escaped NUL in a name": (one(entry(), b"a\\u0000"), D4, OK, "ok"),
    "U+FFFF in a name": (one(entry(), b"\xef\xbf\xbf"), D4, OK, "ok"),
    # -- what Python's json reads and serde_json refuses ------------------------------------
    "lone surrogate \\ud800 in a name": (one(entry(), b"\\ud800"), D4, NO, "ok"),
    "lone trailing surrogate \\udc00": (one(entry(), b"\\udc00"), D4, NO, "ok"),
    "surrogate then \\u0041": (one(entry(), b"\\ud800\\u0041"), D4, NO, "ok"),
    "surrogate pair (an emoji)": (one(entry(), b"\\ud83d\\ude00"), D4, OK, "ok"),
    "lone surrogate in a metadata value": (
        b'{"__metadata__":{"a":"\\ud800"},"w":%s}' % entry(), D4, NO, "ok"),
    "lone surrogate in a metadata key": (
        b'{"__metadata__":{"\\udfff":"a"},"w":%s}' % entry(), D4, NO, "ok"),
    "lone surrogate in an unknown field": (with_extra(b'"\\ud800"'), D4, NO, "ok"),
    "NaN": (with_extra(b"NaN"), D4, NO, "DAMAGED"),
    "Infinity": (with_extra(b"Infinity"), D4, NO, "DAMAGED"),
    "-Infinity": (with_extra(b"-Infinity"), D4, NO, "DAMAGED"),
    "1e400": (with_extra(b"1e400"), D4, NO, "ok"),
    "-1e400": (with_extra(b"-1e400"), D4, NO, "ok"),
    "1e-400 (underflows to 0)": (with_extra(b"1e-400"), D4, OK, "ok"),
    "308-digit integer": (with_extra(b"9" * 308), D4, OK, "ok"),
    "309-digit integer": (with_extra(b"9" * 309), D4, NO, "ok"),
    "5,000-digit integer": (with_extra(b"9" * 5000), D4, NO, "ok"),
    "1.7976931348623157e308 (the largest float)": (
        with_extra(b"1.7976931348623157e308"), D4, OK, "ok"),
    "1.7976931348623158e308 (rounds to it in Python)": (
        with_extra(b"1.7976931348623158e308"), D4, NO, "ok"),
    "1e2147483648 (exponent past i32)": (with_extra(b"1e2147483648"), D4, NO, "ok"),
    "0e2147483648": (with_extra(b"0e2147483648"), D4, OK, "ok"),
    "-0 in an unknown field": (with_extra(b"-0"), D4, OK, "ok"),
    "nested 127 deep": (nested(127), D4, OK, "ok"),
    "nested 128 deep": (nested(128), D4, NO, "ok"),
    "nested 99,000 deep": (nested(99_000), D4, NO, "DAMAGED"),
    "leading zero 01": (one(entry(shape=b"[01]")), D4, NO, "DAMAGED"),
    "plus sign +1": (one(entry(shape=b"[+1]")), D4, NO, "DAMAGED"),
    "1. without digits": (with_extra(b"1."), D4, NO, "DAMAGED"),
    ".5 without a leading digit": (with_extra(b".5"), D4, NO, "DAMAGED"),
    # -- keys written twice -----------------------------------------------------------------
    "__metadata__ twice": (
        b'{"__metadata__":{"a":"b"},"__metadata__":{"a":"c"},"w":%s}' % entry(), D4, NO, "ok"),
    "__metadata__ twice, both null": (
        b'{"__metadata__":null,"__metadata__":null,"w":%s}' % entry(), D4, NO, "ok"),
    "a key twice inside __metadata__": (
        b'{"__metadata__":{"a":"b","a":"c"},"w":%s}' % entry(), D4, OK, "ok"),
    "shape twice in an entry": (
        one(b'{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}'), D4, NO, "ok"),
    "dtype twice in an entry": (
        one(b'{"dtype":"I32","dtype":"F32","shape":[1],"data_offsets":[0,4]}'), D4, NO, "DAMAGED"),
    "data_offsets twice in an entry": (
        one(b'{"dtype":"F32","shape":[1],"data_offsets":[0,8],"data_offsets":[0,4]}'), D4, NO,
        "DAMAGED"),
    "an unknown field twice in an entry": (with_extra(b'1,"x":2'), D4, OK, "ok"),
    "a tensor name twice, same entry": (b'{"w":%s,"w":%s}' % (entry(), entry()), D4, STRICTER,
                                        "DAMAGED"),
    "a tensor name twice, first as I32": (
        b'{"w":%s,"w":%s}' % (entry(b'"I32"'), entry()), D4, STRICTER, "DAMAGED"),
    "a tensor name twice, first pointing past the data": (
        b'{"w":%s,"w":%s}' % (entry(offsets=b"[8,12]"), entry()), D4, STRICTER, "DAMAGED"),
    "a tensor name twice, first not an entry": (b'{"w":5,"w":%s}' % entry(), D4, NO, "ok"),
    "a tensor name twice, first with an unknown dtype": (
        b'{"w":%s,"w":%s}' % (entry(b'"XX"'), entry()), D4, NO, "DAMAGED"),
    "a dtype map with a key twice": (one(entry(b'{"F32":null,"F32":null}')), D4, NO, "DAMAGED"),
    # -- entries ------------------------------------------------------------------------------
    "unknown field": (with_extra(b'[1,{"y":null}]'), D4, OK, "ok"),
    "__metadata__ as a field of an entry": (with_extra(b"5").replace(b'"x"', b'"__metadata__"'),
                                            D4, OK, "ok"),
    "entry as a list [dtype, shape, offsets]": (one(b'["F32",[1],[0,4]]'), D4, OK, "DAMAGED"),
    "entry as a list of 2": (one(b'["F32",[1]]'), D4, NO, "DAMAGED"),
    "entry as a list of 4": (one(b'["F32",[1],[0,4],1]'), D4, NO, "DAMAGED"),
    "dtype as {\"F32\": null}": (one(entry(b'{"F32":null}')), D4, OK, "DAMAGED"),
    "dtype as {\"F32\": []}": (one(entry(b'{"F32":[]}')), D4, NO, "DAMAGED"),
    "dtype as a map of two": (one(entry(b'{"F32":null,"F16":null}')), D4, NO, "DAMAGED"),
    "dtype as a list": (one(entry(b'["F32"]')), D4, NO, "DAMAGED"),
    "escaped dtype F\\u00332": (one(entry(b'"F\\u00332"')), D4, OK, "ok"),
    "escaped field name \\u0064type": (
        one(b'{"\\u0064type":"F32","shape":[1],"data_offsets":[0,4]}'), D4, OK, "ok"),
    "missing shape": (one(b'{"dtype":"F32","data_offsets":[0,4]}'), D4, NO, "DAMAGED"),
    "entry is a number": (one(b"5"), b"", NO, "DAMAGED"),
    "entry is null": (one(b"null"), b"", NO, "DAMAGED"),
    # -- dtypes -------------------------------------------------------------------------------
    "dtype F8_E4M3FN (torch's name)": (
        one(entry(b'"F8_E4M3FN"', offsets=b"[0,1]")), bytes(1), NO, "DAMAGED"),
    "dtype PackedU4 (another branch's)": (
        one(entry(b'"PackedU4"', b"[2]", b"[0,1]")), bytes(1), NO, "DAMAGED"),
    "dtype f32 in lower case": (one(entry(b'"f32"')), D4, NO, "DAMAGED"),
    "dtype C64": (one(entry(b'"C64"', offsets=b"[0,8]")), bytes(8), OK, "ok"),
    "dtype F4, 2 values in a byte": (one(entry(b'"F4"', b"[2]", b"[0,1]")), bytes(1), OK, "ok"),
    "dtype F4, 3 values": (one(entry(b'"F4"', b"[3]", b"[0,2]")), bytes(2), NO, "DAMAGED"),
    "dtype F6_E2M3, 4 values in 3 bytes": (
        one(entry(b'"F6_E2M3"', b"[4]", b"[0,3]")), bytes(3), OK, "ok"),
    # -- shapes and offsets -------------------------------------------------------------------
    "shape [-0]": (one(entry(shape=b"[-0]", offsets=b"[0,0]")), b"", NO, "ok"),
    "data_offsets [-0, 0]": (one(entry(shape=b"[0]", offsets=b"[-0,0]")), b"", NO, "ok"),
    "shape [1.0]": (one(entry(shape=b"[1.0]")), D4, NO, "DAMAGED"),
    "shape [1e0]": (one(entry(shape=b"[1e0]")), D4, NO, "DAMAGED"),
    "shape [true]": (one(entry(shape=b"[true]")), D4, NO, "DAMAGED"),
    "shape [\"1\"]": (one(entry(shape=b'["1"]')), D4, NO, "DAMAGED"),
    "shape [-1]": (one(entry(shape=b"[-1]")), D4, NO, "DAMAGED"),
    "shape [[1]]": (one(entry(shape=b"[[1]]")), D4, NO, "DAMAGED"),
    "shape null": (one(entry(shape=b"null")), D4, NO, "DAMAGED"),
    "shape [2**64]": (one(entry(shape=b"[18446744073709551616]")), D4, NO, "DAMAGED"),
    "shape [2**64 - 1] of U8": (
        one(entry(b'"U8"', b"[18446744073709551615]", b"[0,4]")), D4, NO, "DAMAGED"),
    "shape [2**32, 2**32, 0]: overflows before the 0": (
        one(entry(shape=b"[4294967296,4294967296,0]", offsets=b"[0,0]")), b"", NO, "ok"),
    "shape [0, 2**63, 2**63]: 0 first": (
        one(entry(shape=b"[0,9223372036854775808,9223372036854775808]", offsets=b"[0,0]")),
        b"", OK, "ok"),
    "shape [2**32, 2**32 - 1, 0] of F64": (
        one(entry(b'"F64"', b"[4294967296,4294967295,0]", b"[0,0]")), b"", OK, "ok"),
    "data_offsets of 3": (one(entry(offsets=b"[0,4,4]")), D4, NO, "DAMAGED"),
    "data_offsets of 1": (one(entry(offsets=b"[4]")), D4, NO, "DAMAGED"),
    "data_offsets as a map": (one(entry(offsets=b'{"0":0,"1":4}')), D4, NO, "DAMAGED"),
    "data_offsets end before begin": (one(entry(shape=b"[0]", offsets=b"[4,0]")), D4, NO,
                                      "DAMAGED"),
    "shape and offsets disagree": (one(entry(shape=b"[2]")), D4, NO, "DAMAGED"),
    # -- the data section ---------------------------------------------------------------------
    "gap between tensors": (b'{"a":%s,"b":%s}' % (entry(), entry(offsets=b"[8,12]")),
                            bytes(12), NO, "DAMAGED"),
    "overlapping tensors": (b'{"a":%s,"b":%s}' % (entry(shape=b"[2]", offsets=b"[0,8]"),
                                                  entry(shape=b"[2]", offsets=b"[4,12]")),
                            bytes(12), NO, "DAMAGED"),
    "first tensor not at 0": (one(entry(offsets=b"[4,8]")), bytes(8), NO, "DAMAGED"),
    "data truncated": (one(entry()), bytes(3), NO, "DAMAGED"),
    "bytes after the last tensor": (one(entry()), bytes(5), NO, "DAMAGED"),
    "out of offset order in the JSON": (b'{"b":%s,"a":%s}' % (entry(offsets=b"[4,8]"), entry()),
                                        bytes(8), OK, "ok"),
    "zero-size tensors sharing offset 0": (b'{"a":%s,"b":%s}' % (ZERO % (0, 0), ZERO % (0, 0)),
                                           b"", OK, "ok"),
    "zero-size tensor at the end": (b'{"w":%s,"z":%s}' % (entry(), ZERO % (4, 4)), D4, OK, "ok"),
    "zero-size tensor past the end": (b'{"w":%s,"z":%s}' % (entry(), ZERO % (8, 8)), D4, NO,
                                      "DAMAGED"),
    "zero-size tensor inside another": (b'{"w":%s,"z":%s}' % (entry(), ZERO % (2, 2)), D4, NO,
                                        "DAMAGED"),
    # -- __metadata__ -------------------------------------------------------------------------
    "__metadata__ null": (b'{"__metadata__":null,"w":%s}' % entry(), D4, OK, "ok"),
    "__metadata__ only": (b'{"__metadata__":{"format":"pt"}}', b"", OK, "ok"),
    "__metadata__ key escaped \\u005f_metadata__": (
        b'{"\\u005f_metadata__":{"a":"b"},"w":%s}' % entry(), D4, OK, "ok"),
    "__metadata__ with an integer value": (
        b'{"__metadata__":{"a":1},"w":%s}' % entry(), D4, NO, "DAMAGED"),
    "__metadata__ with a null value": (
        b'{"__metadata__":{"a":null},"w":%s}' % entry(), D4, NO, "DAMAGED"),
    "__metadata__ nested": (
        b'{"__metadata__":{"a":{"b":"c"}},"w":%s}' % entry(), D4, NO, "DAMAGED"),
    "__metadata__ a list": (b'{"__metadata__":[],"w":%s}' % entry(), D4, NO, "DAMAGED"),
    "__metadata__ a string": (b'{"__metadata__":"x","w":%s}' % entry(), D4, NO, "DAMAGED"),
    "__metadata__ key named data_offsets": (
        b'{"__metadata__":{"data_offsets":"x","shape":"y"},"w":%s}' % entry(), D4, OK, "ok"),
    "a ':' inside names and metadata": (
        b'{"__metadata__":{"url":"http://x"},"a:b":%s}' % entry(), D4, OK, "ok"),
    "a tensor name twice beside a ':' in metadata": (
        b'{"__metadata__":{"url":"http://x"},"a:b":%s,"a:b":%s}' % (entry(), entry()), D4,
        STRICTER, "DAMAGED"),
    "shape twice beside an escaped ':' (\\u003a) in metadata": (
        b'{"__metadata__":{"u":"\\u003a"},"w":{"dtype":"F32","shape":[2],"shape":[1],'
        b'"data_offsets":[0,4]}}', D4, NO, "DAMAGED"),
}


def crate_accepts(path) -> bool:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            f.keys()
    except SafetensorError:
        return False
    return True


def crate_listing(path) -> tuple[dict, dict | None]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        tensors = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape()))
                   for k in f.keys()}
        return tensors, f.metadata()


def write(tmp_path, header: bytes, data: bytes):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize("case", VARIANTS, ids=list(VARIANTS))
def test_we_accept_exactly_what_the_rust_loader_accepts(tmp_path, case):
    header, data, crate, _before = VARIANTS[case]
    path = write(tmp_path, header, data)

    accepted = crate_accepts(path)
    info = read_header(str(path), path.name)

    assert accepted == (crate is not NO), f"safetensors now {'accepts' if accepted else 'refuses'}"
    errors = [p for p in info.problems if p.severity == "error"]
    for p in info.problems:  # one line each, naming the file, no traceback
        assert p.file == "model.safetensors" and "\n" not in p.message
        assert "Traceback" not in p.message and len(p.message) < 400
    if crate is STRICTER:
        assert errors and all("written twice" in p.message for p in errors), info.problems
    elif accepted:
        assert not errors, [p.message for p in errors]
        tensors, metadata = crate_listing(path)
        assert {t.name: (t.dtype, t.shape) for t in info.tensors} == tensors
        assert info.metadata == metadata
    else:
        assert errors, "the loader refuses this file; we must call it damaged"


def test_the_table_records_the_disagreements_this_reader_had():
    """The `before` column: every case where the old reader and the loader disagreed."""
    fixed = sorted(k for k, (_, _, crate, before) in VARIANTS.items()
                   if crate is not STRICTER and (before == "ok") != bool(crate))
    assert len(fixed) >= 20, fixed  # lone surrogates, numbers, depth, -0, duplicates, forms ...


# -- serde_json's number range, token by token --------------------------------------------------

EDGE_NUMBERS = [
    "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
    "17976931348623157e292", "0.17976931348623157e309", "1e308", "10e307", "1e309",
    "9" * 308, "9" * 309, "1" + "0" * 308, "17976931348623158" + "0" * 292,
    "1e2147483647", "1e2147483648", "0e2147483648", "1e-2147483648", "-1e2147483648",
    "4.9e-324", "1e-400", "0." + "0" * 500 + "1e808", "0." + "0" * 500 + "1e809",
    "1" + "0" * 400 + "e-92", "1" + "0" * 400 + "e-91", "18446744073709551615e289",
    "18446744073709551616e289", "18446744073709551616.0", "99999999999999999999.5",
]


def test_our_number_range_is_serde_jsons(tmp_path):
    """The out-of-range rule is emulated (serde_json's float parsing is not Python's): every
    edge token and 60 random ones near the top of the range, in an unknown field."""
    rng = random.Random(23)
    tokens = list(EDGE_NUMBERS)
    for _ in range(60):
        mantissa = str(rng.randint(1, 10 ** rng.randint(1, 25)))
        cut = rng.randint(1, len(mantissa))
        if cut < len(mantissa) and rng.random() < 0.5:
            mantissa = f"{mantissa[:cut]}.{mantissa[cut:]}"
        tokens.append(f"{mantissa}e{rng.randint(280, 320)}")
    wrong = []
    for token in tokens:
        path = write(tmp_path, with_extra(token.encode()), D4)
        crate = crate_accepts(path)
        ours = read_header(str(path), path.name).ok
        if not crate == ours == serde_f64_finite(token):
            wrong.append((token[:40], crate, ours))
    assert not wrong


def test_a_refused_header_lists_nothing_the_loader_would_not(tmp_path):
    """A lone surrogate stops the loader's parse: no tensor is listed, so no name that cannot
    be encoded reaches a report or a terminal."""
    path = write(tmp_path, b'{"\\ud800":%s,"ok":%s}' % (entry(), entry(offsets=b"[4,8]")),
                 bytes(8))
    info = read_header(str(path), path.name)
    assert info.tensors == () and "lone surrogate" in info.error
    assert json.loads(path.read_bytes()[8:-8])  # Python alone would have listed both
