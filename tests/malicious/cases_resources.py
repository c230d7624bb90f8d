"""Resource attacks and pickles our inert model cannot follow: hash-colliding keys, integers too
long to print, operations on objects that are not plain containers."""

from __future__ import annotations

import struct

from tests.malicious.make_corpus import (
    ADAMW_STORAGES,
    DAMAGED,
    ODD,
    SCHEDULER,
    TITAN_ITEMS,
    TRAINER_STATE,
    Build,
    Raw,
    adamw,
    case,
    dcp_folder,
    deflated,
    dumps,
    hf_checkpoint,
    hf_optimizer_case,
    jdump,
    put,
    safetensors,
    st_case,
    tensor,
    torch_zip,
)

P = 2**61 - 1  # sys.hash_info.modulus: every k * P hashes to 0
BIG = 10**4999 + 7  # 5,000 digits: Python refuses to print past 4,300
FLOOD_WORDS = r"share a hash value"


def _int(x: int) -> bytes:
    return dumps(x)[2:-1]  # the value's opcodes alone (no memo)


def _colliding_bases(m: int) -> bytes:
    """k * P for k in 1..m, each kept in memo slot k - 1 (LONG_BINPUT) and popped."""
    return b"".join(_int(k * P) + b"r" + struct.pack("<I", k - 1) + b"0" for k in range(1, m + 1))


def _pairs(m: int, n: int) -> list[bytes]:
    """n tuples (a, b) of memoised colliding ints: all of them share one hash value, 5 bytes
    each (BINGET, BINGET, TUPLE2)."""
    return [b"h" + bytes([i]) + b"h" + bytes([j]) + b"\x86"
            for i in range(m) for j in range(m)][:n]


def _colliding_dict(n: int) -> Raw:
    """A dict of n int keys k * P, in SETITEMS batches of 1,000 as pickle writes them."""
    out = bytearray(b"}")
    for start in range(1, n + 1, 1000):
        out += b"(" + b"".join(_int(k * P) + b"K\x00"
                               for k in range(start, min(start + 1000, n + 1))) + b"u"
    return Raw(bytes(out))


def _colliding_frozenset(n: int) -> Raw:
    """FROZENSET (protocol 4) of n colliding tuples."""
    return Raw(_colliding_bases(120) + b"(" + b"".join(_pairs(120, n)) + b"\x91")


@case(name="pickle-hash-flood-dict", path="pickle-hash-flood-dict/checkpoint-1", exits=ODD,
      live=None,
      tries="optimizer.pt (its data.pkl deflated, as zips may) whose state dict holds a dict of "
            "30,000 int keys k*(2**61-1), all with hash 0: inserting them naively compares each "
            "with every earlier one (quadratic: 50,000 such keys took 18 s)",
      bad="pickle-hash-flood-dict/checkpoint-1/optimizer.pt", words=FLOOD_WORDS)
def _():
    pkl = dumps(adamw({"payload": _colliding_dict(30_000)}), 2)
    hf_checkpoint("pickle-hash-flood-dict/checkpoint-1",
                  torch_zip(deflated("archive/data.pkl", pkl), ADAMW_STORAGES))


hf_optimizer_case(
    "pickle-hash-flood-frozenset", _colliding_frozenset(14_000),
    "optimizer.pt (protocol 4) with a frozenset of 14,000 tuples of memoised ints k*(2**61-1): "
    "every tuple has the same hash, so building the set is quadratic",
    FLOOD_WORDS, protocol=4, live=None, exits=ODD)


# -- integers too long to print -----------------------------------------------------------------

HUGE_WORDS = r"integer of 5,000 digits"


@case(name="huge-int-scheduler", path="huge-int-scheduler/checkpoint-1", exits=ODD, live=None,
      tries="scheduler.pt whose last_epoch is a 5,000-digit integer (LONG4): printing it raises "
            "ValueError past Python's 4,300-digit limit",
      bad="huge-int-scheduler/checkpoint-1/scheduler.pt", words=HUGE_WORDS)
def _():
    hf_checkpoint("huge-int-scheduler/checkpoint-1",
                  scheduler__pt=torch_zip(dumps(dict(SCHEDULER, last_epoch=BIG), 2)))


@case(name="huge-int-lr", path="huge-int-lr/checkpoint-1", exits=ODD, live=None,
      tries="optimizer.pt whose param group's lr is a negative 5,000-digit integer",
      bad="huge-int-lr/checkpoint-1/optimizer.pt", words=r"negative integer of 5,000 digits")
def _():
    sd = adamw()
    sd["param_groups"][0]["lr"] = -BIG
    hf_checkpoint("huge-int-lr/checkpoint-1", torch_zip(dumps(sd, 2), ADAMW_STORAGES))


@case(name="huge-int-lightning-step", path="huge-int-lightning-step/epoch=0-step=1.ckpt",
      exits=ODD, live=None,
      tries="a Lightning .ckpt whose global_step and epoch are 5,000-digit integers",
      bad="huge-int-lightning-step/epoch=0-step=1.ckpt", words=HUGE_WORDS)
def _():
    ckpt = {"epoch": BIG, "global_step": BIG, "pytorch-lightning_version": "2.5.0",
            "state_dict": {"layer.w": tensor("3", (4,))}, "loops": {}, "callbacks": {},
            "optimizer_states": [adamw()], "lr_schedulers": [SCHEDULER]}
    put("huge-int-lightning-step/epoch=0-step=1.ckpt",
        torch_zip(dumps(ckpt, 2), {**ADAMW_STORAGES, "3": struct.pack("<4f", 1, 2, 3, 4)},
                  root="epoch=0-step=1"))


@case(name="huge-int-dcp-step", path="huge-int-dcp-step/step-1", exits=ODD, live=None,
      tries="a DCP checkpoint whose train_state.step item (a torch.save'd blob in the rank file) "
            "is a 5,000-digit integer",
      bad="huge-int-dcp-step/step-1/__0_0.distcp", words=HUGE_WORDS)
def _():
    meta, rank = dcp_folder({**TITAN_ITEMS, "train_state.step": BIG})
    put("huge-int-dcp-step/step-1/.metadata", meta)
    put("huge-int-dcp-step/step-1/__0_0.distcp", rank)


@case(name="huge-int-trainer-state", path="huge-int-trainer-state/checkpoint-1", exits=DAMAGED,
      live=None,
      tries="trainer_state.json whose global_step is a 5,000-digit number (json.loads refuses "
            "it past 4,300 digits)",
      bad="huge-int-trainer-state/checkpoint-1/trainer_state.json", words=HUGE_WORDS)
def _():
    raw = jdump(TRAINER_STATE).replace(b'"global_step": 1,', b'"global_step": ' + b"9" * 5000
                                       + b",")
    hf_checkpoint("huge-int-trainer-state/checkpoint-1", trainer_state__json=raw)


st_case("st-dim-2-64", safetensors({
    "w": {"dtype": "U8", "shape": [2**64], "data_offsets": [0, 2**64]}}, b"\0" * 8),
    "a dimension and an offset of 2**64 (one past what a u64 holds)",
    r"below 2\*\*64|< 2\*\*64")


# -- what our inert model cannot follow: findings, not silence --------------------------------

DIFFERS = r"torch\.load would build something this listing does not show"


def _opcodes(value) -> bytes:
    return dumps(value)[2:-1]


hf_optimizer_case(
    "diff-setitem-tensor",
    Raw(_opcodes(tensor("1", (4,))) + b"K\x00G" + struct.pack(">d", 9.0) + b"s"),
    "SETITEM on a tensor: torch.load calls tensor[0] = 9.0, writing into exp_avg's storage; a "
    "listing of the inert tensor would not show it", r"writes items into a tensor.*" + DIFFERS,
    live=None, exits=ODD)
hf_optimizer_case(
    "diff-build-tensor", Build(tensor("1", (4,)), {"requires_grad": True, "data": [0]}),
    "BUILD on a tensor built by _rebuild_tensor_v2: torch.load calls its __setstate__ with "
    "a state the listing drops", r"sets the state of a tensor.*" + DIFFERS, live=None, exits=ODD)
hf_optimizer_case(
    "diff-bytearray-appends",
    Raw(b"\x96" + struct.pack("<Q", 2) + b"ab" + b"(KAKBe"),
    "APPENDS onto a bytearray (protocol 5): torch.load extends it to b'abAB'",
    r"appends items to a bytearray.*" + DIFFERS, protocol=5, live=None, exits=ODD)
hf_optimizer_case(
    "diff-binstring-latin1",
    Raw(b"(U\x04caf\xe9T" + struct.pack("<i", 3) + b"\xff\xfe\xfdl"),
    "SHORT_BINSTRING and BINSTRING with bytes that are not ASCII (nor UTF-8): pickle.load "
    "fails on them, torch.load decodes them as UTF-8 and fails too",
    r"not ASCII", live=None, exits=ODD)
