"""read_pickle_file on real torch.save output (zip and legacy), plain pickles, and damaged copies.

Expected tensors come from torch.load(weights_only=True) of the same file; byte offsets are
checked by comparing the file's bytes at each located storage with the loaded storage.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import sys

import numpy as np
import pytest
import torch

from ckpt_browser.model import ERROR
from ckpt_browser.readers.torchfile import read_pickle_file, walk
from ckpt_browser.standins import NumpyArray, Opaque, UnsafeCall

from .state_helpers import (
    adamw_state,
    dcp_save,
    dict_pickle,
    evil_payload,
    leaves,
    rewrite_zip,
    rng_state,
    run_python,
    storage_bytes,
    storage_pid,
    tag,
    tensor_v2,
    torch_load,
    torch_zip,
)


def read(path, name=None):
    return read_pickle_file(str(path), name or path.name)


def errors(pf) -> list[str]:
    return [p.message for p in pf.problems if p.severity == ERROR]


def assert_matches_torch(pf, path, original=None):
    """Every tensor torch.load finds (or `original` holds) is listed with the same dtype and
    shape, and the file's bytes at the located storage are the tensor's storage bytes."""
    ref = dict(leaves(torch_load(path) if original is None else original))
    got = dict(pf.tensors)
    assert set(got) == set(ref)
    raw = path.read_bytes()
    for p, t in ref.items():
        assert (got[p].dtype, got[p].shape) == (tag(t.dtype), tuple(t.shape)), p
        offset, length = pf.storages[got[p].storage_key]
        assert raw[offset:offset + length] == storage_bytes(t), p


# -- real files --------------------------------------------------------------------------------

def test_adamw_optimizer_state_matches_torch_load(tmp_path):
    path = tmp_path / "optimizer.pt"
    torch.save(adamw_state(steps=2), path)
    pf = read(path)
    assert (pf.kind, pf.problems, pf.unsafe, pf.size) == ("torch-zip", (), (), path.stat().st_size)
    assert_matches_torch(pf, path)
    paths = dict(pf.tensors)
    assert {"state.0.exp_avg", "state.0.exp_avg_sq", "state.3.step"} <= set(paths)
    assert paths["state.0.exp_avg"].shape == (5, 6)
    assert pf.obj["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert pf.obj["param_groups"][0]["betas"] == (0.9, 0.999)


def test_root_folder_is_the_save_time_stem_not_the_current_name(tmp_path):
    torch.save({"w": torch.arange(4.0)}, tmp_path / "saved-as.pt")
    os.rename(tmp_path / "saved-as.pt", tmp_path / "renamed.bin")
    pf = read(tmp_path / "renamed.bin")
    assert pf.problems == () and [p for p, _ in pf.tensors] == ["w"]


def test_hf_rng_state(tmp_path):
    state = rng_state()
    path = tmp_path / "rng_state.pth"
    torch.save(state, path)
    pf = read(path)
    assert pf.problems == () and pf.kind == "torch-zip"
    name, array, pos, has_gauss, cached = pf.obj["numpy"]
    assert array == NumpyArray("uint32", (624,))
    assert (name, pos, has_gauss, cached) == (state["numpy"][0], *state["numpy"][2:])
    assert pf.obj["cpu"].dtype == "U8" and pf.obj["cpu"].shape == (5056,)
    assert pf.obj["python"] == state["python"]
    assert_matches_torch(pf, path)


def test_accelerate_random_states_pkl_is_a_torch_zip(tmp_path):
    path = tmp_path / "random_states_0.pkl"
    torch.save({"step": 0, "random_state": random.getstate(),
                "numpy_random_seed": np.random.get_state(),
                "torch_manual_seed": torch.get_rng_state()}, path)
    pf = read(path)
    assert pf.kind == "torch-zip" and pf.problems == ()
    assert [p for p, _ in pf.tensors] == ["torch_manual_seed"]
    assert pf.obj["numpy_random_seed"][1] == NumpyArray("uint32", (624,))


def test_dtypes_parameters_views_and_tied_weights(tmp_path):
    tensors = {name: torch.zeros(3, dtype=getattr(torch, name)) for name in
               ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                "uint8", "bool", "complex64", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                "uint16", "uint32", "uint64")}
    base = torch.arange(10.0)
    shared = torch.randn(2, 2)
    tensors.update(param=torch.nn.Parameter(torch.ones(2, 3)), view=base[3:], base=base,
                   tied_a=shared, tied_b=shared, t=torch.ones(2, 3).t())
    path = tmp_path / "model.bin"
    torch.save(tensors, path)
    pf = read(path)
    assert pf.problems == ()
    assert_matches_torch(pf, path)
    got = dict(pf.tensors)
    assert got["param"].is_parameter and got["param"].requires_grad
    assert not got["base"].is_parameter
    assert (got["view"].storage_offset, got["view"].storage_numel) == (3, 10)
    assert got["view"].storage_key == got["base"].storage_key
    assert got["tied_a"] == got["tied_b"]
    assert (got["t"].shape, got["t"].stride) == ((3, 2), (1, 3))


def test_legacy_format(tmp_path):
    path = tmp_path / "optimizer.pt"
    torch.save(adamw_state(), path, _use_new_zipfile_serialization=False)
    pf = read(path)
    assert (pf.kind, pf.problems) == ("torch-legacy", ())
    assert_matches_torch(pf, path)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol 4")
def test_legacy_format_with_a_newer_pickle_protocol_and_a_view(tmp_path):
    path = tmp_path / "x.pt"
    base = torch.arange(10.0)
    original = {"view": base[4:], "other": torch.ones(2, dtype=torch.bfloat16)}
    torch.save(original, path, _use_new_zipfile_serialization=False, pickle_protocol=4)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported operand 149"):
        torch.load(path, weights_only=True)  # torch's own safe loader cannot read FRAME
    pf = read(path)
    assert (pf.kind, pf.problems) == ("torch-legacy", ())
    assert dict(pf.tensors)["view"].storage_offset == 4
    assert_matches_torch(pf, path, original)


def test_plain_pickle_of_a_namespace(tmp_path):
    path = tmp_path / "training_args.bin"
    path.write_bytes(pickle.dumps(argparse.Namespace(lr=0.1, name="run", steps=[1, 2])))
    pf = read(path)
    assert (pf.kind, pf.problems) == ("pickle", ())
    assert pf.obj == Opaque("argparse.Namespace", (), {"lr": 0.1, "name": "run", "steps": [1, 2]})
    assert pf.obj.fields["lr"] == 0.1


def test_torch_save_of_an_object_torch_refuses(tmp_path):
    path = tmp_path / "sampler.bin"
    torch.save({"args": argparse.Namespace(seed=3), "t": torch.ones(2)}, path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    pf = read(path)
    assert pf.problems == () and pf.obj["args"].fields == {"seed": 3}
    assert [p for p, _ in pf.tensors] == ["t"]


# -- nothing runs ----------------------------------------------------------------------------

def check_evil(pf, sentinel):
    assert not sentinel.exists()
    assert "this" not in sys.modules  # __import__("this") would print the Zen of Python
    assert set(pf.unsafe) == {"posix.system", "builtins.eval", "subprocess.Popen",
                              "builtins.__import__"}
    assert pf.obj["x"] == UnsafeCall("posix.system", (f"touch {sentinel}",))
    assert pf.obj["lr"] == 0.1


def test_malicious_torch_save_runs_nothing_and_keeps_the_other_keys(tmp_path):
    sentinel = tmp_path / "PWNED"
    path = tmp_path / "optimizer.pt"
    torch.save({"lr": 0.1, "weights": torch.ones(3), **evil_payload(sentinel)}, path)
    assert "posix.system" in torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    pf = read(path)
    check_evil(pf, sentinel)
    assert [p for p, _ in pf.tensors] == ["weights"]
    assert [(p.severity, "posix.system" in p.message) for p in pf.problems] == [("error", True)]


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_malicious_plain_pickle_runs_nothing(tmp_path, protocol):
    sentinel = tmp_path / "PWNED"
    path = tmp_path / "custom_checkpoint_0.pkl"
    path.write_bytes(pickle.dumps({"lr": 0.1, **evil_payload(sentinel)}, protocol=protocol))
    check_evil(read(path), sentinel)


def test_malicious_legacy_file_runs_nothing(tmp_path):
    sentinel = tmp_path / "PWNED"
    path = tmp_path / "old.pt"
    torch.save({"lr": 0.1, **evil_payload(sentinel)}, path, _use_new_zipfile_serialization=False)
    pf = read(path)
    assert pf.kind == "torch-legacy"
    check_evil(pf, sentinel)


# -- damaged and hostile files ------------------------------------------------------------------

def test_zip_without_data_pkl(tmp_path):
    path = tmp_path / "weights.npz"
    np.savez(path, a=np.zeros(3))
    pf = read(path)
    assert pf.kind == "torch-zip" and pf.obj is None
    assert len(errors(pf)) == 1 and "zip without data.pkl" in errors(pf)[0]


def test_truncated_zip(tmp_path):
    full = tmp_path / "full.pt"
    torch.save(adamw_state(), full)
    path = tmp_path / "optimizer.pt"
    path.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    pf = read(path)
    assert errors(pf) == ["truncated zip: no central directory at the end of the file "
                          "(an interrupted save?)"]


def test_storage_record_shorter_than_its_tensor(tmp_path):
    src = tmp_path / "src.pt"
    torch.save({"w": torch.ones(100), "b": torch.ones(2)}, src)
    path = rewrite_zip(src, tmp_path / "model.pt", {"data/0": b"\0" * 100})
    pf = read(path)
    assert errors(pf) == ["storage record data/0 has 100 bytes but the tensor needs 400"]
    assert {p for p, _ in pf.tensors} == {"w", "b"}


def test_missing_and_compressed_storage_records(tmp_path):
    src = tmp_path / "src.pt"
    torch.save({"w": torch.ones(100), "b": torch.ones(2)}, src)
    pf = read(rewrite_zip(src, tmp_path / "a.pt", {"data/0": None}))
    assert errors(pf) == ["storage record data/0 is missing (a tensor needs 400 bytes)"]
    pf = read(rewrite_zip(src, tmp_path / "b.pt", {}, compress={"data/1"}))
    assert errors(pf) == ["storage record data/1 is compressed (method 8); torch needs it stored"]


def test_storage_claiming_10_to_the_15_elements_allocates_nothing(tmp_path):
    pid = storage_pid("FloatStorage", "0", 10**15)
    path = torch_zip(tmp_path / "big.pt", dict_pickle({"w": tensor_v2(pid, (10**15,), (1,))}),
                     {"0": b"\0" * 16})
    pf = read(path)
    (_, t), = pf.tensors
    assert (t.shape, t.storage_numel, t.numel) == ((10**15,), 10**15, 10**15)
    assert errors(pf) == ["storage record data/0 has 16 bytes but the tensor needs "
                          "4,000,000,000,000,000"]


def test_tensor_reaching_past_its_declared_storage(tmp_path):
    pid = storage_pid("FloatStorage", "0", 4)
    path = torch_zip(tmp_path / "m.pt", dict_pickle({"w": tensor_v2(pid, (3, 2), (2, 1))}),
                     {"0": b"\0" * 16})
    assert errors(read(path)) == ["tensor w reaches element 5 of storage 0, which holds 4"]


def test_truncated_data_pkl_inside_a_zip(tmp_path):
    src = tmp_path / "src.pt"
    torch.save(adamw_state(), src)
    with __import__("zipfile").ZipFile(src) as z:
        pkl = z.read("src/data.pkl")
    pf = read(rewrite_zip(src, tmp_path / "optimizer.pt", {"data.pkl": pkl[: len(pkl) // 2]}))
    assert pf.obj is None and pf.tensors == ()
    assert errors(pf) == ["pickle ends early (truncated?)"]


def test_truncated_legacy_file(tmp_path):
    full = tmp_path / "full.pt"
    torch.save({"w": torch.ones(1000)}, full, _use_new_zipfile_serialization=False)
    path = tmp_path / "old.pt"
    path.write_bytes(full.read_bytes()[:-100])
    pf = read(path)
    assert pf.kind == "torch-legacy" and [p for p, _ in pf.tensors] == ["w"]
    assert len(errors(pf)) == 1 and "(truncated?)" in errors(pf)[0]


def test_not_a_pickle_empty_and_missing(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"a": 1}))
    (tmp_path / "empty.bin").write_bytes(b"")
    assert errors(read(tmp_path / "config.json"))[0].startswith("not a torch file or pickle")
    assert errors(read(tmp_path / "empty.bin")) == ["empty file: not a torch file or pickle"]
    assert errors(read(tmp_path / "nope.pt")) == ["file does not exist"]
    assert errors(read(tmp_path)) == ["is a folder, not a file"]


def test_truncated_plain_pickle(tmp_path):
    path = tmp_path / "sampler.bin"
    path.write_bytes(pickle.dumps({"a": list(range(100))}, protocol=2)[:-40])
    assert errors(read(path)) == ["pickle ends early (truncated?)"]


def test_plain_pickle_over_the_size_limit_is_not_read(tmp_path):
    path = tmp_path / "huge.pkl"
    with open(path, "wb") as f:
        f.write(b"\x80\x02")
        f.truncate(65 * 2**20)  # sparse: no disk used
    assert errors(read(path)) == ["pickle is 68,157,440 bytes, over the 67,108,864-byte limit; "
                                  "not read (CKPT_BROWSER_MAX_PICKLE_BYTES raises it)"]


def test_a_cap_is_raised_by_its_environment_variable(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "huge.pkl"
    path.write_bytes(b"\x80\x02" + b"N0" * 1000 + b"N.")  # a valid 2 KB pickle of None
    code = ("import sys; from ckpt_browser.readers.torchfile import read_pickle_file; "
            f"pf = read_pickle_file({str(path)!r}, 'huge.pkl'); "
            "print([p.message for p in pf.problems])")
    env = {**__import__("os").environ, "CKPT_BROWSER_MAX_PICKLE_BYTES": "1_000"}
    low = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "over the 1,000-byte limit" in low.stdout, low.stdout + low.stderr
    env["CKPT_BROWSER_MAX_PICKLE_BYTES"] = "100000"
    high = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert high.stdout.strip() == "[]", high.stdout + high.stderr


@pytest.mark.parametrize("legacy", [False, True])
def test_damaged_torch_files_never_raise(tmp_path, legacy):
    """Random bytes changed or cut out of real files: problems, never an exception."""
    src = tmp_path / "src.pt"
    torch.save({**adamw_state(), "rng": rng_state()}, src,
               _use_new_zipfile_serialization=not legacy)
    original = src.read_bytes()
    rnd = random.Random(1)
    for _ in range(150):
        data = bytearray(original)
        for _ in range(rnd.randrange(1, 5)):
            pos = rnd.randrange(len(data))
            if rnd.random() < 0.7:
                data[pos] = rnd.randrange(256)
            else:
                del data[pos:pos + rnd.randrange(1, 200)]
        path = tmp_path / "x.pt"
        path.write_bytes(data)
        read(path)  # must not raise


# -- walk --------------------------------------------------------------------------------------

def test_walk_paths_opaque_objects_and_empty_containers():
    obj = {"state": {0: {"exp_avg": 1}}, "groups": [{"params": [0, 1]}], "empty": {},
           "ns": Opaque("argparse.Namespace", (), {"lr": 0.5}), "s": {1, 2}}
    assert list(walk(obj)) == [
        ("state.0.exp_avg", 1), ("groups.0.params.0", 0), ("groups.0.params.1", 1),
        ("empty", {}), ("ns", obj["ns"]), ("ns.lr", 0.5), ("s", {1, 2})]
    assert list(walk([7], "top")) == [("top.0", 7)]


def test_walk_survives_cycles_and_deep_nesting():
    cyclic: list = [1]
    cyclic.append(cyclic)
    assert list(walk(cyclic)) == [("0", 1), ("1", cyclic)]
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    out = list(walk(deep, max_depth=50))
    assert len(out) == 1 and out[0][0] == ".".join(["0"] * 50)


# -- import hygiene ----------------------------------------------------------------------------

HYGIENE = """
import sys
from ckpt_browser.readers.torchfile import read_pickle_file
from ckpt_browser.readers.dcp import read_dcp
pf = read_pickle_file(sys.argv[1], "optimizer.pt")
d = read_dcp(sys.argv[2], "dcp")
assert pf.tensors and not pf.problems, pf.problems
assert d.entries and not d.problems, d.problems
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "numpy", "textual"})
print(len(pf.tensors), len(d.entries), heavy)
"""


def test_readers_import_neither_torch_nor_numpy(tmp_path):
    torch.save({**adamw_state(), "rng": rng_state()}, tmp_path / "optimizer.pt")
    dcp_save({"model": {"w": torch.ones(2, 2)}, "step": 3}, tmp_path / "dcp")
    r = run_python(HYGIENE, str(tmp_path / "optimizer.pt"), str(tmp_path / "dcp"))
    assert r.returncode == 0, r.stderr
    tensors, entries, heavy = r.stdout.split(" ", 2)
    assert int(tensors) > 0 and int(entries) == 2 and heavy.strip() == "[]"
