"""The pickle policy's three tiers (README "Safety"): data is silent, a class rebuilt the plain
way or a bare reference is a warning naming what loading would import, anything called is
unsafe. Pickles come from the real `pickle` module or from make_corpus's opcode writer."""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ckpt_browser.model import ERROR, WARNING
from ckpt_browser.readers.pickle_safe import unpickle
from tests.malicious.make_corpus import Build, Call, G, NewObj, dumps

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_checkpoints"


def read(data: bytes):
    got = unpickle(io.BytesIO(data), "f.pkl")
    assert got.ok
    return got


def warnings_of(got) -> list[str]:
    return [p.message for p in got.problems if p.severity == WARNING]


@pytest.mark.parametrize("value", [
    {"lr": 0.1, "betas": (0.9, 0.99), "ids": {1, 2}, "od": collections.OrderedDict(a=1)},
    argparse.Namespace(lr=0.1, seed=3),
    collections.Counter({3: 1}),
    Path("runs/x"),
])
@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_data_is_read_silently(value, protocol):
    got = read(pickle.dumps(value, protocol))
    assert (got.unsafe, got.imports, got.problems) == ((), (), ())


def test_a_class_rebuilt_the_plain_way_is_a_warning_naming_its_module():
    got = read(dumps(Build(NewObj(G("mypkg.nets", "TinyNet")), {"_modules": {}}), 2))
    assert got.unsafe == () and got.imports == ("mypkg.nets.TinyNet",)
    assert warnings_of(got) == [
        "loading this file the torch way imports mypkg.nets to rebuild mypkg.nets.TinyNet "
        "objects: that code runs, and torch.load(weights_only=True) refuses the file (nothing "
        "was imported here)"]


def test_torch_save_of_a_real_module_is_a_warning_not_unsafe(tmp_path):
    buf = io.BytesIO()
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), buf)
    path = tmp_path / "model.pt"
    path.write_bytes(buf.getvalue())
    from ckpt_browser.readers.torchfile import read_pickle_file

    pf = read_pickle_file(str(path), "model.pt")
    assert pf.unsafe == ()
    assert not [p for p in pf.problems if p.severity == ERROR]
    text = " ".join(p.message for p in pf.problems if p.severity == WARNING)
    assert "imports torch.nn.modules.container" in text and "Sequential" in text


def test_a_bare_reference_is_a_warning():
    got = read(dumps({"factory": G("mypkg.nets", "make")}, 2))
    assert got.unsafe == () and "imports mypkg.nets to reference mypkg.nets.make" in \
        warnings_of(got)[0]


@pytest.mark.parametrize("node,named", [
    # any call of a global off the allowlist, with or without arguments
    (Call(G("mypkg.enums", "Mode"), ("fit",)), "mypkg.enums.Mode"),
    (Call(G("mypkg.tools", "setup"), ()), "mypkg.tools.setup"),
    (Call(G("xml.dom.minidom", "parseString"), ("<a/>",)), "xml.dom.minidom.parseString"),
    # NEWOBJ with arguments reaches the class's __new__ with them
    (NewObj(G("mypkg.nets", "TinyNet"), (1,)), "mypkg.nets.TinyNet"),
    # copyreg spellings of the same things
    (Call(G("copyreg", "__newobj__"), (G("mypkg.nets", "TinyNet"), 1)), "mypkg.nets.TinyNet"),
    (Call(G("copyreg", "_reconstructor"), (G("mypkg.nets", "A"), G("mypkg.nets", "Base"), None)),
     "mypkg.nets.Base"),
    # a standard-library object that is not data, restored with state: its __setstate__ runs
    (Build(NewObj(G("logging", "Logger")), {"name": "x"}), "logging.Logger"),  # denied anyway
    (Build(NewObj(G("xml.sax.expatreader", "ExpatParser")), {"a": 1}),
     "xml.sax.expatreader.ExpatParser (rebuilt with state: its __setstate__ would run, and it "
     "is not a class known to be inert)"),
    # attributes set on a class itself: a monkey-patch of code that runs later
    (Build(G("collections", "OrderedDict"), (None, {"__repr__": 1})),
     "collections.OrderedDict (its class attributes set)"),
    # a data constructor consuming a rebuilt object runs the object's methods
    (Call(G("builtins", "str"), (Build(NewObj(G("mypkg.x", "Evil")), {"a": 1}),)),
     "builtins.str (given a mypkg.x.Evil object)"),
])
def test_calls_are_unsafe_whatever_they_name(node, named):
    got = read(dumps({"payload": node}, 2))
    assert named in got.unsafe, got.unsafe


def test_the_result_of_a_call_called_again_is_unsafe():
    # numpy.dtype is data, but calling the dtype it returns is not something data does
    node = Call(Call(G("numpy", "dtype"), ("f8", False, True)), ("x",))
    assert read(dumps(node, 2)).unsafe == ("a numpy.dtype object",)


def test_newobj_and_copyreg_newobj_are_the_same_plain_rebuild():
    plain = read(dumps(NewObj(G("mypkg.nets", "TinyNet")), 2))
    spelt = read(dumps(Call(G("copyreg", "__newobj__"), (G("mypkg.nets", "TinyNet"),)), 2))
    assert plain.obj == spelt.obj and plain.imports == spelt.imports == ("mypkg.nets.TinyNet",)
    assert plain.unsafe == spelt.unsafe == ()


def test_unsafe_names_say_what_they_do(tmp_path):
    from ckpt_browser.readers.torchfile import unsafe_problems

    (p,) = unsafe_problems("optimizer.pt", ("imaplib.IMAP4_stream", "builtins.eval", "mypkg.f"))
    assert "imaplib.IMAP4_stream (runs a command), builtins.eval (runs Python code), mypkg.f " \
        "when loaded" in p.message


def test_real_training_args_and_deepspeed_records_are_data():
    from ckpt_browser.readers.torchfile import read_pickle_file

    for rel in ("hf-multirank/checkpoint-4/training_args.bin",
                "deepspeed-run/global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        pf = read_pickle_file(str(SAMPLES / rel), rel)
        assert pf.unsafe == () and not pf.problems, (rel, pf.problems)


ALLOW_SCRIPT = """
import io, json, sys
from ckpt_browser.readers.pickle_safe import unpickle
got = unpickle(io.BytesIO(bytes.fromhex(sys.argv[1])), "f.pkl")
print(json.dumps([list(got.unsafe), list(got.imports)]))
"""


def test_allow_globals_adds_your_own_classes_but_never_denied_names():
    data = dumps([Call(G("mypkg.enums", "Mode"), ("fit",)), Call(G("os", "system"), ("x",))], 2)
    env = {**os.environ, "CKPT_BROWSER_ALLOW_GLOBALS": "mypkg.enums.Mode, os.system",
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", ALLOW_SCRIPT, data.hex()], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == [["os.system"], []]


def test_check_calls_a_hostile_training_args_out(tmp_path):
    import shutil

    from ckpt_browser.analysis.resume import resume_report
    from ckpt_browser.report.resume import verdict_line

    ckpt = tmp_path / "checkpoint-1"
    shutil.copytree(REPO / "tests/malicious/corpus/control-hf/checkpoint-1", ckpt)
    (ckpt / "training_args.bin").write_bytes(
        _torch_zip_of(dumps(Call(G("os", "system"), ("touch PWNED",)), 2)))
    report = resume_report(str(ckpt))
    assert report.verdict == "weights-only"
    errors = [f for f in report.findings if f.severity == ERROR]
    assert [f.file for f in errors] == ["training_args.bin"]
    assert "os.system (runs a command)" in errors[0].message
    assert verdict_line(report).startswith(
        "WEIGHTS-ONLY: training_args.bin is UNSAFE (would run code")


def _torch_zip_of(pkl: bytes) -> bytes:
    from tests.malicious.make_corpus import torch_zip

    return torch_zip(pkl)


def test_torchs_own_allowlist_is_data():
    import torch._weights_only_unpickler as weights_only

    from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS
    from ckpt_browser.readers.pickle_safe.policy import is_data

    missing = [name for name in weights_only._get_allowed_globals()
               if not is_data(name) and name not in TORCH_GLOBALS]
    assert missing == []


@pytest.mark.parametrize("cls,empty", [("collections.OrderedDict", {}), ("builtins.set", set()),
                                       ("collections.Counter", {}), ("collections.deque", [])])
def test_newobj_of_a_container_is_empty_as_pickle_builds_it(cls, empty):
    # NEWOBJ runs only cls.__new__, which ignores the items; torch's loader builds it empty too
    module, name = cls.rsplit(".", 1)
    got = read(dumps(NewObj(G(module, name), ([(1, 2)],)), 2))
    assert got.obj == empty and got.unsafe == ()


def test_build_on_a_tensor_even_with_an_empty_state_is_a_finding():
    # torch calls tensor.set_(*state): an empty state empties the tensor
    from tests.malicious.make_corpus import tensor

    got = read(dumps({"w": Build(tensor("0", (3,)), [])}, 2))
    assert any("BUILD on a tensor" in m for m in warnings_of(got)), got.problems
