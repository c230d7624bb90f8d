"""A call is only safe if every callable it can reach is known to be inert (README "Safety"):
allowed functions given something that can run code, classes rebuilt with state, and BUILDs that
plant a callable for the next step. Real objects of the same kinds, pickled by the real `pickle`,
stay silent."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import io
import os
import pickle
import random
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from ckpt_browser.readers.pickle_safe import unpickle
from tests.malicious.make_corpus import Build, Call, G, NewObj, PersId, dumps, storage, tensor

REPO = Path(__file__).resolve().parents[2]
WRITER = G("torch.serialization", "_open_zipfile_writer")  # creates the file it is named
EVIL = NewObj(G("mypkg.x", "Evil"))  # an object of a class off every list, rebuilt bare
METHOD = Call(G("builtins", "getattr"), (G("mypkg.x", "Evil"), "run"))


def read(data: bytes):
    got = unpickle(io.BytesIO(data), "f.pkl")
    assert got.ok, got.problems
    return got


def unsafe_of(node, protocol: int = 2) -> str:
    return " | ".join(read(dumps({"payload": node}, protocol)).unsafe)


@pytest.mark.parametrize("value", [
    np.random.default_rng(3), np.random.RandomState(3), np.random.SeedSequence(5),
    np.random.Generator(np.random.PCG64DXSM(1)), np.random.Generator(np.random.Philox(1)),
    np.zeros((2, 3), dtype=">f4"), np.float32(2.5), np.int64(7), np.dtype([("a", "<i4")]),
    datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), datetime.date(2026, 1, 2),
    datetime.time(3, 4), datetime.timedelta(days=2),
    datetime.timezone(datetime.timedelta(hours=2), "x"),
    decimal.Decimal("1.25"), fractions.Fraction(1, 3), uuid.UUID(int=5), random.Random(3),
    Path("runs/x"), collections.defaultdict(list, {1: [2]}), collections.deque([1], maxlen=3),
    b"\xff\x00", bytearray(b"ab"), {1, 2}, frozenset({3}), complex(1, 2), slice(1, 5), range(3),
])
@pytest.mark.parametrize("protocol", [2, 4])
def test_real_values_read_silently(value, protocol):
    got = read(pickle.dumps({"v": value}, protocol))
    assert (got.unsafe, got.imports, got.problems) == ((), (), ())


def test_real_torch_files_read_silently():
    buf = io.BytesIO()
    p = torch.nn.Parameter(torch.ones(2))
    t = torch.ones(3)
    t.note = "kept"  # a tensor with attributes goes through _rebuild_from_type_v2
    torch.save({"p": p, "t": t, "g": torch.Generator().manual_seed(1).get_state(),
                "rng": np.random.default_rng(1), "bf": torch.zeros(2, dtype=torch.bfloat16)}, buf)
    from ckpt_browser.readers.torchfile import read_pickle_file

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"reach-{os.getpid()}.pt"
    path.write_bytes(buf.getvalue())
    try:
        pf = read_pickle_file(str(path), "x.pt")
    finally:
        path.unlink()
    assert (pf.unsafe, pf.problems) == ((), ())


@pytest.mark.parametrize("node,words", [
    # numpy's RNG helpers call their second argument with the first
    (Call(G("numpy.random._pickle", "__randomstate_ctor"), ("PWNED", WRITER)),
     "__randomstate_ctor (calls its second argument, torch.serialization._open_zipfile_writer)"),
    (Call(G("numpy.random._pickle", "__generator_ctor"), ("MT19937", METHOD)),
     "__generator_ctor (calls its second argument, mypkg.x.Evil.run)"),
    # ... and instantiate a class they are given
    (Call(G("numpy.random._pickle", "__bit_generator_ctor"), (G("mypkg.x", "Evil"),)),
     "__bit_generator_ctor (instantiates its argument, mypkg.x.Evil)"),
    # numpy makes an array of the class it is given, and Cython's helper an object
    (Call(G("numpy._core.multiarray", "_reconstruct"), (G("mypkg.x", "Arr"), (0,), b"b")),
     "_reconstruct (makes an array of the class mypkg.x.Arr"),
    (Call(G("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
          (G("mypkg.x", "S"), 1, None)), "makes an object of the class mypkg.x.S"),
    # torch's rebuilders: the tensor's class, its attributes, its hooks
    (Call(G("torch._tensor", "_rebuild_from_type_v2"),
          (G("torch._utils", "_rebuild_tensor_v2"), G("torch._subclasses.fake_tensor",
                                                      "FakeTensor"), (), {})),
     "makes a tensor of the class torch._subclasses.fake_tensor.FakeTensor"),
    (Call(G("torch._tensor", "_rebuild_from_type_v2"),
          (G("torch._utils", "_rebuild_tensor_v2"), G("torch", "Tensor"), (),
           {"__class__": G("mypkg.x", "T")})), "sets the attribute '__class__' of a tensor"),
    (Call(G("torch._utils", "_rebuild_parameter_with_state"),
          (tensor("0", (2,)), False, Call(G("collections", "OrderedDict"), ()),
           {"hook": G("mypkg.x", "f")})), "stores mypkg.x.f on a tensor"),
    (Call(G("torch._utils", "_rebuild_tensor_v2"),
          (storage("0", 2), 0, (2,), (1,), False, {0: G("mypkg.x", "hook")})),
     "_rebuild_tensor_v2 (given mypkg.x.hook)"),
    (Call(G("torch._utils", "_rebuild_wrapper_subclass"),
          (G("xml.dom.minidom", "Node"), G("torch", "float32"), (2,), (1,), 0,
           G("torch", "strided"), Call(G("torch", "device"), ("cpu",)), False)),
     "makes a tensor of the class xml.dom.minidom.Node"),
    # a defaultdict's factory runs on the first missing key
    (Call(G("collections", "defaultdict"), (G("mypkg.x", "make"),)),
     "keeps mypkg.x.make as its factory"),
    # codecs are imported by name
    (Call(G("_codecs", "encode"), ("x", "mypkg_codec")), "codec 'mypkg_codec'"),
    (Call(G("builtins", "str"), (b"x", "uu_codec")), "codec 'uu_codec'"),
    # data constructors given an object, a method or a reference
    (Call(G("builtins", "int"), (Build(EVIL, {"a": 1}),)), "builtins.int (given a mypkg.x"),
    (Call(G("pathlib", "PosixPath"), (METHOD,)), "PosixPath (given the method mypkg.x.Evil.run)"),
    (Call(G("torch", "Size"), (G("mypkg.x", "Dims"),)), "torch.Size (given mypkg.x.Dims)"),
    # a framework's record class is only ever rebuilt bare; calling it runs its __init__
    (Call(G("transformers.training_args", "TrainingArguments"), ("out",)),
     "TrainingArguments (runs its constructor with the file's arguments"),
])
def test_an_allowed_callable_given_code_is_unsafe(node, words):
    assert words in unsafe_of(node)


def test_the_same_shapes_with_the_writers_values_are_silent():
    ok = [Call(G("numpy.random._pickle", "__randomstate_ctor"),
               ("MT19937", G("numpy.random._pickle", "__bit_generator_ctor"))),
          Call(G("numpy.random._pickle", "__bit_generator_ctor"),
               (G("numpy.random._pcg64", "PCG64"),)),
          Call(G("collections", "defaultdict"), (G("builtins", "list"),)),
          Call(G("transformers.trainer_utils", "IntervalStrategy"), ("steps",)),
          Call(G("_codecs", "encode"), ("\u00ff", "latin1"))]
    got = read(dumps(ok, 2))
    assert (got.unsafe, got.problems) == ((), ()), got.problems


@pytest.mark.parametrize("node,words", [
    # a class off the inert list restored with state: its __setstate__ runs with the file's data
    (Build(NewObj(G("torch.utils.data.datapipes.datapipe", "_DataPipeSerializationWrapper")),
           (b"x", False)), "_DataPipeSerializationWrapper (rebuilt with state"),
    (Build(NewObj(G("xml.dom.minidom", "Document")), {"a": 1}), "Document (rebuilt with state"),
    (Build(NewObj(G("numpy.ma.core", "MaskedArray")), {"a": 1}), "MaskedArray (rebuilt with state"),
    # a state that plants __setstate__, or swaps the class, for the next BUILD to call
    (Build(Build(NewObj(G("argparse", "Namespace")), {"__setstate__": WRITER}), "x"),
     "argparse.Namespace (the file sets its __setstate__"),
    (Build(NewObj(G("argparse", "Namespace")), (None, {"__class__": G("mypkg.x", "Evil")})),
     "argparse.Namespace (the file sets its '__class__'"),
    # torch's own modules may be restored, but not with hooks of the file's choosing
    (Build(NewObj(G("torch.nn.modules.linear", "Linear")),
           {"_forward_hooks": {0: G("mypkg.x", "hook")}}),
     "Linear (its state holds mypkg.x.hook, which it would call)"),
    # a method reference is a function: setting its attributes patches code
    (Build(METHOD, (None, {"__defaults__": (1,)})), "mypkg.x.Evil.run (its class attributes set)"),
])
def test_builds_that_reach_code_are_unsafe(node, words):
    assert words in unsafe_of(node)


def test_items_and_keys_that_run_an_objects_methods_are_unsafe():
    # SETITEMS on an object of an unknown dict subclass: its __setitem__ runs
    setitems = read(dumps(EVIL, 2)[:-1] + b"(K\x01K\x02u.")
    assert any("sets items of it" in u for u in setitems.unsafe), setitems.unsafe
    # an object as a dict key: its __hash__ runs
    keyed = read(dumps({"d": {EVIL: 1}}, 2))
    assert any("used as a dict key" in u for u in keyed.unsafe), keyed.unsafe


def test_a_persistent_id_holding_code_is_unsafe():
    got = read(dumps({"t": PersId(("storage", G("torch", "FloatStorage"), "0", EVIL, 2))}, 2))
    assert any("persistent id holding a mypkg.x.Evil object" in u for u in got.unsafe)


def test_a_tensor_of_another_modules_class_is_an_import_like_its_objects():
    node = Call(G("torch._tensor", "_rebuild_from_type_v2"),
                (G("torch._utils", "_rebuild_tensor_v2"), G("torchao.dtypes", "AffineQuantized"),
                 (storage("0", 2), 0, (2,), (1,), False, Call(G("collections", "OrderedDict"),
                                                              ())), {}))
    got = read(dumps(node, 2))
    assert got.unsafe == () and got.imports == ("torchao.dtypes.AffineQuantized",)


def test_a_torch_module_keeps_its_children_and_your_classes_are_an_import():
    # torch.save(model) of your own classes: torch.nn's children are data, your class's module
    # is imported when loaded (a warning); its code is not ours to read
    node = Build(NewObj(G("torch.nn.modules.container", "Sequential")),
                 {"_modules": {"0": Build(NewObj(G("mypkg.nets", "Block")), {"w": 1})},
                  "_forward_hooks": {}})
    got = read(dumps(node, 2))
    assert got.unsafe == ()
    assert got.imports == ("torch.nn.modules.container.Sequential", "mypkg.nets.Block")


def test_your_own_classes_are_trusted_through_the_environment():
    node = dumps(Call(G("mypkg.nets", "TinyNet"), ({"_modules": {}},)), 2)
    script = ("import io, sys, json; from ckpt_browser.readers.pickle_safe import unpickle; "
              "g = unpickle(io.BytesIO(bytes.fromhex(sys.argv[1])), 'f'); "
              "print(json.dumps([list(g.unsafe), list(g.imports)]))")
    env = {**os.environ, "CKPT_BROWSER_ALLOW_GLOBALS": "mypkg.nets.TinyNet",
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script, node.hex()], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[[], []]"
