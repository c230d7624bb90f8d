"""torch.export `.pt2` archives: every pickle torch.export.load would unpickle (a use_pickle
weight or constant, an opaque_obj_* or custom_obj_* constant, the sample inputs) is read with
the restricted unpickler, never "not read", and what it would run is reported. Archives are
written by the real torch.export.save, some then edited; none is ever loaded here."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import pytest
import torch

from ckpt_browser.model import ERROR, INFO
from ckpt_browser.readers.export_graph import read_program
from ckpt_browser.readers.torchfile import read_pickle_file
from tests.malicious.make_corpus import HERE as MALICIOUS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
DATE = (1980, 1, 1, 0, 0, 0)


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.full((2,), 0.5))

    def forward(self, x):
        return self.fc(x) * self.scale


class WithSubclass(Small):
    def __init__(self):
        from torch.testing._internal.two_tensor import TwoTensor

        super().__init__()
        self.register_buffer("pair", TwoTensor(torch.ones(2), torch.ones(2)), persistent=False)

    def forward(self, x):
        return super().forward(x) + self.pair


def exported(tmp_path, module, name="model.pt2"):
    path = tmp_path / name
    torch.export.save(torch.export.export(module, (torch.ones(1, 3),)), str(path))
    return path


def edited(src, dst, replace=None, add=()):
    """The archive rewritten: members replaced (by name under the root) and added."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zin.namelist()[0].split("/")[0]
        for info in zin.infolist():
            rel = info.filename[len(root) + 1:]
            data = replace[rel](zin.read(info)) if rel in replace else zin.read(info)
            zout.writestr(zipfile.ZipInfo(info.filename, DATE), data)
        for rel, data in add:
            zout.writestr(zipfile.ZipInfo(f"{root}/{rel}", DATE), data)
    return dst


def with_constant(entry: str, meta: dict):
    """A constants config that also lists `entry` (an opaque_obj_ or custom_obj_ member)."""
    def change(raw: bytes) -> bytes:
        doc = json.loads(raw)
        doc["config"]["extra"] = {"path_name": entry, "is_param": False, "use_pickle": True,
                                  "tensor_meta": meta}
        return json.dumps(doc).encode()
    return change


class System:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):  # only ever pickled here, never unpickled
        return (os.system, (self.command,))


def torch_saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def read(path):
    return read_pickle_file(str(path), path.name)


def messages(pf) -> str:
    return "\n".join(p.message for p in pf.problems)


# -- real archives ---------------------------------------------------------------------------

def test_a_plain_export_reads_clean_with_its_weights_located(tmp_path):
    path = exported(tmp_path, Small())
    pf = read(path)
    assert pf.kind == "export" and pf.unsafe == ()
    assert [p.severity for p in pf.problems] == [INFO]
    ep = torch.export.load(str(path))  # torch.export.save's own output, written just above
    truth = {**ep.state_dict, **ep.constants}
    assert {k: t.shape for k, t in pf.tensors} == {k: tuple(v.shape) for k, v in truth.items()}
    assert all(t.storage_key in pf.storages for _, t in pf.tensors)


def test_a_pickled_subclass_constant_is_read_not_skipped(tmp_path):
    pf = read(exported(tmp_path, WithSubclass()))
    assert "not read" not in messages(pf).replace("(not read here)", "")
    # listed from its config, with the shape torch records; its bytes are in a pickle
    assert dict(pf.tensors)["pair"].shape == (2,) and "tensor_0" not in pf.storages
    # what the pickle reaches is the pickle policy's to judge: here the subclass, nothing else
    assert all("TwoTensor" in u for u in pf.unsafe)
    assert "data/constants/tensor_0 (pair: a pickled tensor" in messages(pf)


# -- every pickle is read like any pickle ------------------------------------------------------

@pytest.mark.parametrize("archive", ["export-pickled-constant.pt2", "export-sample-inputs.pt2"])
def test_the_corpus_payloads_are_unsafe(archive):
    pf = read(MALICIOUS / "code_archives" / archive)
    assert "posix.system" in pf.unsafe or "os.system" in pf.unsafe
    assert any(p.severity == ERROR and "unsafe" in p.message and "system" in p.message
               for p in pf.problems)


def test_a_pickled_weight_payload_is_unsafe(tmp_path):
    src = exported(tmp_path, Small())
    dst = edited(src, tmp_path / "evil.pt2", replace={
        "data/weights/model_weights_config.json":
            lambda raw: raw.replace(b'"use_pickle": false', b'"use_pickle": true', 1),
        "data/weights/weight_0": lambda raw: torch_saved(System("true"))})
    pf = read(dst)
    assert "posix.system" in pf.unsafe or "os.system" in pf.unsafe
    assert "data/weights/weight_0 (fc.weight: a pickled tensor" in messages(pf)


@pytest.mark.parametrize("payload, unsafe", [
    (pickle.dumps({"alpha": 1.5}), False),
    (pickle.dumps(System("true")), True),
])
def test_an_opaque_object_constant_is_a_pickle(tmp_path, payload, unsafe):
    src = exported(tmp_path, Small())
    dst = edited(src, tmp_path / "opaque.pt2", add=[("data/constants/opaque_obj_0", payload)],
                 replace={"data/constants/model_constants_config.json":
                          with_constant("opaque_obj_0", None)})
    pf = read(dst)
    assert bool(pf.unsafe) is unsafe
    assert pf.obj["extra"] == "extra: an opaque object constant"


def test_a_custom_class_constant_is_judged_by_its_class(tmp_path):
    packed = torch.ops.quantized.linear_prepack(
        torch.quantize_per_tensor(torch.ones(2, 2), 1.0, 0, torch.qint8), None)
    good = bytes(torch._C._pickle_save(packed))  # the format torch.export.save writes
    src = exported(tmp_path, Small())
    config = {"data/constants/model_constants_config.json": with_constant("custom_obj_0", None)}
    pf = read(edited(src, tmp_path / "good.pt2", replace=config,
                     add=[("data/constants/custom_obj_0", good)]))
    assert pf.unsafe == () and [p.severity for p in pf.problems] == [INFO]
    with zipfile.ZipFile(io.BytesIO(good)) as z:  # the same, rebuilding a c10d class
        members = {i.filename: z.read(i) for i in z.infolist()}
    members["archive/data.pkl"] = members["archive/data.pkl"].replace(
        b"__torch__.torch.classes.quantized\nLinearPackedParamsBase",
        b"__torch__.torch.classes.c10d\nProcessGroup")
    bad = io.BytesIO()
    with zipfile.ZipFile(bad, "w") as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, DATE), data)
    pf = read(edited(src, tmp_path / "bad.pt2", replace=config,
                     add=[("data/constants/custom_obj_0", bad.getvalue())]))
    assert pf.unsafe == ("__torch__.torch.classes.c10d.ProcessGroup.__setstate__",)
    assert "talks to other processes" in messages(pf)


def test_an_older_archive_s_one_torch_save_is_listed_and_located(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2)}
    path = tmp_path / "old.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("old/archive_format", "pt2")
        z.writestr("old/models/model.json", "{}")
        z.writestr("old/data/weights/model.pt", torch_saved(state))
    pf = read(path)
    raw = path.read_bytes()
    for name, t in pf.tensors:
        start, _ = pf.storages[t.storage_key]
        begin = start + t.storage_offset * 4
        assert raw[begin:begin + t.numel * 4] == state[name].numpy().tobytes()
    assert sorted(dict(pf.tensors)) == ["b", "w"] and pf.unsafe == ()


def test_a_pt2_inside_a_pt2_is_not_read_as_one(tmp_path):
    inner = exported(tmp_path, Small(), "inner.pt2").read_bytes()
    src = exported(tmp_path, Small())
    dst = edited(src, tmp_path / "nested.pt2",
                 replace={"data/sample_inputs/model.pt": lambda raw: inner})
    pf = read(dst)
    assert "data/sample_inputs/model.pt (the sample inputs of model" in messages(pf)
    assert "zip without data.pkl" in messages(pf)


# -- the program: what torch evaluates (sympy), runs (guards) and calls (targets) ---------------

class Dynamic(torch.nn.Module):
    def forward(self, x, y):
        z = torch.cat([x, y], 0)
        return z[: z.shape[0] // 2] * 2


def test_a_dynamic_program_with_guards_reads_clean(tmp_path):
    path = tmp_path / "dynamic.pt2"
    ep = torch.export.export(Dynamic(), (torch.ones(4, 3), torch.ones(6, 3)), dynamic_shapes={
        "x": {0: torch.export.Dim("b", min=2, max=100)}, "y": {0: torch.export.Dim("c")}})
    torch.export.save(ep, str(path))
    program = read_program(zipfile.ZipFile(path).read("dynamic/models/model.json").decode(),
                           "models/model.json")
    assert program.exprs and program.guards and "_operator.floordiv" in program.targets
    assert program.unsafe == {}
    assert read(path).unsafe == ()


@pytest.mark.parametrize("expr, ok", [
    ("Symbol('s77', positive=True, integer=True)", True),
    ("FloorDiv(Add(Symbol('s1', integer=True), Integer(-1)), Integer(2))", True),
    ("Float('1.5', precision=53)", True),
    ("__import__('os').system('true')", False),
    ("Symbol('s0').__class__", False),
    ("(lambda: 1)()", False),
    ("Integer(1) + Integer(2)", False),  # srepr never writes an operator
])
def test_a_symbolic_expression_is_sympy_srepr_or_unsafe(expr, ok):
    text = json.dumps({"graph_module": {"x": {"expr_str": expr, "hint": None}},
                       "guards_code": []})
    assert bool(read_program(text, "m.json").unsafe) is not ok


@pytest.mark.parametrize("guard, ok", [
    ("((L['y'].size()[0] + L['x'].size()[0]) // 2) <= L['y'].size()[0] + L['x'].size()[0]",
     True),
    ("L['x'].stride()[1] == 1 and 2 <= L['x'].size()[0]", True),
    ("__import__('os').system('true') == 0", False),
    ("L['x'].size()[0] == L['x'].__class__", False),
    ("L['a\"+open(\"p\",\"w\")+\"'].size()[0] == 1", False),  # pasted into a string literal
])
def test_a_guard_is_sizes_and_arithmetic_or_unsafe(guard, ok):
    text = json.dumps({"graph_module": {}, "guards_code": [guard]})
    assert bool(read_program(text, "m.json").unsafe) is not ok


@pytest.mark.parametrize("target, ok", [
    ("torch.ops.aten.mul.Tensor", True), ("torch.ops.higher_order.cond", True),
    ("_operator.getitem", True), ("math.floor", True), ("torch.sym_max", True),
    ("torch.ops.quantized.linear.default", True),
    ("torch.ops.aten.save.default", False), ("torch.os.system", False), ("torch.save", False),
    ("_operator.methodcaller", False), ("torch.ops.c10d.allreduce_.default", False),
    ("torch.ops.mylib.run.default", False), ("#mylib.op", False),
])
def test_a_node_target_is_a_pure_operator_or_unsafe(target, ok):
    node = {"name": "n", "target": target, "inputs": [], "outputs": [], "metadata": {}}
    text = json.dumps({"graph_module": {"graph": {"nodes": [node]}}, "guards_code": []})
    assert bool(read_program(text, "m.json").unsafe) is not ok


def test_the_corpus_sympy_payload_is_unsafe():
    pf = read(MALICIOUS / "code_archives" / "export-sympy-expr.pt2")
    assert any("sympy.sympify of \"__import__('os')" in u for u in pf.unsafe)
