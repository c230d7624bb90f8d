"""Every file is read as what its content is: the format by the first bytes, TorchScript and
torch.export archives listed from their own records, a name that claims another format reported,
a method pickled by name (getattr) told from one that is called."""

from __future__ import annotations

import json
import os
import pickle
import random
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.errors import NotACheckpoint
from ckpt_browser.model import ERROR, WARNING
from ckpt_browser.readers.files import read_file, sniff
from ckpt_browser.readers.pickle_safe import read_pickle_bytes

from .helpers import SAMPLES

PROJECTS = SAMPLES / "projects"


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def formats(ckpt) -> dict[str, str]:
    return {f.name: f.format for f in ckpt.files}


@pytest.mark.parametrize("write, want", [
    (lambda p: torch.save({"w": torch.ones(2)}, p), "zip"),
    (lambda p: torch.save({"w": torch.ones(2)}, p, _use_new_zipfile_serialization=False),
     "torch-legacy"),
    (lambda p: p.write_bytes(pickle.dumps({"a": 1}, protocol=4)), "pickle"),
    (lambda p: save_file({"w": torch.ones(2)}, str(p)), "safetensors"),
    (lambda p: p.write_text(' \n{"a": 1}'), "json"),
    (lambda p: p.write_bytes(random.Random(15).randbytes(64) + b"x"), "other"),
])
def test_sniff_by_the_first_bytes(tmp_path, write, want):
    path = tmp_path / "file"
    write(path)
    head = path.read_bytes()[:64]
    assert sniff(head) == want


def test_torchscript_is_listed_with_its_tensors_and_never_run():
    ckpt = open_path(str(PROJECTS / "torchscript" / "model.pt")).checkpoint
    (f,) = ckpt.files
    assert f.format == "torchscript"
    scripted = torch.jit.load(str(PROJECTS / "torchscript" / "model.pt"))
    truth = {k: tuple(v.shape) for k, v in scripted.state_dict().items()}
    assert {t.name: tuple(t.shape) for t in f.tensors} == truth
    assert all(t.component == "weights" for t in f.tensors)
    assert [p.severity for p in f.problems] == [WARNING] and "TorchScript" in f.problems[0].message


def test_export_archive_tensors_sit_where_torch_export_stored_them():
    path = PROJECTS / "export" / "model.pt2"
    ckpt = open_path(str(path)).checkpoint
    (f,) = ckpt.files
    assert f.format == "export"
    ep = torch.export.load(str(path))
    truth = {k: v for k, v in ep.state_dict.items()}
    assert {t.name for t in f.tensors} == set(truth)
    raw = path.read_bytes()
    for t in f.tensors:
        assert tuple(t.shape) == tuple(truth[t.name].shape) and t.located
        want = truth[t.name].detach().contiguous().numpy().tobytes()
        assert raw[t.begin:t.end] == want, t.name


@pytest.mark.parametrize("code", [[7], {"x": 7}, "F32", None])
def test_an_export_dtype_that_is_no_int_code_leaves_the_tensor_unlisted(tmp_path, code):
    # a list or object as the dtype code was an unhashable dict key: an internal error
    path = tmp_path / "model.pt2"
    config = {"config": {"w": {"tensor_meta": {"dtype": code, "sizes": [{"as_int": 2}]},
                               "path_name": "weight_0"}}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model/archive_format", "pt2")
        zf.writestr("model/data/weights/model_weights_config.json", json.dumps(config))
        zf.writestr("model/data/weights/weight_0", bytes(8))
    (f,) = open_path(str(path)).checkpoint.files
    assert f.format == "export" and f.tensors == ()


def test_a_torch_zip_named_safetensors_is_read_as_a_torch_zip(tmp_path):
    torch.save(model().state_dict(), tmp_path / "model.safetensors")
    ckpt = open_path(str(tmp_path / "model.safetensors")).checkpoint
    (f,) = ckpt.files
    assert f.format == "torch-zip" and len(f.tensors) == 4
    assert any(p.severity == WARNING and "named like a safetensors file" in p.message
               for p in f.problems)


def test_a_safetensors_file_named_bin_is_read_as_safetensors(tmp_path):
    save_file({k: v.contiguous() for k, v in model().state_dict().items()},
              str(tmp_path / "pytorch_model.bin"))
    ckpt = open_path(str(tmp_path / "pytorch_model.bin")).checkpoint
    assert [f.format for f in ckpt.files] == ["safetensors"]
    assert ckpt.totals.tensors == 4 and ckpt.problems == ()


def test_a_file_that_claims_a_format_it_lacks_is_an_error_in_a_folder(tmp_path):
    torch.save(model().state_dict(), tmp_path / "model.pt")
    (tmp_path / "optimizer.pt").write_text("these are notes, not an optimizer\n" * 20)
    (tmp_path / "notes.txt").write_text("notes are fine")
    ckpt = open_path(str(tmp_path)).checkpoint
    assert formats(ckpt) == {"model.pt": "torch-zip", "notes.txt": "other",
                             "optimizer.pt": "other"}
    errors = [p for p in ckpt.problems if p.severity == ERROR]
    assert [p.file for p in errors] == ["optimizer.pt"]
    assert "named like a torch file" in errors[0].message


def test_random_bytes_are_not_a_checkpoint_and_a_cut_zip_is_a_damaged_one(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x13" + os.urandom(4999))
    with pytest.raises(NotACheckpoint):
        _ = open_path(str(tmp_path / "a.bin")).checkpoint
    torch.save(model().state_dict(), tmp_path / "full.pt")
    raw = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "half.pt").write_bytes(raw[: len(raw) // 2])
    f = read_file(str(tmp_path), "half.pt")
    assert f.format == "torch-zip" and f.error and "truncated zip" in f.error


def test_hidden_files_and_a_mirror_manifest_are_no_part_of_the_checkpoint(tmp_path):
    torch.save(model().state_dict(), tmp_path / "model.pt")
    (tmp_path / ".ckpt-browser-mirror.json").write_text("{}")
    (tmp_path / ".gitattributes").write_text("*.pt filter=lfs")
    assert formats(open_path(str(tmp_path)).checkpoint) == {"model.pt": "torch-zip"}


# -- a method pickled by name is a reference; calling one is unsafe --------------------------

class Buffer:
    """Stands for mmengine's HistoryBuffer: its instances keep functions of the class."""

    def __init__(self):
        self.methods = {"mean": Buffer.mean}  # pickled as getattr(Buffer, "mean")

    def mean(self):
        return 0


Buffer.__module__ = "somelib_history"
Buffer.__qualname__ = "Buffer"
Buffer.mean.__qualname__ = "Buffer.mean"


def _pickled_method_reference() -> bytes:
    """How protocol 2 pickles a function defined in a class: getattr(Class, name)."""
    import sys
    import types

    fake = types.ModuleType("somelib_history")
    fake.Buffer = Buffer
    sys.modules["somelib_history"] = fake
    try:
        return pickle.dumps(Buffer(), protocol=2)
    finally:
        del sys.modules["somelib_history"]


def test_a_method_pickled_by_name_is_a_reference_not_unsafe():
    data = _pickled_method_reference()
    assert b"getattr" in data
    obj, unsafe, problems = read_pickle_bytes(data, "f.pkl")
    assert unsafe == () and [p for p in problems if p.severity == ERROR] == []
    ref = obj.fields["methods"]["mean"]
    assert ref.qualname == "somelib_history.Buffer.mean"


def test_calling_a_method_reference_while_loading_is_unsafe():
    # getattr(Class, "mean")() : the class's code would run during the load
    glob = b"c__builtin__\ngetattr\n"
    data = (b"\x80\x02" + glob + b"csomelib_history\nBuffer\n" + b"X\x04\x00\x00\x00mean"
            + b"\x86R)R.")
    _, unsafe, _ = read_pickle_bytes(data, "f.pkl")
    assert "somelib_history.Buffer.mean" in unsafe


def test_getattr_on_anything_else_or_kept_as_a_value_is_unsafe():
    glob = b"c__builtin__\ngetattr\n"
    reach = b"\x80\x02" + glob + b"cposix\nsystem\nX\x04\x00\x00\x00mean\x86R."
    assert "builtins.getattr" in read_pickle_bytes(reach, "f")[1] or \
        "posix.system" in read_pickle_bytes(reach, "f")[1]
    dunder = b"\x80\x02" + glob + b"csomelib_history\nBuffer\nX\x08\x00\x00\x00__init__\x86R."
    assert "builtins.getattr" in read_pickle_bytes(dunder, "f")[1]
    kept = b"\x80\x02}X\x01\x00\x00\x00f" + glob + b"s."  # {"f": getattr}
    assert "builtins.getattr" in read_pickle_bytes(kept, "f")[1]


def test_the_mmengine_sample_is_read_and_not_called_unsafe():
    ckpt = open_path(str(PROJECTS / "mmengine" / "work_dir" / "epoch_2.pth")).checkpoint
    (f,) = ckpt.files
    assert f.source.unsafe == () and f.error is None
    with zipfile.ZipFile(PROJECTS / "mmengine" / "work_dir" / "epoch_2.pth") as z:
        pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
        assert b"getattr" in z.read(pkl)  # it does hold the method references


def test_the_json_of_a_torchscript_file_names_its_format(capsys):
    from ckpt_browser.cli import main

    assert main(["inspect", "--json", str(PROJECTS / "torchscript" / "model.pt")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["format"] for f in doc["files"]] == ["torchscript"]
    assert {t["component"] for t in doc["tensors"]} == {"weights"}
