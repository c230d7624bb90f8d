"""TorchScript archives: told apart by constants.pkl as torch.load does, TorchScript's own pickle
helpers never a finding, a warning naming what torch.jit.load runs at load, and any operator
that reaches files or processes an UNSAFE file. Every archive here is written by the real
torch.jit.save (some then edited); none is ever loaded by these tests."""

from __future__ import annotations

import dataclasses
import io
import zipfile

import pytest
import torch

from ckpt_browser.cli import main
from ckpt_browser.model import ERROR, WARNING
from ckpt_browser.readers import torchscript
from ckpt_browser.readers.pickle_safe import unpickle
from ckpt_browser.readers.pickle_safe.torchscript_records import TORCHSCRIPT_GLOBALS
from ckpt_browser.readers.torchfile import read_pickle_file, read_pickle_file_object
from ckpt_browser.readers.torchscript_code import MAX_USES, scan

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
HERE = f"__torch__.{__name__}"  # torch.jit.script names a class by its module


class Lists(torch.nn.Module):
    """Tensors, and list attributes torch writes with build_intlist, build_doublelist ..."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.sizes = [1, 2, 3]
        self.scales = [0.5]
        self.flags = [True]
        self.table = {"a": 1}
        self.register_buffer("mean", torch.zeros(2))

    def forward(self, x):
        return torch.relu(self.fc(x)) - self.mean


class MathState(torch.nn.Module):
    """A scripted __setstate__ that only does math: it runs at load, and is harmless."""

    def __init__(self):
        super().__init__()
        self.w = torch.ones(4)

    @torch.jit.export
    def __getstate__(self) -> tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]) -> None:
        self.w = state[0] * 2 + 1
        self.training = state[1]

    def forward(self, x):
        return x + self.w


class SavesAtLoad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.ones(2)

    @torch.jit.export
    def __getstate__(self) -> tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]) -> None:
        self.w = state[0]
        self.training = state[1]
        torch.save(self.w, "never-written-by-these-tests")

    def forward(self, x):
        return x + self.w


class ReadsWhenCalled(torch.nn.Module):
    def forward(self, x):
        return x + torch.from_file("never-read-by-these-tests", False, 4)


def saved(tmp_path, module: torch.nn.Module, name: str = "model.pt"):
    path = tmp_path / name
    torch.jit.save(torch.jit.script(module), str(path))
    return path


def edited(src, dst, rename=lambda n: n, drop=(), add=()):
    """The archive rewritten entry by entry (zipfile, fixed times)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if info.filename not in drop:
                zout.writestr(zipfile.ZipInfo(rename(info.filename), (1980, 1, 1, 0, 0, 0)),
                              zin.read(info))
        for name, data in add:
            zout.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return dst


def read(path):
    return read_pickle_file(str(path), path.name)


def severities(pf) -> list[str]:
    return [p.severity for p in pf.problems]


# -- real archives read clean: weights listed, one warning, exit 0 ------------------------------

def test_a_scripted_module_reads_clean_with_one_warning(tmp_path, capsys):
    module = Lists()
    path = saved(tmp_path, module)
    pf = read(path)
    assert pf.kind == "torchscript" and pf.unsafe == () and severities(pf) == [WARNING]
    assert "torch.jit.load compiles" in pf.problems[0].message
    assert "no __setstate__ runs at load" in pf.problems[0].message
    shapes = {path.rsplit(".", 1)[-1]: t.shape for path, t in pf.tensors}
    assert shapes == {"weight": (2, 3), "bias": (2,), "mean": (2,)}
    assert pf.obj.fields["sizes"] == [1, 2, 3] and pf.obj.fields["scales"] == [0.5]
    assert main(["inspect", str(path)]) == 0  # a warning only: exit 0 (diagnostics.ExitCode)
    assert "UNSAFE" not in capsys.readouterr().out


def test_a_math_only_setstate_is_named_as_running_at_load_and_is_not_unsafe(tmp_path):
    pf = read(saved(tmp_path, MathState()))
    assert pf.unsafe == () and severities(pf) == [WARNING]
    assert f"runs {HERE}.MathState.__setstate__ as it loads" in pf.problems[0].message
    assert [t.shape for _, t in pf.tensors] == [(4,)]  # from the tuple its __getstate__ wrote


def test_a_quantized_model_with_its_packed_params_reads_clean(tmp_path):
    model = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 4)),
                                                   {torch.nn.Linear}, dtype=torch.qint8)
    pf = read(saved(tmp_path, model))
    assert pf.unsafe == () and severities(pf) == [WARNING]


def test_a_frozen_model_lists_its_weights_from_the_constants_table(tmp_path):
    path = tmp_path / "frozen.pt"
    torch.jit.save(torch.jit.freeze(torch.jit.script(Lists()).eval()), str(path))
    pf = read(path)
    assert pf.unsafe == () and severities(pf) == [WARNING]
    assert pf.tensors and all(n.startswith("CONSTANTS.c") for n, _ in pf.tensors)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        for _, t in pf.tensors:  # located in the records under constants/
            start, length = pf.storages[t.storage_key]
            assert raw[start:start + length] == z.read(f"frozen/{t.storage_key}")


def test_the_sample_torchscript_reads_clean():
    from .helpers import SAMPLES

    path = SAMPLES / "projects" / "torchscript" / "model.pt"
    pf = read(path)
    assert pf.kind == "torchscript" and pf.unsafe == () and severities(pf) == [WARNING]


# -- code that reaches files makes the file unsafe -------------------------------------------

def test_a_setstate_that_saves_a_file_is_unsafe_at_load(tmp_path, capsys):
    path = saved(tmp_path, SavesAtLoad())
    pf = read(path)
    assert pf.unsafe == (f"torch.save, in TorchScript {HERE}.SavesAtLoad.__setstate__ at "
                         "torch.jit.load",)
    assert severities(pf) == [WARNING, ERROR]
    assert f"runs {HERE}.SavesAtLoad.__setstate__ as it loads" in pf.problems[0].message
    assert (f"torch.save (writes a file) in {HERE}.SavesAtLoad.__setstate__, which "
            "torch.jit.load runs at load") in pf.problems[1].message
    assert main(["inspect", str(path)]) == 5
    assert "UNSAFE" in capsys.readouterr().out


def test_a_forward_that_reads_a_file_is_unsafe_when_called(tmp_path):
    pf = read(saved(tmp_path, ReadsWhenCalled()))
    assert pf.unsafe == (f"torch.from_file, in TorchScript {HERE}.ReadsWhenCalled.forward",)
    assert "no __setstate__ runs at load" in pf.problems[0].message


def test_code_is_found_ignoring_case_as_torch_does(tmp_path):
    src = saved(tmp_path, SavesAtLoad())
    dst = edited(src, tmp_path / "upper.pt", rename=lambda n: n.replace("/code/", "/CODE/"))
    assert read(dst).unsafe == read(src).unsafe != ()


def test_an_unreachable_code_file_is_not_a_finding(tmp_path):
    src = saved(tmp_path, Lists())
    dst = edited(src, tmp_path / "extra.pt", add=[
        ("model/code/__torch__/unused.py", b"def f(x: Tensor) -> Tensor:\n"
                                           b"  return torch.save(x, 'y')\n")])
    assert read(dst).unsafe == ()  # no pickle or code names __torch__.unused


# -- TorchScript or not, as torch.load decides --------------------------------------------------

def test_without_constants_pkl_it_is_a_torch_save_file(tmp_path):
    src = saved(tmp_path, Lists())
    dst = edited(src, tmp_path / "noconst.pt", drop=("model/constants.pkl",))
    pf = read(dst)
    assert pf.kind == "torch-zip" and severities(pf) == [WARNING, ERROR]
    assert "holds no constants.pkl: torch.load reads it as a torch.save file" in \
        pf.problems[0].message
    # outside a TorchScript archive, torch.jit stays on the deny list
    assert "torch.jit._pickle.build_intlist" in pf.unsafe


def test_constants_pkl_makes_a_torch_save_zip_torchscript(tmp_path):
    src = tmp_path / "state.pt"
    torch.save({"w": torch.ones(2)}, src)
    with zipfile.ZipFile(src) as z:
        root = z.namelist()[0].split("/")[0]
    dst = edited(src, tmp_path / "ts.pt", add=[(f"{root}/constants.pkl", b"\x80\x02).")])
    pf = read(dst)
    assert pf.kind == "torchscript" and severities(pf) == [WARNING] and len(pf.tensors) == 1


def test_a_constants_record_in_another_case_is_what_only_torch_jit_load_reads(tmp_path):
    src = saved(tmp_path, SavesAtLoad())
    dst = edited(src, tmp_path / "case.pt",
                 rename=lambda n: n.replace("constants.pkl", "Constants.pkl"))
    pf = read(dst)
    assert pf.kind == "torch-zip" and pf.unsafe == read(src).unsafe
    assert any(p.severity == ERROR and "not named constants.pkl" in p.message
               for p in pf.problems)


# -- TorchScript's pickle helpers ---------------------------------------------------------------

def _global(name: str, args: bytes) -> bytes:
    module, _, attr = name.rpartition(".")
    return b"\x80\x02c" + f"{module}\n{attr}\n".encode() + args + b"R."


@pytest.mark.parametrize("name, args, value", [
    ("build_intlist", b"(](K\x01K\x02et", [1, 2]),
    ("build_doublelist", b"(]G?\xe0\x00\x00\x00\x00\x00\x00at", [0.5]),
    ("build_boollist", b"(]\x88at", [True]),
    ("build_tensorlist", b"(]t", []),
    ("build_tensor_from_id", b"K\x03\x85", 3),
    ("restore_type_tag", b"}X\x0e\x00\x00\x00Dict[str, int]\x86", {}),
])
def test_the_helpers_are_their_argument(name, args, value):
    got = unpickle(io.BytesIO(_global(f"torch.jit._pickle.{name}", args)), "x",
                   TORCHSCRIPT_GLOBALS)
    assert (got.obj, got.unsafe, got.problems) == (value, (), ())


@pytest.mark.parametrize("name, args", [
    ("build_intlist", b"(](X\x01\x00\x00\x00aet"),  # a str among the ints
    ("build_intlist", b"(]\x88at"),  # a bool is not an int here
    ("build_doublelist", b"(]K\x01at"),
    ("build_intlist", b"(K\x01t"),  # not a list
    ("restore_type_tag", b"(K\x01X\x03\x00\x00\x00intt"),  # tags restore lists and dicts
])
def test_the_helpers_take_exactly_what_torch_writes(name, args):
    got = unpickle(io.BytesIO(_global(f"torch.jit._pickle.{name}", args)), "x",
                   TORCHSCRIPT_GLOBALS)
    assert got.unsafe == () and "unexpected arguments" in got.problems[0].message


def test_outside_a_torchscript_archive_torch_jit_stays_denied():
    got = unpickle(io.BytesIO(_global("torch.jit._pickle.build_intlist", b"(](K\x01et")), "x")
    assert got.unsafe == ("torch.jit._pickle.build_intlist",)
    got = unpickle(io.BytesIO(_global("torch.jit.load", b"(X\x01\x00\x00\x00ft")), "x",
                   TORCHSCRIPT_GLOBALS)
    assert got.unsafe == ("torch.jit.load",)


def test_a_torchscript_data_pkl_calling_os_system_is_unsafe(tmp_path):
    src = saved(tmp_path, Lists())
    evil = _global("os.system", b"(X\x04\x00\x00\x00truet")
    dst = edited(src, tmp_path / "evil.pt", drop=("model/data.pkl",),
                 add=[("model/data.pkl", evil)])
    pf = read(dst)
    assert pf.kind == "torchscript" and "os.system" in pf.unsafe


# -- the scanner -------------------------------------------------------------------------------

SOURCE = '''
class A(Module):
  b : __torch__.B
  def __setstate__(self: __torch__.A, st: int) -> NoneType:
    s = "torch.save(x)"  # torch.from_file in a comment
    t = """ops.c10d.broadcast_
    """
    y = x.torch.save
    ops.prim.Print("torch.save")
    return None
  def forward(self: __torch__.A, x: Tensor) -> Tensor:
    getattr(torch, "save")(x, "f")
    return __torch__.torch.nn.functional.relu(x)
def f(x: Tensor) -> Tensor:
  return torch . \\
    save(x, 'y')
'''


def test_strings_comments_and_other_objects_attributes_are_not_code():
    src = scan(SOURCE)
    assert src.methods("A") == {"__setstate__", "forward"} and src.methods("f") == set()
    assert src.refs == {"__torch__.B", "__torch__.A", "__torch__.torch.nn.functional.relu"}
    # getattr(torch, ...) holds torch as a value: any operator (torch.jit.save never writes it)
    assert [(u.spelled, u.owner) for u in src.uses] == [("torch", "A.forward"),
                                                        ("torch.save", "f")]


@pytest.mark.parametrize("code, spelled, words", [
    ("t = torch\n", "torch", "any operator"),
    ("o = ops.aten\n", "ops.aten", "any operator"),
    ("ops.aten.from_file(p, True, 4)\n", "ops.aten.from_file", "file"),
    ("ops.c10d.allreduce_(x)\n", "ops.c10d.allreduce_", "other processes"),
    ("ops.mylib.run(x)\n", "ops.mylib.run", "mylib library"),
    ("ops.prim.rpc_async(w, f, x)\n", "ops.prim.rpc_async", "another process"),
    ("g : __torch__.torch.classes.c10d.ProcessGroup\n",
     "__torch__.torch.classes.c10d.ProcessGroup", "other processes"),
])
def test_what_reaches_files_or_processes(code, spelled, words):
    (use,) = scan("def f(x: Tensor) -> Tensor:\n  " + code).uses
    assert use.spelled == spelled and words in use.words


@pytest.mark.parametrize("code", [
    "ops.quantized.linear(x, p, 1.0, 0)\n", "ops.prim.Print(x)\n", "torch.linear(x, w, b)\n",
    "p : __torch__.torch.classes.quantized.LinearPackedParamsBase\n", "warn('torch.save')\n",
    "ops.prim.RaiseException('x', 'builtins.RuntimeError')\n",
])
def test_math_and_printing_are_not_findings(code):
    assert scan("def f(x: Tensor) -> Tensor:\n  " + code).uses == []


def test_lite_interpreter_operators_are_read_from_its_bytecode():
    bytecode = (8, ("__torch__.M.forward", (("instructions", (("OP", 0, 0),)),
                                            ("operators", (("aten::save", "", 2),
                                                           ("aten::add", "Tensor", 3))))))
    assert torchscript.operators(bytecode) == ["aten::save", "aten::add"]


def test_code_past_the_budget_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(torchscript, "MAX_CODE_BYTES", 100)
    pf = read(saved(tmp_path, Lists()))
    assert any(p.severity == ERROR and "the rest is not read" in p.message for p in pf.problems)


def test_an_archive_read_from_a_file_object_is_the_same(tmp_path):
    path = saved(tmp_path, SavesAtLoad())
    data = path.read_bytes()
    pf = read_pickle_file_object(io.BytesIO(data), path.name, len(data))
    assert dataclasses.replace(pf, storages={}) == dataclasses.replace(read(path), storages={})


def test_past_the_cap_uses_are_not_all_listed():
    src = scan("def f(x: Tensor) -> Tensor:\n" + "  torch.save(x, 'p')\n" * (MAX_USES + 50))
    assert len(src.uses) == MAX_USES and src.more and src.uses[-1].owner == "f"
