"""Hostile numbers and hashes in pickles and JSON, and what our inert model cannot follow:
each is bounded work and a warning in words, never a hang, a crash or silence.

Pickles are written by the stdlib `pickle` module (real objects) or opcode by opcode. No test
measures time: a quadratic regression shows as a test that never ends (the runner's timeout).
"""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import struct
import sys

import pytest

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe import hashing, read_pickle_bytes, unpickle
from ckpt_browser.readers.safetensors import parse_header
from ckpt_browser.report.json_report import strict
from ckpt_browser.standins import HugeInt, TensorRef, bounded_int, int_from_text

P = 2**61 - 1  # sys.hash_info.modulus: k * P all hash to 0


def load(data: bytes):
    obj, unsafe, problems = read_pickle_bytes(data, "f.pkl")
    return obj, [p.line() for p in problems]


def warned(problems, *words) -> bool:
    return any(all(w in p for w in words) for p in problems)


# -- keys sharing one hash value ----------------------------------------------------------------

COLLIDING = {
    "ints": [k * P for k in range(1, 5001)],
    "tuples": [(k * P, -k * P) for k in range(1, 5001)],
    "frozensets": [frozenset([k * P]) for k in range(1, 5001)],
}


@pytest.mark.parametrize("kind", sorted(COLLIDING))
@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_colliding_dict_keys_are_bounded_and_said(kind, protocol):
    keys = COLLIDING[kind]
    obj, problems = load(pickle.dumps(dict.fromkeys(keys, 1), protocol=protocol))
    assert len(obj) == len(keys) and all(v == 1 for v in obj.values())
    kept = [k for k in obj if type(k) is not str]
    assert kept == keys[:limits.LIMITS.hash_keys]  # the first 32 as they are, in order
    assert all(k.endswith("sharing a hash value>") for k in obj if type(k) is str)
    flood = [p for p in problems if "share a hash value" in p]
    assert flood == ["error: f.pkl: 5,000 keys of one dict or set share a hash value "
                     "(a hash-flooding attack?); 4,968 are shown under placeholder keys"]


@pytest.mark.parametrize("protocol", [0, 2, 4])
@pytest.mark.parametrize("make", [set, frozenset])
def test_colliding_set_items_are_bounded(make, protocol):
    obj, problems = load(pickle.dumps(make(COLLIDING["ints"]), protocol=protocol))
    assert type(obj) is make and len(obj) == 5000
    assert warned(problems, "5,000 keys", "share a hash value")


def test_the_real_attack_size_stays_bounded():
    """50,000 colliding ints took 18 s (every command, and the TUI said "reading..." on)."""
    # written item by item: building the real dict first would itself take 18 s
    items = b"".join(pickle.dumps(k * P, protocol=2)[2:-1] + b"K\x00" for k in range(50_000))
    obj, problems = load(b"\x80\x02}(" + items + b"u.")
    assert len(obj) == 50_000 and warned(problems, "49,999 keys", "49,967 are shown")


def test_floats_sharing_a_hash_are_counted_too(monkeypatch):
    keys = [2.0 ** (61 * j) for j in range(17)]  # all hash to 1
    assert len({hash(k) for k in keys}) == 1
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, hash_keys=4))
    obj, problems = load(pickle.dumps(dict.fromkeys(keys, 0), protocol=2))
    assert list(obj)[:4] == keys[:4] and len(obj) == 17
    assert warned(problems, "17 keys of one dict or set share a hash value", "13 are shown")


def test_str_bytes_and_small_int_keys_take_the_fast_path(monkeypatch):
    def counted(*args, **kwargs):
        raise AssertionError("a fast key went through the per-hash count")

    monkeypatch.setattr(hashing.Hashing, "admitted", counted)
    value = {**{str(i): i for i in range(3000)}, **{i: i for i in range(-2000, 2000)},
             **{bytes([i % 256]) * (i // 256 + 1): i for i in range(1000)}, True: 1, None: 0,
             P - 1: 1, -(P - 1): 2}
    obj, problems = load(pickle.dumps(value, protocol=2))
    assert obj == value and problems == []
    assert hashing.fast_key("x") and hashing.fast_key(P - 1) and not hashing.fast_key(P)


def test_batches_of_one_dict_share_one_count():
    """pickle sends a dict's items in SETITEMS batches of 1,000: the bound is per dict."""
    data = pickle.dumps({"d": dict.fromkeys(COLLIDING["ints"], 0), "e": {1: 2}}, protocol=2)
    assert data.count(pickle.SETITEMS) >= 5
    obj, problems = load(data)
    assert sum(type(k) is int for k in obj["d"]) == limits.LIMITS.hash_keys
    assert obj["e"] == {1: 2}


def test_colliding_param_ids_do_not_make_the_analysis_quadratic(tmp_path):
    from ckpt_browser.parts.optimizer import optimizer_facts

    ids = [k * P for k in range(1, 50_001)]
    sd = {"state": {i: {"step": ids[i]} for i in range(50_000)},
          "param_groups": [{"lr": 0.1, "params": ids}]}
    facts = optimizer_facts(sd, lambda v: None)  # 50,000 colliding steps: 17 s before
    assert facts["params"] == 50_000 and len(facts["step"]) == 50_000


# -- integers too long to print -------------------------------------------------------------------

def test_huge_int_stand_in():
    assert str(HugeInt(5000)) == "an integer of 5,000 digits" == repr(HugeInt(5000))
    assert str(HugeInt(1234, negative=True)) == "a negative integer of 1,234 digits"
    assert bounded_int(10**999) == 10**999 and bounded_int(-(10**1000)) == HugeInt(1001, True)
    assert bounded_int(10**5000 - 1) == HugeInt(5000)
    assert bounded_int(2**2_000_000) == HugeInt(602_060, False, False)  # never printed
    assert int_from_text("9" * 5000) == HugeInt(5000) and int_from_text("-12") == -12
    assert strict({"a": [HugeInt(5000)]}) == {"a": ["an integer of 5,000 digits"]}


@pytest.mark.parametrize("protocol", [0, 1, 2, 4])
def test_huge_ints_from_every_int_opcode(protocol):
    big = 10**4999 + 7
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # protocols 0 and 1 write ints as text: a writer can lift it
    try:
        data = pickle.dumps({"last_epoch": big, "neg": -big, "ok": 10**900}, protocol=protocol)
    finally:
        sys.set_int_max_str_digits(limit)
    obj, problems = load(data)
    assert obj == {"last_epoch": HugeInt(5000), "neg": HugeInt(5000, True), "ok": 10**900}
    assert warned(problems, "an integer of 5,000 digits is shown by its length only")


def test_huge_int_text_opcodes_are_never_parsed():
    for op in (b"I", b"L"):
        obj, _ = load(op + b"-" + b"7" * 100_000 + (b"L" if op == b"L" else b"") + b"\n.")
        assert obj == HugeInt(100_000, True)
    assert load(b"I0x" + b"f" * 2000 + b"\n.")[0] == HugeInt(2409)  # hex has no digit limit
    assert load(b"I01\n.")[0] is True and load(b"I12\n.")[0] == 12


def test_memo_indices_are_bounded():
    assert load(b"I5\np12\ng12\n\x86.")[0] == (5, 5)
    for bad in (b"p" + b"9" * 5000, b"p" + str(2**63).encode(), b"p-1"):
        obj, problems = load(b"I5\n" + bad + b"\n.")
        assert obj is None and warned(problems, "error", "index", "out of range"), problems


def test_huge_ints_in_json_readers(tmp_path):
    from ckpt_browser.parts.files import read_json

    path = tmp_path / "trainer_state.json"
    path.write_text('{"global_step": ' + "9" * 5000 + ', "epoch": 1}')
    doc, why = read_json(str(path), 10**6)
    assert why == "" and doc == {"global_step": HugeInt(5000), "epoch": 1}


def _header(entry: dict, digits: bytes = b"") -> bytes:
    raw = json.dumps({"w": entry}).encode().replace(b'"HUGE"', digits)
    return raw


@pytest.mark.parametrize("field, value, words", [
    ("shape", [2**64], "tensor 'w': shape [18446744073709551616] is not a list of non-negative "
     "integers below 2**64"),
    # serde_json (the Rust loader's parser) refuses the whole header for a number past a 64-bit
    # float, wherever it is: no tensor is listed, the number is shown clipped
    ("shape", "HUGE", "the number 999999999999999999999999999999... (5,000 characters) is "
     "out of range"),
    ("data_offsets", "HUGE", "the number 999999999999999999999999999999... (5,000 characters) "
     "is out of range"),
    ("data_offsets", [0, 2**64], "tensor 'w': data_offsets [0, 18446744073709551616] is not "
     "[begin, end] with 0 <= begin <= end < 2**64"),
    ("shape", [2**63] * 300, "tensor 'w': shape [9223372036854775808, 9223372036854775808, "),
])
def test_safetensors_numbers_out_of_range_name_the_tensor(field, value, words):
    entry = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
    entry[field] = ([value] if field == "shape" else [0, value]) if value == "HUGE" else value
    raw = _header(entry, b"9" * 5000)
    info = parse_header(raw, name="model.safetensors", path="model.safetensors",
                        size=8 + len(raw) + 16, n=len(raw))
    messages = " | ".join(p.message for p in info.problems)
    assert words in messages, messages
    assert all(len(p.message) < 400 for p in info.problems)


# -- what our inert model cannot follow: a warning, not silence or a failure ----------------------

def tensor_pickle(tail: bytes) -> bytes:
    pid = pickle.dumps(("storage", "X", "0", "cpu", 4), protocol=2)[2:-1]
    pid = pid.replace(b"\x8c\x01X" if b"\x8c\x01X" in pid else b"X\x01\x00\x00\x00X",
                      b"ctorch\nFloatStorage\n")
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"QK\x00K\x04\x85K\x01\x85"
            b"\x89ccollections\nOrderedDict\n)RtR" + tail + b".")


def test_setitem_on_a_tensor_is_a_finding():
    obj, problems = load(tensor_pickle(b"K\x00G@\x00\x00\x00\x00\x00\x00\x00s"))
    assert type(obj) is TensorRef
    assert warned(problems, "writes items into a tensor (SETITEM on a tensor)",
                  "torch.load would build something this listing does not show")


def test_build_on_a_tensor_is_a_finding():
    obj, problems = load(tensor_pickle(b"}U\x01aK\x01sb"))
    assert type(obj) is TensorRef and warned(problems, "sets the state of a tensor (BUILD")


def test_setitems_on_a_deque_is_a_finding():
    import collections

    data = pickle.dumps(collections.deque([1, 2]), protocol=2)[:-1]
    obj, problems = load(data + b"(K\x00K\x07u.")
    assert obj == [1, 2] and warned(problems, "writes items into a list (SETITEM on a list)")


def test_appends_on_a_bytearray_is_a_finding():
    data = pickle.dumps(bytearray(b"ab"), protocol=5)[:-1]
    obj, problems = load(data + b"(K\x41K\x42e.")
    assert obj == bytearray(b"ab")
    assert warned(problems, "appends items to a bytearray (APPENDS on a bytearray)")


def test_build_state_of_a_recorded_dict():
    import collections

    sd = collections.OrderedDict(w=1)
    sd._metadata = {"": {"version": 1}}  # what every torch state_dict carries: no warning
    obj, problems = load(pickle.dumps(sd, protocol=2))
    assert obj == {"w": 1} and problems == []
    data = pickle.dumps(collections.OrderedDict(w=1), protocol=2)[:-1]
    obj, problems = load(data + b"}U\x04hookK\x01sb.")
    assert obj == {"w": 1} and warned(problems, "sets the state of a dict (BUILD on a dict)")


@pytest.mark.parametrize("raw, text, how", [
    (b"caf\xc3\xa9", "caf\u00e9", "torch.load reads it as UTF-8"),
    (b"\xff\xfe", "\u00ff\u00fe", "pickle.load and torch.load both fail on it"),
])
def test_non_ascii_py2_strings_are_findings(raw, text, how):
    for opcode in (b"U" + bytes([len(raw)]), b"T" + struct.pack("<i", len(raw))):
        obj, problems = load(b"\x80\x02" + opcode + raw + b".")
        assert obj == text and warned(problems, "not ASCII", how)
    assert load(b"\x80\x02U\x03abc.") == ("abc", [])


def test_dict_subclass_items_across_batches_are_all_kept():
    """A dict subclass gets SETITEMS in batches of 1,000: every batch is kept, in place."""
    data = pickle.dumps(_Sub({i: i for i in range(2500)}), protocol=2)
    data = data.replace(b"tests.unit.test_pickle_bounds\n_Sub", b"mymod\nSub")
    obj = unpickle(io.BytesIO(data), "f.pkl", {"mymod.Sub": None})
    state = obj.obj.state if obj.ok else None
    assert state is not None and len(state["__dictitems__"]) == 2500, obj.problems


class _Sub(dict):
    pass


def test_an_opcode_budget_is_an_error_never_a_truncated_ok(monkeypatch):
    data = pickle.dumps(list(range(5000)), protocol=2)
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, pickle_ops=2048))
    got = unpickle(io.BytesIO(data), "f.pkl")
    assert not got.ok and got.obj is None
    assert [p.severity for p in got.problems] == ["error"]
    assert "more than 2,048 opcodes" in got.problems[0].message
