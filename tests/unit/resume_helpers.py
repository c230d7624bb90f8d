"""Helpers for the resume-check tests: sample copies to damage, DCP metadata edited with
torch's own classes, and the report as `check --json` gives it, with paths made relative."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

from .helpers import REPO, SAMPLES

COMPONENT_ORDER = ["weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler"]
TITAN = "torchtitan-run/checkpoint/step-10"
MULTIRANK = "hf-multirank/checkpoint-4"
RUN3_6 = "hf-run3/checkpoint-6"


def doc(path, world_size: int | None = None, base: Path = REPO) -> dict:
    """`check --json` for one checkpoint, computed in-process, with "path" relative to `base`."""
    from ckpt_browser.analysis.resume import resume_report
    from ckpt_browser.report.resume import resume_doc

    d = resume_doc(resume_report(str(path), world_size))
    d["path"] = Path(os.path.relpath(d["path"], base)).as_posix()
    return d


def sample_doc(rel: str, world_size: int | None = None) -> dict:
    return doc(SAMPLES / rel, world_size)


def copy(rel: str, tmp_path: Path) -> Path:
    """A copy of one sample folder, keeping its own name (checkpoint-4, step-10 ...), which the
    framework detection reads."""
    src = SAMPLES / rel
    return Path(shutil.copytree(src, tmp_path / "copy" / src.name))


def comp(status: str, files: list[str], detail: str) -> dict:
    return {"status": status, "files": files, "detail": detail}


def finding(severity: str, component: str, file: str | None, message: str) -> dict:
    return {"severity": severity, "component": component, "file": file, "message": message}


def edit_dcp_metadata(folder: Path, edit) -> None:
    """Rewrite a DCP `.metadata` we copied from our own sample: read it with torch's reader
    (plain pickle of torch's dataclasses), let `edit(metadata)` change it, pickle it back."""
    from torch.distributed.checkpoint import FileSystemReader

    metadata = FileSystemReader(str(folder)).read_metadata()
    edit(metadata)
    with open(folder / ".metadata", "wb") as f:
        pickle.dump(metadata, f)


def run_check(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckpt_browser", "check", *args],
                          capture_output=True, text=True, cwd=cwd or REPO, timeout=120)


def check_json(*args: str, cwd: Path | None = None):
    r = run_check("--json", *args, cwd=cwd)
    assert r.stderr == "", r.stderr
    return r.returncode, json.loads(r.stdout)


def fsdp_checkpoint(folder: Path, ranks: int = 2) -> Path:
    """An HF Trainer FSDP SHARDED_STATE_DICT checkpoint: model and optimizer as DCP folders
    written by torch's own dcp.save, scheduler.pt, per-rank RNG files, trainer_state.json."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(3):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        dcp.save({"model": model.state_dict()},
                 checkpoint_id=str(folder / "pytorch_model_fsdp_0"))
        dcp.save({"optimizer": opt.state_dict()}, checkpoint_id=str(folder / "optimizer_0"))
    torch.save(sched.state_dict(), folder / "scheduler.pt")
    for r in range(ranks):
        shutil.copy(SAMPLES / MULTIRANK / f"rng_state_{r % 2}.pth", folder / f"rng_state_{r}.pth")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 3, "epoch": 1.0}))
    return folder
