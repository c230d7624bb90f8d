"""A zip whose members are torch files themselves (Stable-Baselines3's model.zip: policy.pth,
policy.optimizer.pth, pytorch_variables.pth, a JSON `data`) is read member by member: each
torch file through the restricted reader, its tensors under the member's name, located in the
archive so their values can be read; nothing in it is loaded."""

from __future__ import annotations

import io
import json
import zipfile

import torch

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.readers.torchfile import read_pickle_file

from .helpers import SAMPLES, run_cli
from .state_helpers import evil_payload


def trained():
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
    policy(torch.randn(5, 4)).sum().backward()
    opt.step()
    return policy, opt


def sb3_zip(path, members: dict, compression=zipfile.ZIP_STORED):
    """The way stable_baselines3.common.save_util.save_to_zip_file writes: JSON `data`, then
    each torch object through archive.open(..., force_zip64=True) and torch.save."""
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr("data", json.dumps({"num_timesteps": 2048, "_n_updates": 10}))
        for name, obj in members.items():
            with archive.open(name, mode="w", force_zip64=True) as f:
                torch.save(obj, f)
        archive.writestr("_stable_baselines3_version", "2.3.2")
    return path


def test_each_torch_member_is_read_under_its_name_and_its_bytes_located(tmp_path):
    policy, opt = trained()
    path = sb3_zip(tmp_path / "model.zip", {"policy.pth": policy.state_dict(),
                                            "policy.optimizer.pth": opt.state_dict(),
                                            "pytorch_variables.pth": {}})
    pf = read_pickle_file(str(path), "model.zip")
    assert pf.unsafe == ()
    tensors = dict(pf.tensors)
    raw = path.read_bytes()
    for name, value in policy.state_dict().items():
        t = tensors[f"policy.{name}"]
        start, _ = pf.storages[t.storage_key]
        begin = start + t.storage_offset * 4
        assert raw[begin:begin + t.numel * 4] == value.numpy().tobytes()
    moments = [n for n in tensors if n.startswith("policy.optimizer.state.")]
    assert len(moments) == 3 * len(list(policy.parameters()))  # step, exp_avg, exp_avg_sq
    info = [p.message for p in pf.problems if p.severity == "info"]
    assert any("3 torch file(s)" in m and "data, _stable_baselines3_version" in m for m in info)


def test_the_training_state_finds_the_policy_and_its_optimizer(tmp_path):
    policy, opt = trained()
    path = sb3_zip(tmp_path / "model.zip", {"policy.pth": policy.state_dict(),
                                            "policy.optimizer.pth": opt.state_dict()})
    ts = open_path(str(path)).training
    assert ts.components["weights"].status == "ok"
    assert ts.components["optimizer"].status == "ok"
    assert "4 of 4 parameters" in ts.components["optimizer"].detail
    result = run_cli("stats", str(path), "policy.0.weight", "--json")
    assert result.returncode == 0, result.stderr
    (stats,) = json.loads(result.stdout)["tensors"]
    weight = policy.state_dict()["0.weight"]
    assert stats["bytes_read"] == weight.numel() * 4
    assert (stats["min"], stats["max"]) == (weight.min().item(), weight.max().item())


def test_a_compressed_archive_is_read_in_memory(tmp_path):
    policy, _ = trained()
    path = sb3_zip(tmp_path / "model.zip", {"policy.pth": policy.state_dict()},
                   compression=zipfile.ZIP_DEFLATED)
    pf = read_pickle_file(str(path), "model.zip")
    assert sorted(dict(pf.tensors)) == sorted(f"policy.{n}" for n in policy.state_dict())
    assert all(t.storage_key not in pf.storages for _, t in pf.tensors)  # not located


def test_a_hostile_member_runs_nothing_and_is_named(tmp_path):
    sentinel = tmp_path / "PWNED"
    policy, _ = trained()
    path = sb3_zip(tmp_path / "model.zip", {"policy.pth": policy.state_dict(),
                                            "pytorch_variables.pth": evil_payload(sentinel)})
    pf = read_pickle_file(str(path), "model.zip")
    assert not sentinel.exists()
    assert "posix.system" in pf.unsafe
    assert any(p.message.startswith("pytorch_variables.pth: ") for p in pf.problems)
    result = run_cli("check", str(path))
    assert not sentinel.exists()
    assert result.returncode != 0 and "Traceback" not in result.stderr


def test_a_zip_of_other_files_is_still_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hello")
    pf = read_pickle_file(str(path), "notes.zip")
    assert pf.obj is None and any("zip without data.pkl" in p.message for p in pf.problems)


def test_an_archive_inside_an_archive_is_not_opened(tmp_path):
    policy, _ = trained()
    inner = sb3_zip(tmp_path / "inner.zip", {"policy.pth": policy.state_dict()})
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as z:
        z.writestr("inner.pth", inner.read_bytes())
    pf = read_pickle_file(str(outer), "outer.zip")
    assert pf.tensors == ()
    assert any("inner.pth: " in p.message and "zip without data.pkl" in p.message
               for p in pf.problems)


# --- the real thing: Stable-Baselines3's own model.save (sample_checkpoints/make_sb3_sample.py)

SB3 = SAMPLES / "projects" / "sb3" / "ppo_cartpole.zip"


def test_stable_baselines3_model_zip_lists_what_torch_loads_from_each_member():
    with zipfile.ZipFile(SB3) as z:
        policy = torch.load(io.BytesIO(z.read("policy.pth")), weights_only=True)
        optim = torch.load(io.BytesIO(z.read("policy.optimizer.pth")), weights_only=True)
    pf = read_pickle_file(str(SB3), SB3.name)
    tensors = dict(pf.tensors)
    raw = SB3.read_bytes()
    for name, value in policy.items():
        t = tensors[f"policy.{name}"]
        assert (t.dtype, t.shape) == ("F32", tuple(value.shape))
        start, _ = pf.storages[t.storage_key]
        begin = start + t.storage_offset * 4
        assert raw[begin:begin + t.numel * 4] == value.numpy().tobytes()
    ts = open_path(str(SB3)).training
    assert ts.components["weights"].status == "ok"
    opt = ts.components["optimizer"]
    assert opt.status == "ok" and f"{len(optim['state'])} of {len(policy)} parameters" in \
        opt.detail
