"""A safetensors header's parse is bounded by what its bytes can hold (README "Limits"): the
JSON keys and values are counted in the raw bytes before anything is parsed, and a header
over CKPT_BROWSER_MAX_SAFETENSORS_VALUES is refused with one line. A million tensors fit in
the format's 100,000,000-byte header; Python's objects for them took 907 MB and 8.7 s.
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import pytest

from ckpt_browser import limits
from ckpt_browser.readers import safetensors as st_reader
from ckpt_browser.readers import stjson
from ckpt_browser.readers.safetensors import read_header


def write(path, header: bytes, data_len: int = 0):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + data_len)  # sparse: the data is never read
    return path


def million_tensors() -> bytes:
    """1,000,000 empty U8 tensors (all at offset 0, valid for the loader): 55 MB of header."""
    body = b",".join(b'"t%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}' % i
                     for i in range(1_000_000))
    return b"{" + body + b"}"


def test_a_million_tensors_are_refused_with_one_line_before_any_parse(tmp_path, monkeypatch):
    path = write(tmp_path / "model.safetensors", million_tensors())

    def no_parse(*args, **kwargs):
        raise AssertionError("the header was parsed")

    monkeypatch.setattr(stjson.json, "loads", no_parse)
    info = read_header(str(path), path.name)

    assert info.tensors == () and len(info.problems) == 1
    message = info.error
    assert "\n" not in message and "CKPT_BROWSER_MAX_SAFETENSORS_VALUES raises it" in message
    assert "JSON values, over the 6,000,000 limit" in message


def test_the_budget_counts_every_key_and_value_the_parse_would_build(tmp_path, monkeypatch):
    """Not only tensors: a valid header whose unknown field holds 60,000 empty lists."""
    header = (b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":['
              + b",".join([b"[]"] * 60_000) + b"]}}")
    path = write(tmp_path / "model.safetensors", header, 4)
    assert read_header(str(path), path.name).ok  # under the default cap: read, and valid

    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, safetensors_values=60_000))
    info = read_header(str(path), path.name)
    assert not info.ok and "over the 60,000 limit" in info.error


def test_raising_the_cap_reads_the_header(tmp_path, monkeypatch):
    entries = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}
               for i in range(100)}
    path = write(tmp_path / "model.safetensors", json.dumps(entries).encode(), 100)
    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, safetensors_values=1000))
    assert "over the 1,000 limit" in read_header(str(path), path.name).error

    monkeypatch.setattr(limits, "LIMITS", limits.Limits.from_env(
        {"CKPT_BROWSER_MAX_SAFETENSORS_VALUES": "2_000"}))
    info = read_header(str(path), path.name)
    assert info.ok and len(info.tensors) == 100


@pytest.mark.parametrize("header", [
    b'{"__metadata__":{"url":"http://x:80"},"a:b":{"dtype":"F32","shape":[1],'
    b'"data_offsets":[0,4]}}',
    json.dumps({f"layer.{i}.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i,
                                                                                    4 * i + 4]}
                for i in range(50)}).encode(),
], ids=["colons in strings", "a plain header"])
def test_common_headers_take_the_fast_reading(tmp_path, monkeypatch, header):
    """The exact reading (a second parse, a Python call per object) is only for odd headers."""
    def exact(*args, **kwargs):
        raise AssertionError("read exactly")

    monkeypatch.setattr(st_reader.stjson, "loads_exact", exact)
    path = write(tmp_path / "model.safetensors", header, 4 * header.count(b'"dtype"'))
    info = read_header(str(path), path.name)
    assert info.ok and len(info.tensors) == header.count(b'"dtype"')
