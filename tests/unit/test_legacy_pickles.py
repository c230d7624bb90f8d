"""Legacy (pre-zip) torch files however their first pickle writes torch's magic number, and all
five of their pickles read with the same policy as any pickle (FORMATS.md "torch.save legacy
format").

torch.load (weights_only=False) unpickles the first pickle and compares its value with
MAGIC_NUMBER, then unpickles the protocol version, the system info, the object and the list of
storage keys: a file is legacy when that first value is the magic number, whatever opcodes
write it, and a payload in any of the five runs. Each variant is checked against torch.load
on a clean file written here; hostile copies are only ever read by ckpt-browser.
"""

from __future__ import annotations

import pickle
import pickletools
import struct

import pytest
import torch

from ckpt_browser.model import ERROR
from ckpt_browser.readers.files import read_file, sniff
from ckpt_browser.readers.torchfile import read_pickle_file

from .state_helpers import SystemCall

MAGIC = torch.serialization.MAGIC_NUMBER
RAW = MAGIC.to_bytes(10, "little", signed=True)
TORCH_MAGIC = pickle.dumps(MAGIC, protocol=2)  # what torch.save writes: PROTO 2, LONG1, STOP
MAGICS = {
    "long1": TORCH_MAGIC,
    "long4": b"\x80\x02\x8b" + struct.pack("<i", 10) + RAW + b".",
    "long4-11-bytes": b"\x80\x02\x8b" + struct.pack("<i", 11) + RAW + b"\x00.",
    "no-proto": b"\x8a\x0a" + RAW + b".",
    "protocol-0-long": b"L%dL\n." % MAGIC,
    "protocol-0-int": b"I%d\n." % MAGIC,
    "protocol-0-hex": b"I0x1950a86a20f9469cfc6c\n.",
    "protocol-4-framed": b"\x80\x04\x95" + struct.pack("<Q", 13) + b"\x8a\x0a" + RAW + b".",
    "behind-pops": b"\x80\x02" + b"N0" * 40 + b"\x8a\x0a" + RAW + b".",  # past sniff's 64 bytes
    "behind-a-long-mark": b"(" + b"N" * 5000 + b"1L%dL\n." % MAGIC,  # past the 4 KiB head
}


def pickles(data: bytes) -> tuple[list[bytes], bytes]:
    """The five pickles of a legacy file, and the storages after them."""
    out, at = [], 0
    for _ in range(5):
        end = next(pos for op, _, pos in pickletools.genops(data[at:]) if op.name == "STOP")
        out.append(data[at:at + end + 1])
        at += end + 1
    return out, data[at:]


@pytest.fixture
def saved(tmp_path) -> tuple[list[bytes], bytes]:
    src = tmp_path / "src.pt"
    torch.save({"w": torch.arange(4.0)}, src, _use_new_zipfile_serialization=False)
    parts, rest = pickles(src.read_bytes())
    assert parts[0] == TORCH_MAGIC
    return parts, rest


def errors(pf) -> list[str]:
    return [p.message for p in pf.problems if p.severity == ERROR]


@pytest.mark.parametrize("magic", MAGICS.values(), ids=MAGICS)
def test_every_magic_number_torch_accepts_is_read_as_legacy(tmp_path, saved, magic):
    parts, rest = saved
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(magic + b"".join(parts[1:]) + rest)
    assert torch.equal(torch.load(path, weights_only=False)["w"], torch.arange(4.0))
    pf = read_pickle_file(str(path), path.name)
    assert (pf.kind, pf.problems) == ("torch-legacy", ())
    assert [p for p, _ in pf.tensors] == ["w"] and pf.storages
    info = read_file(str(tmp_path), path.name)
    assert (info.format, len(info.tensors), info.problems) == ("torch-legacy", 1, ())
    if len(magic) <= 64:
        assert sniff(path.read_bytes()[:64]) == "torch-legacy"


def hidden(payload, value) -> bytes:
    """A pickle whose value is `value`, after a call whose result it drops (MARK ... POP_MARK)."""
    call = pickle.dumps(payload, protocol=2)[2:-1]
    return b"\x80\x02(" + call + b"1" + pickle.dumps(value, protocol=2)[2:]


@pytest.mark.parametrize("at, what", [(0, "magic number"), (1, "protocol version"),
                                      (2, "system info"), (4, "storage keys")])
def test_a_payload_in_any_of_the_five_pickles_is_unsafe(tmp_path, saved, at, what):
    sentinel = tmp_path / "PWNED"
    parts, rest = saved
    evil = SystemCall(f"touch {sentinel}")
    values = {0: MAGIC, 1: 1001}
    parts[at] = hidden(evil, values[at]) if at in values else pickle.dumps(evil, protocol=2)
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(b"".join(parts) + rest)
    pf = read_pickle_file(str(path), path.name)
    assert not sentinel.exists()
    assert pf.kind == "torch-legacy" and "posix.system" in pf.unsafe
    assert any(m.startswith(f"unsafe: its {what} pickle calls posix.system") for m in errors(pf))
    if at < 4:  # torch goes on to the object: so does the reader
        assert [p for p, _ in pf.tensors] == ["w"]


def test_a_plain_pickle_holding_the_magic_number_is_a_plain_pickle(tmp_path):
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps([MAGIC, 1], protocol=2) + pickle.dumps(1001, protocol=2))
    assert sniff(path.read_bytes()[:64]) == "pickle"
    pf = read_pickle_file(str(path), path.name)
    assert (pf.kind, pf.obj) == ("pickle", [MAGIC, 1])
