"""`read_header`: our header-only reader must agree with the real safetensors library.

Good files come from `save_file`; every bad file is either a real file damaged afterwards or
raw bytes crafted to the format (8-byte LE length + JSON header + data). Where the reference
(`safe_open`) accepts or rejects a file, the reader must do the same, except for the cases an
inspector should flag although the reference lets them through (duplicates; FORMATS.md
"Safetensors").
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

import ckpt_browser.readers.safetensors as st_reader
from ckpt_browser.readers.safetensors import read_header

from .helpers import (
    RUN6,
    SAFETENSORS_BITS,
    SHARDS,
    craft,
    entry,
    header_len,
    locked_file,
    reference_accepts,
    reference_tensors,
    save,
    sparse,
    unprivileged,
)

TORCH_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
                "int64", "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                "float8_e5m2fnuz", "float8_e8m0fnu", "uint16", "uint32", "uint64", "complex64",
                "float4_e2m1fn_x2"]


def random_tensor(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Random bytes viewed as `dtype`, so a wrong offset reads visibly different bytes."""
    if dtype is torch.bool:
        return torch.randint(0, 2, shape).bool()
    numel = 1
    for d in shape:
        numel *= d
    size = torch.empty((), dtype=dtype).element_size()
    return torch.randint(0, 256, (numel * size,), dtype=torch.uint8).view(dtype).reshape(shape)


def raw_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def read(path) -> object:
    return read_header(str(path), path.name)


def messages(info) -> list[str]:
    return [p.message for p in info.problems]


def assert_matches_reference(path, info) -> None:
    ref = reference_tensors(path)
    assert {t.name: (t.dtype, t.shape) for t in info.tensors} == ref
    assert info.problems == ()
    assert info.header_bytes == header_len(path)
    assert info.size == path.stat().st_size


# --- real files written by save_file ---------------------------------------------------------

@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
def test_every_torch_dtype_matches_safe_open(tmp_path, dtype_name):
    dtype = getattr(torch, dtype_name, None)
    if dtype is None:
        pytest.skip(f"this torch has no {dtype_name}")
    shapes = {"matrix": (3, 4), "vector": (8,), "empty": (0, 4)}
    if dtype_name != "float4_e2m1fn_x2":  # two values per byte: a scalar is not whole bytes
        shapes["scalar"] = ()
    tensors = {k: random_tensor(dtype, s) for k, s in shapes.items()}
    path = save(tmp_path / "x.safetensors", tensors)

    info = read(path)

    assert_matches_reference(path, info)
    data = path.read_bytes()[8 + info.header_bytes:]
    for t in info.tensors:  # the offsets point at exactly the bytes save_file wrote
        assert data[t.begin:t.end] == raw_bytes(tensors[t.name])


def test_mixed_dtype_file_offsets_point_at_each_tensors_bytes(tmp_path):
    tensors = {}
    for i, name in enumerate(n for n in TORCH_DTYPES if hasattr(torch, n)):
        tensors[f"layer.{i}.{name}"] = random_tensor(getattr(torch, name), (2, 6))
    path = save(tmp_path / "mixed.safetensors", tensors, metadata={"format": "pt"})

    info = read(path)

    assert_matches_reference(path, info)
    assert info.metadata == {"format": "pt"}
    data = path.read_bytes()[8 + info.header_bytes:]
    for t in info.tensors:
        assert data[t.begin:t.end] == raw_bytes(tensors[t.name])


@pytest.mark.parametrize("shard", SHARDS)
def test_sample_shards_match_safe_open(shard):
    path = RUN6 / shard
    assert_matches_reference(path, read(path))


def test_all_22_safetensors_dtype_strings_are_accepted(tmp_path):
    header, begin = {}, 0
    for dtype, bits in SAFETENSORS_BITS.items():
        count = 8  # 8 elements is whole bytes for every width, F4 and F6 included
        end = begin + count * bits // 8
        header[f"t.{dtype}"] = entry(dtype, [2, 4], begin, end)
        begin = end
    path = craft(tmp_path / "all.safetensors", header, bytes(begin))

    info = read(path)

    assert info.problems == ()
    assert {t.name: t.dtype for t in info.tensors} == {k: v["dtype"] for k, v in header.items()}
    assert {t.nbytes for t in info.tensors if t.dtype == "F6_E2M3"} == {6}
    assert reference_accepts(path)  # the real library agrees the file is valid


# --- crafted damage: each case must be rejected, and say why in words --------------------------

F32_4 = entry("F32", [1], 0, 4)

BAD = {
    # name: (header (dict or raw JSON bytes), data, words the message must contain)
    "dtype F8_E4M3FN (torch's name, not safetensors')":
        ({"a": entry("F8_E4M3FN", [1], 0, 1)}, bytes(1), ["unknown dtype", "F8_E4M3FN"]),
    "lowercase dtype f32": ({"a": entry("f32", [1], 0, 4)}, bytes(4), ["unknown dtype", "f32"]),
    "dtype with a trailing space": ({"a": entry("F32 ", [1], 0, 4)}, bytes(4), ["unknown dtype"]),
    "dtype C128": ({"a": entry("C128", [1], 0, 16)}, bytes(16), ["unknown dtype", "C128"]),
    "dtype is a list": ({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}},
                        bytes(4), ["unknown dtype"]),
    "dtype missing": ({"a": {"shape": [1], "data_offsets": [0, 4]}}, bytes(4), ["dtype"]),
    "invalid JSON": (b'{"a": {"dtype": "F32",', bytes(4), ["not valid JSON"]),
    "header is a list": (b"[1, 2, 3]", b"", ["not an object", "list"]),
    "header is a string": (b'"hello"', b"", ["not an object"]),
    "header is null": (b"null", b"", ["not an object"]),
    "header is not UTF-8": (b'{"\xff\xfe": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
                            bytes(4), ["UTF-8"]),
    "NaN literal": (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": NaN}}',
                    bytes(4), ["not valid JSON", "NaN"]),
    "Infinity literal": (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], '
                         b'"x": Infinity}}', bytes(4), ["not valid JSON", "Infinity"]),
    "-Infinity literal": (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], '
                          b'"x": -Infinity}}', bytes(4), ["not valid JSON", "Infinity"]),
    "trailing NUL padding": (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}\0\0',
                             bytes(4), ["not valid JSON"]),
    "shape disagrees with offsets": ({"a": entry("F32", [2, 3], 0, 16)}, bytes(16),
                                     ["'a'", "24 bytes", "16"]),
    "negative dimension": ({"a": entry("F32", [-1], 0, 4)}, bytes(4), ["shape", "non-negative"]),
    "float dimension": ({"a": entry("F32", [1.0], 0, 4)}, bytes(4), ["shape"]),
    "end before begin": ({"a": entry("F32", [0], 4, 0)}, bytes(4),
                         ["data_offsets", "[4, 0]", "begin"]),
    "offsets not a pair": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}}, bytes(4),
                           ["data_offsets"]),
    "entry not an object": ({"a": 5}, b"", ["'a'", "not an object"]),
    "F4 with an odd element count": ({"a": entry("F4", [3], 0, 2)}, bytes(2), ["byte boundary"]),
    "overlapping offsets": ({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)},
                            bytes(12), ["'b'", "overlaps"]),
    "gap between tensors": ({"a": F32_4, "b": entry("F32", [1], 8, 12)}, bytes(12),
                            ["gap", "4 bytes", "'b'"]),
    "first tensor not at 0": ({"a": entry("F32", [1], 4, 8)}, bytes(8), ["gap", "'a'", "from 0"]),
    "data truncated": ({"a": entry("F32", [4], 0, 16)}, bytes(10), ["truncated", "6 missing"]),
    "trailing bytes after the data": ({"a": F32_4}, bytes(7), ["3 unexpected bytes", "after"]),
    "__metadata__ with an integer value": ({"__metadata__": {"step": 5}, "a": F32_4}, bytes(4),
                                           ["__metadata__", "strings"]),
    "__metadata__ with a nested map": ({"__metadata__": {"x": {"y": "z"}}, "a": F32_4}, bytes(4),
                                       ["__metadata__"]),
    "__metadata__ is a list": ({"__metadata__": ["x"], "a": F32_4}, bytes(4), ["__metadata__"]),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_header_is_a_problem_in_words_and_the_reference_agrees(tmp_path, case):
    header, data, words = BAD[case]
    path = craft(tmp_path / "bad.safetensors", header, data)

    info = read(path)  # never raises

    assert not info.ok
    text = " | ".join(messages(info))
    for word in words:
        assert word in text, f"{case}: {word!r} not in {text!r}"
    for p in info.problems:
        assert p.file == "bad.safetensors"
        assert "\n" not in p.message and "Traceback" not in p.message
    assert not reference_accepts(path), "the real library accepts this file; the test is wrong"


def test_duplicate_tensor_name_is_flagged_although_json_loads_hides_it(tmp_path):
    raw = (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
           b'"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}')
    path = craft(tmp_path / "dup.safetensors", raw, bytes(4))
    assert len(json.loads(raw)) == 1  # the trap: the parsed dict shows one tensor

    info = read(path)

    assert any("'w'" in m and "twice" in m for m in messages(info)), messages(info)
    assert not info.ok


def test_duplicate_hidden_behind_unicode_escapes_is_still_flagged(tmp_path):
    # "\u0064ata_offsets" is "data_offsets": a raw-text count would miss it.
    raw = (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
           b'"w": {"\\u0064type": "F32", "shape": [1], "\\u0064ata_offsets": [0, 4]}}')
    path = craft(tmp_path / "dup.safetensors", raw, bytes(4))
    assert len(json.loads(raw)) == 1
    assert any("'w'" in m and "twice" in m for m in messages(read(path)))


def test_metadata_key_named_data_offsets_is_not_a_duplicate(tmp_path):
    # The reader's fast path counts '"data_offsets"' in the raw text; a metadata key with that
    # name must not make a valid file look damaged.
    path = save(tmp_path / "m.safetensors", {"a": torch.ones(2), "b": torch.zeros(3)},
                metadata={"data_offsets": "x", "dtype": "y", "format": "pt"})
    info = read(path)
    assert_matches_reference(path, info)
    assert info.metadata == {"data_offsets": "x", "dtype": "y", "format": "pt"}


# --- accepted quirks (FORMATS.md "Safetensors") -----------------------------------------------

GOOD = {
    "scalar shape []": ({"s": entry("F32", [], 0, 4)}, bytes(4)),
    "zero-size tensors sharing an offset": (
        {"e1": entry("F32", [0], 0, 0), "e2": entry("F16", [0, 3], 0, 0),
         "a": entry("F32", [1], 0, 4), "e3": entry("I8", [5, 0], 4, 4)}, bytes(4)),
    "empty header with no data": ({}, b""),
    "tensors out of offset order in the JSON": (
        {"z": entry("F32", [1], 8, 12), "y": entry("F32", [1], 4, 8), "x": F32_4}, bytes(12)),
    "__metadata__ null": ({"__metadata__": None, "a": F32_4}, bytes(4)),
    "__metadata__ only": ({"__metadata__": {"format": "pt"}}, b""),
    "unknown extra field in an entry": (
        {"a": {**F32_4, "extra": [1, {"x": None}]}}, bytes(4)),
    "spaces around the JSON (writer padding)": (
        b'  {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}     ', bytes(4)),
}


@pytest.mark.parametrize("case", GOOD, ids=list(GOOD))
def test_accepted_quirk_matches_safe_open(tmp_path, case):
    header, data = GOOD[case]
    path = craft(tmp_path / "ok.safetensors", header, data)

    info = read(path)

    assert info.problems == (), messages(info)
    assert reference_accepts(path)
    assert {t.name: (t.dtype, t.shape) for t in info.tensors} == reference_tensors(path)


def test_metadata_null_is_read_as_no_metadata(tmp_path):
    path = craft(tmp_path / "ok.safetensors", {"__metadata__": None, "a": F32_4}, bytes(4))
    info = read(path)
    assert info.metadata is None and [t.name for t in info.tensors] == ["a"]


# --- the length prefix and the size cap --------------------------------------------------------

def test_file_shorter_than_8_bytes(tmp_path):
    for size in (0, 1, 7):
        path = tmp_path / f"short{size}.safetensors"
        path.write_bytes(b"\x05" * size)
        info = read(path)
        assert not info.ok
        assert "too small" in info.error and f"{size} bytes" in info.error
        assert not reference_accepts(path)


def test_header_length_over_the_cap_is_rejected_by_the_cap(tmp_path):
    # The file is long enough, so only the 100,000,000 cap can reject it.
    path = sparse(tmp_path / "big.safetensors", 100_000_001, 8 + 100_000_001 + 16)
    info = read(path)
    assert "100,000,001" in info.error and "limit" in info.error
    assert not reference_accepts(path)


def test_header_length_of_exactly_the_cap_is_allowed_and_fails_as_json(tmp_path):
    path = sparse(tmp_path / "edge.safetensors", 100_000_000, 8 + 100_000_000)
    info = read(path)
    assert "limit" not in info.error
    assert "not valid JSON" in info.error  # the content is NUL bytes: the right error


def test_header_length_u64_max(tmp_path):
    path = craft(tmp_path / "max.safetensors", b"{}", n=2**64 - 1)
    info = read(path)
    assert "limit" in info.error
    assert not reference_accepts(path)


def test_header_length_past_the_end_of_the_file(tmp_path):
    path = craft(tmp_path / "cut.safetensors", b'{"a": 1}', n=1000)  # 16 bytes exist
    info = read(path)
    assert "1,000" in info.error and "only 8" in info.error and "truncated" in info.error
    assert not reference_accepts(path)


def test_real_file_truncated_by_100_bytes(tmp_path):
    path = save(tmp_path / "t.safetensors", {"a": torch.randn(40), "b": torch.randn(10)})
    size = path.stat().st_size
    os.truncate(path, size - 100)

    info = read(path)

    assert "truncated" in info.error and "100 missing" in info.error
    assert sorted(t.name for t in info.tensors) == ["a", "b"]  # the header still shows them
    assert not reference_accepts(path)


def test_real_file_with_bytes_appended(tmp_path):
    path = save(tmp_path / "t.safetensors", {"a": torch.randn(4)})
    with open(path, "ab") as f:
        f.write(b"junk")
    info = read(path)
    assert "4 unexpected bytes" in info.error
    assert not reference_accepts(path)


# --- only the header is read -------------------------------------------------------------------

def test_reads_only_the_length_prefix_and_the_header(tmp_path, monkeypatch):
    n_data = 64 * 1024 * 1024
    path = craft(tmp_path / "big.safetensors", {"w": entry("U8", [n_data], 0, n_data)})
    n = header_len(path)
    os.truncate(path, 8 + n + n_data)  # sparse: 64 MiB of data that costs no disk
    got = {"bytes": 0, "opens": 0}

    class Counting:
        def __init__(self, f):
            self._f = f

        def read(self, size=-1):
            chunk = self._f.read(size)
            got["bytes"] += len(chunk)
            return chunk

        def __getattr__(self, name):
            if name.startswith("read"):  # readinto, readline, readlines: not expected
                raise AssertionError(f"reader used {name}")
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._f.__exit__(*exc)

    real_open = st_reader.open_regular

    def counting_open(*args, **kwargs):
        got["opens"] += 1
        return Counting(real_open(*args, **kwargs))

    monkeypatch.setattr(st_reader, "open_regular", counting_open)
    info = read(path)

    assert info.problems == ()
    assert got["opens"] == 1
    assert got["bytes"] == 8 + n


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
def test_kernel_sees_no_read_of_the_tensor_data(tmp_path):
    """Independent of how the reader is written: count the bytes read() syscalls returned."""
    n_data = 64 * 1024 * 1024
    path = craft(tmp_path / "big.safetensors", {"w": entry("U8", [n_data], 0, n_data)})
    os.truncate(path, 8 + header_len(path) + n_data)
    before = _rchar()
    info = read(path)
    read_bytes = _rchar() - before
    assert info.problems == ()
    assert read_bytes < 64 * 1024, f"{read_bytes:,} bytes read for a {n_data:,}-byte file"


# --- unreadable files --------------------------------------------------------------------------

def test_permission_denied_is_a_problem_not_a_crash(tmp_path, monkeypatch):
    path = save(tmp_path / "locked.safetensors", {"a": torch.ones(1)})

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(st_reader, "open_regular", deny)
    info = read(path)
    assert "permission denied" in info.error
    assert info.tensors == ()


def test_real_chmod_000_is_a_problem_not_a_crash():
    path = locked_file({"a": torch.ones(1)})
    try:
        error = unprivileged(lambda: read(path).error)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    assert "permission denied" in error


def test_missing_file_and_folder_are_problems(tmp_path):
    gone = read(tmp_path / "gone.safetensors")
    assert "does not exist" in gone.error and gone.size is None
    (tmp_path / "dir.safetensors").mkdir()
    folder = read(tmp_path / "dir.safetensors")
    assert "folder" in folder.error
