"""The restricted unpickler: what it builds, what it refuses, and that nothing ever runs.

Inputs are pickles made by the real `pickle` module, plus raw opcodes for what no library
writes (bombs, odd globals). Bombs that could crash the interpreter run in a subprocess, so a
regression fails the test instead of killing the session.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import pickle
import sys

import numpy as np
import pytest

from ckpt_browser import limits
from ckpt_browser.model import ERROR, WARNING
from ckpt_browser.readers.pickle_safe import CappedReader, read_pickle_bytes, unpickle
from ckpt_browser.standins import NumpyArray, Opaque, TensorRef, UnsafeCall

from .state_helpers import (
    SystemCall,
    dict_pickle,
    glob,
    memo,
    num,
    run_python,
    storage_pid,
    tensor_v2,
    text,
)


def load(data: bytes):
    obj, unsafe, problems = read_pickle_bytes(data, "f.pkl")
    return obj, unsafe, [p.line() for p in problems]


def call(module: str, name: str, *args: bytes) -> bytes:
    """A protocol-2 pickle of module.name(*args)."""
    return b"\x80\x02" + glob(module, name) + b"(" + b"".join(args) + b"tR."


# -- what it builds ------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", range(6))
def test_plain_values_round_trip(protocol):
    value = {"a": [1, 2.5, None, True], "b": ("x", b"\x00\xff", bytearray(b"ab")),
             "c": {1, 2}, "d": frozenset({"z"}), "e": complex(1, 2), "f": slice(1, 5, 2),
             "g": collections.OrderedDict(k=1), "h": collections.defaultdict(list, {"q": [1]}),
             "i": 10**30, "j": b""}
    obj, unsafe, problems = load(pickle.dumps(value, protocol=protocol))
    assert (unsafe, problems) == ((), [])
    assert obj == {**value, "g": {"k": 1}, "h": {"q": [1]}}
    assert type(obj["g"]) is dict and type(obj["h"]) is dict


def test_unknown_classes_become_opaque_and_are_never_imported():
    data = b"\x80\x02" + glob("no_such_module_xyz", "Thing") + b")\x81}" + text("a") + \
        num(1) + b"sb."
    obj, unsafe, problems = load(data)
    assert (obj, unsafe) == (Opaque("no_such_module_xyz.Thing", (), {"a": 1}), ())
    # rebuilt the way pickle saves plain objects: loading imports the module (a warning)
    assert len(problems) == 1 and problems[0].startswith("warning")
    assert "imports no_such_module_xyz to rebuild no_such_module_xyz.Thing" in problems[0]
    obj, unsafe, _ = load(call("this", "s"))  # importing `this` would print the Zen of Python
    assert unsafe == ("this.s",) and "this" not in sys.modules
    assert "no_such_module_xyz" not in sys.modules


@pytest.mark.parametrize("protocol", [0, 1, 2, 4])
def test_namespace_and_dataclass_like_objects_keep_their_fields(protocol):
    obj, _, problems = load(pickle.dumps(argparse.Namespace(lr=0.1, tags=["a"]), protocol))
    assert problems == [] and obj.qualname == "argparse.Namespace"
    assert obj.fields == {"lr": 0.1, "tags": ["a"]}


def test_slots_state_is_merged_into_fields():
    data = b"\x80\x02" + glob("m", "C") + b")\x81N}" + text("x") + num(2) + b"s\x86b."
    obj, _, _ = load(data)
    assert obj.fields == {"x": 2}


def test_numpy_arrays_dtypes_and_scalars():
    value = {"a": np.arange(6, dtype=np.int16).reshape(2, 3), "s": np.float64(1.5),
             "i": np.int32(-7), "b": np.bool_(True), "big": np.arange(3, dtype=">u4")}
    obj, unsafe, problems = load(pickle.dumps(value, protocol=2))
    assert (unsafe, problems) == ((), [])
    assert obj["a"] == NumpyArray("int16", (2, 3))
    assert obj["big"] == NumpyArray(">uint32", (3,))
    assert (obj["s"], obj["i"], obj["b"]) == (1.5, -7, True)


def test_numpy_dtype_classes_as_older_numpy_pickles_them():
    obj, _, problems = load(call("numpy.dtypes", "UInt32DType"))
    assert problems == [] and obj == Opaque("numpy.dtype", ("u4",))


def test_torch_globals_map_to_plain_values():
    assert load(b"\x80\x02" + glob("torch", "bfloat16") + b".")[0] == "BF16"
    assert load(b"\x80\x02" + glob("torch", "float8_e4m3fn") + b".")[0] == "F8_E4M3"
    assert load(call("torch", "Size", b"(" + num(2) + num(3) + b"t"))[0] == (2, 3)
    assert load(call("torch", "device", text("cuda"), num(1)))[0] == "cuda:1"
    assert load(call("torch.serialization", "_get_layout", text("torch.strided")))[0] == \
        "torch.strided"


def test_tensor_records_and_parameters():
    pid = storage_pid("HalfStorage", "7", 12)
    param = glob("torch._utils", "_rebuild_parameter") + b"(" + tensor_v2(pid, (3, 4), (4, 1)) + \
        b"\x88" + glob("collections", "OrderedDict") + b")Rt" + b"R"
    obj, _, problems = load(dict_pickle({"p": param, "v": tensor_v2(pid, (2,), (1,), offset=5)}))
    assert problems == []
    assert obj["p"] == TensorRef("F16", (3, 4), (4, 1), "7", 0, 12, True, True)
    assert obj["v"] == TensorRef("F16", (2,), (1,), "7", 5, 12, False, False)


def test_rebuild_tensor_v3_over_an_untyped_storage():
    pid = storage_pid("UntypedStorage", "0", 8)
    body = glob("torch._utils", "_rebuild_tensor_v3") + b"(" + pid + num(0) + b"(" + num(2) + \
        b"t(" + num(1) + b"t\x89" + glob("collections", "OrderedDict") + b")R" + \
        glob("torch", "float32") + b"tR"
    obj, _, problems = load(dict_pickle({"t": body}))
    assert problems == [] and obj["t"] == TensorRef("F32", (2,), (1,), "0", 0, 2)


def test_bad_tensor_arguments_are_kept_as_opaque_with_a_warning():
    pid = storage_pid("FloatStorage", "0", 4)
    obj, _, problems = load(dict_pickle({"t": tensor_v2(pid, (-1,), (1,)), "ok": num(1)}))
    assert obj["ok"] == 1 and obj["t"].qualname == "torch._utils._rebuild_tensor_v2"
    assert problems == ["warning: f.pkl: torch._utils._rebuild_tensor_v2 called with unexpected "
                        "arguments (size is (-1,)); kept as opaque"]


def test_persistent_ids_other_than_storages_are_refused():
    data = dict_pickle({"a": b"(" + text("module") + num(1) + b"tQ",
                        "b": b"(" + text("storage") + glob("torch", "FloatStorage") + num(3) +
                        text("cpu") + num(4) + b"tQ", "c": num(2)})
    obj, _, problems = load(data)
    assert obj["c"] == 2 and obj["a"] == Opaque("<elided>")
    assert len(problems) == 2 and all("unexpected persistent id" in p for p in problems)


# -- nothing runs -----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", range(6))
def test_os_system_is_recorded_not_run(tmp_path, protocol):
    sentinel = tmp_path / "PWNED"
    data = pickle.dumps({"keep": [1, 2], "x": SystemCall(f"touch {sentinel}")}, protocol)
    obj, unsafe, problems = load(data)
    assert not sentinel.exists()
    assert unsafe == ("posix.system",) and problems == []
    assert obj == {"keep": [1, 2], "x": UnsafeCall("posix.system", (f"touch {sentinel}",))}


@pytest.mark.parametrize("module,name", [
    ("builtins", "eval"), ("builtins", "exec"), ("__builtin__", "eval"), ("builtins", "__import__"),
    ("builtins", "getattr"), ("builtins", "open"), ("builtins", "compile"),
    ("subprocess", "Popen"), ("subprocess", "check_output"), ("os", "system"), ("nt", "system"),
    ("shutil", "rmtree"), ("socket", "socket"), ("importlib", "import_module"),
    ("runpy", "run_path"), ("code", "InteractiveInterpreter"), ("pty", "spawn"),
    ("ctypes", "CDLL"), ("pickle", "loads"), ("marshal", "loads"), ("webbrowser", "open"),
    ("multiprocessing.util", "spawnv_passfds"), ("sys", "exit"), ("operator", "attrgetter"),
    ("io", "open"), ("types", "CodeType"), ("os.path", "exists"),
    ("torch.storage", "_load_from_bytes"), ("torch", "load"),
])
def test_dangerous_globals_are_named_and_inert(module, name):
    obj, unsafe, problems = load(call(module, name, text("rm -rf /")))
    qual = f"{'builtins' if module == '__builtin__' else module}.{name}"
    assert (obj, unsafe, problems) == (UnsafeCall(qual, ("rm -rf /",)), (qual,), [])


@pytest.mark.parametrize("module,name", [("io", "BytesIO"), ("operator", "itemgetter"),
                                         ("posixpath", "join"), ("functools", "partial"),
                                         ("xml.dom.minidom", "parseString"),
                                         ("no_such_module_xyz", "helper")])
def test_calling_any_global_off_the_allowlist_is_unsafe(module, name):
    # an allowlist, not a deny list: none of these is known to be dangerous, all are calls
    obj, unsafe, _ = load(call(module, name, num(1)))
    assert (obj, unsafe) == (UnsafeCall(f"{module}.{name}", (1,)), (f"{module}.{name}",))


@pytest.mark.parametrize("module,name,shape", [
    ("datetime", "timedelta", None), ("types", "SimpleNamespace", "(1)"),
    ("pathlib", "PosixPath", "(1)"), ("argparse", "Namespace", "(1 arguments)")])
def test_data_classes_are_records_not_calls(module, name, shape):
    # a shape no writer produces (torch.load would fail on it) is a warning, never a call
    obj, unsafe, problems = load(call(module, name, num(1)))
    assert (obj, unsafe) == (Opaque(f"{module}.{name}", (1,)), ())
    assert problems == ([f"warning: f.pkl: {module}.{name} called with unexpected arguments "
                         f"{shape}; kept as opaque"] if shape else [])


def test_calling_a_value_is_refused_without_stopping():
    data = dict_pickle({"a": glob("torch", "float32") + b")R", "b": num(3)})
    obj, _, problems = load(data)
    assert obj["b"] == 3 and obj["a"].qualname == "<not callable: str>"
    assert problems == ["warning: f.pkl: the pickle calls a str ('F32')"]


def test_extension_codes_and_stray_opcodes_are_errors():
    assert load(b"\x80\x02\x82\x01.")[2] == ["error: f.pkl: cannot unpickle: UnpicklingError: "
                                             "extension code 1 (copyreg registry) is not supported"]
    assert load(b"\x80\x02" + text("s") + num(1) + b"a.")[2] == [
        "error: f.pkl: cannot unpickle: UnpicklingError: APPEND to a str"]
    assert load(b"\x80\x02{.")[2] == ["error: f.pkl: cannot unpickle: UnpicklingError: invalid "
                                      "opcode b'{'"]


def test_unhashable_keys_get_a_placeholder():
    data = b"\x80\x02}" + b"]" + num(1) + b"s."  # {[]: 1}
    obj, _, problems = load(data)
    assert obj == {"<unhashable list #1>": 1} and len(problems) == 1


# -- bounds ---------------------------------------------------------------------------------------

def test_100000_nested_lists_are_cut_at_the_depth_limit():
    n = 100_000
    obj, _, problems = load(b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b".")
    depth = 0
    while type(obj) is list and obj:
        obj, depth = obj[0], depth + 1
    assert depth == limits.LIMITS.depth and obj == Opaque("<elided>")
    assert len(problems) == 1 and "deeper than 100 levels" in problems[0]


def test_lists_nested_top_down_through_the_memo_are_cut_too():
    body = b"]r" + memo(0)
    for i in range(20_000):
        body += b"j" + memo(i) + b"]r" + memo(i + 1) + b"a0"
    obj, _, problems = load(b"\x80\x02" + body + b".")
    assert type(obj) is list and len(problems) == 1 and "pickle bomb" in problems[0]


BOMB = """
import sys
from ckpt_browser.readers.pickle_safe import read_pickle_bytes
seed, unit, n = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), int(sys.argv[3])
obj, _, problems = read_pickle_bytes(b"\\x80\\x02}" + seed + unit * n + b"K\\x01s.", "bomb")
print(type(obj).__name__, problems[0].message)
"""


@pytest.mark.parametrize("seed,unit,n", [
    (b")", b"\x85", 1_000_000),  # ((((),),),): TUPLE1 a million times
    (glob("foo", "bar") + b"q\x000N", b"q\x010h\x00h\x01\x85R", 200_000),  # foo.bar((...,))
])
def test_deep_dict_keys_do_not_crash(seed, unit, n):
    """hash() of a million-deep tuple overflows the C stack: the reader must cut it first.
    Run in a subprocess so that a regression fails here instead of killing pytest."""
    r = run_python(BOMB, seed.hex(), unit.hex(), str(n))
    assert r.returncode == 0, r.stderr[-2000:]
    kind, message = r.stdout.strip().split(" ", 1)
    assert kind == "dict" and "nested deeper than 100 levels" in message


def test_the_deep_key_bomb_does_crash_the_stock_unpickler():
    """Guard against a vacuous test above: plain pickle.loads dies on the same bytes."""
    script = ("import pickle; pickle.loads(b'\\x80\\x02})' + b'\\x85' * 1_000_000 + "
              "b'K\\x01s.')")
    assert run_python(script).returncode < 0  # killed by a signal (SIGSEGV)


def test_billion_laughs_is_cut_quickly():
    body = b"]r" + memo(0) + num(1) + b"a"
    for k in range(30):  # l[k+1] = [l[k]] * 10: 10**30 paths
        body += b"](" + (b"j" + memo(k)) * 10 + b"er" + memo(k + 1)
    obj, _, problems = load(b"\x80\x02" + body + b".")
    assert type(obj) is list and len(problems) == 1 and "20,000,000 paths" in problems[0]


def test_huge_memo_index_allocates_nothing():
    obj, _, problems = load(b"\x80\x02]r\xff\xff\xff\xff.")  # C pickle would size a 64 GB table
    assert (obj, problems) == ([], [])


def test_memo_size_is_capped(monkeypatch):
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, pickle_memo=1000))
    obj, _, problems = load(b"\x80\x04N" + b"\x94" * 5000 + b".")
    assert obj is None
    assert problems == ["error: f.pkl: pickle memo holds more than 1,000 objects "
                        "(CKPT_BROWSER_MAX_PICKLE_MEMO raises it)"]


def test_opcode_budget(monkeypatch):
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, pickle_ops=1000))
    result = unpickle(io.BytesIO(pickle.dumps(list(range(5000)), 2)), "f.pkl")
    assert not result.ok
    assert [p.message for p in result.problems] == [
        "pickle runs more than 1,000 opcodes (CKPT_BROWSER_MAX_PICKLE_OPS raises it)"]


def test_size_cap(monkeypatch):
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, pickle_bytes=100))
    data = pickle.dumps(list(range(100)))
    assert load(data)[2] == [
        f"error: f.pkl: pickle is {len(data)} bytes, over the 100-byte limit; not read "
        "(CKPT_BROWSER_MAX_PICKLE_BYTES raises it)"]
    result = unpickle(CappedReader(io.BytesIO(pickle.dumps(b"x" * 500, 2)), 100), "f.pkl")
    assert [p.message for p in result.problems] == ["pickle is larger than the 100-byte limit "
        "(CKPT_BROWSER_MAX_PICKLE_BYTES raises it)"]


@pytest.mark.parametrize("cut", [1, 5, 17, 40])
def test_truncated_pickles(cut):
    data = pickle.dumps({"a": list(range(50)), "b": "x" * 30}, protocol=4)
    obj, _, problems = load(data[:-cut])
    assert obj is None and problems == ["error: f.pkl: pickle ends early (truncated?)"]


def test_garbage_never_raises():
    """Random damage to real pickles of every protocol: problems, never an exception."""
    import random

    rng = random.Random(0)
    value = {"a": [1, (2, 3), {4}], "b": argparse.Namespace(x=b"zz"), "n": np.arange(3),
             "c": collections.OrderedDict(k=1.5), "big": 10**40, "t": "x" * 300}
    bases = [pickle.dumps(value, protocol=p) for p in range(6)]
    for _ in range(600):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(2, len(data))
            if rng.random() < 0.7:
                data[pos] = rng.randrange(256)
            else:
                del data[pos:pos + rng.randrange(1, 20)]
        obj, unsafe, problems = load(bytes(data))  # must not raise
        assert all(p.startswith(("error", "warning")) for p in problems)


def test_severities():
    result = unpickle(io.BytesIO(b"\x80\x02}" + b"]" + num(1) + b"s."), "f.pkl")
    assert [p.severity for p in result.problems] == [WARNING]
    result = unpickle(io.BytesIO(b"\x80\x02]"), "f.pkl")
    assert [p.severity for p in result.problems] == [ERROR]
