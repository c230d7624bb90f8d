"""The HF Trainer 2-rank sample is an EXACT resume point, proved with the Trainer's own resume
code: resumed on 2 CPU ranks, steps 5-8 give exactly the losses of the uninterrupted run, and
without any one of the files `check` calls required they do not.

One `torch.distributed.run` launch (2 gloo processes, one thread each) does every run; see
trainer_worker.py. The sample's run has attention dropout, so the restored RNG matters too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ckpt_browser.analysis.resume import resume_report

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_checkpoints" / "hf-multirank" / "checkpoint-4"
WORKER = Path(__file__).resolve().with_name("trainer_worker.py")
SAVED_AT, LAST = 4, 8
# The resume files the Trainer reads besides the weights: a component that `check` reports
# "ok" with one of these files is one it calls required for an exact resume.
RESUME_FILES = {"optimizer.pt", "scheduler.pt", "rng_state_0.pth", "rng_state_1.pth",
                "trainer_state.json"}


def required_components() -> dict[str, list[str]]:
    """Component -> its files, for each "ok" component of `check` holding a resume file."""
    report = resume_report(str(SAMPLE))
    assert report.verdict == "exact", report.findings
    return {name: list(c.files) for name, c in report.components.items()
            if c.status == "ok" and RESUME_FILES & set(c.files)}


def copy_without(tmp_path: Path, name: str, files: list[str]) -> Path:
    """A copy of the sample (named checkpoint-4, as the Trainer's is) without `files`."""
    dest = Path(shutil.copytree(SAMPLE, tmp_path / name / SAMPLE.name))
    for f in files:
        (dest / f).unlink()
    return dest


def run_all(tmp_path: Path, removed: dict[str, list[str]]) -> dict:
    plan = [{"name": "uninterrupted", "resume": None},
            {"name": "resumed", "resume": str(copy_without(tmp_path, "resumed", []))}]
    plan += [{"name": f"without {c}", "resume": str(copy_without(tmp_path, f"without-{c}", files))}
             for c, files in removed.items()]
    for run in plan:
        run["output_dir"] = str(tmp_path / "out" / run["name"].replace(" ", "-"))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = tmp_path / "results.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONHASHSEED="0",
               TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(WORKER), str(tmp_path / "plan.json"), str(out)]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(out.read_text())


def losses(run: dict) -> list[tuple[int, float]]:
    return [(step, loss) for step, loss, _ in run["losses"]]


def test_trainer_sample_resumes_exactly_and_each_required_file_is_needed(tmp_path):
    required = required_components()
    assert {"optimizer", "scheduler", "rng", "progress"} <= set(required), required
    sample_log = json.loads((SAMPLE / "trainer_state.json").read_text())["log_history"]

    results = run_all(tmp_path, required)
    a = dict(losses(results["uninterrupted"]))
    assert sorted(a) == list(range(1, LAST + 1))
    # the uninterrupted run is the one the sample came from: its first steps are the sample's
    saved = [(e["step"], e["loss"]) for e in sample_log]
    assert saved == [(s, a[s]) for s in range(1, SAVED_AT + 1)]

    b = results["resumed"]
    assert losses(b) == [(s, a[s]) for s in range(SAVED_AT + 1, LAST + 1)]  # exactly, not approx
    assert b["weights"] == results["uninterrupted"]["weights"]

    for c, files in required.items():
        run = results[f"without {c}"]
        if "error" in run:  # the Trainer cannot resume without it: that breaks it too
            assert any(f in run["error"] for f in files), (c, run["error"])
            continue
        assert losses(run), c
        assert losses(run) != [(s, a.get(s)) for s, _ in losses(run)], c
        assert run["weights"] != results["uninterrupted"]["weights"], c
