"""Golden text snapshots of `inspect`, `check` and `diff` on the bundled samples.

Each case runs `ckpt_browser.cli.main` in-process (a subprocess per case would cost ~0.5 s of
interpreter start; in-process the whole folder runs in about a second) and compares the exit
code, stdout and stderr with `expected/<case>.txt`, so a wording change shows up in review as a
diff of that file. After an intended change:

    python -m pytest tests/golden --update-golden

rewrites the files; review and commit them with the change.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import math
import os
from pathlib import Path

import pytest

from ckpt_browser.cli import main

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
SAMPLES = HERE.parents[1] / "sample_checkpoints"
PLACEHOLDER = "<samples>"

RUN = "tiny-llama-run"
# name -> arguments; "<samples>" stands for the sample folder. Each case also runs with --json
# (expected/<name>-json.txt).
CASES: dict[str, list[str]] = {
    # inspect: one per layout, a damaged folder and a malicious one (exit 5)
    "inspect-hf-trainer": ["inspect", f"<samples>/{RUN}/checkpoint-6"],
    "inspect-damaged": ["inspect", "<samples>/tiny-llama-damaged"],
    "inspect-deepspeed": ["inspect", "<samples>/deepspeed-run"],
    "inspect-dcp": ["inspect", "<samples>/dcp-ranks/ranks-2"],
    "inspect-torchtitan": ["inspect", "<samples>/torchtitan-run"],
    "inspect-lightning": ["inspect", "<samples>/lightning"],
    "inspect-megatron": ["inspect", "<samples>/megatron-run"],
    "inspect-accelerate": ["inspect", "<samples>/accelerate-state/step_4"],
    "inspect-nanogpt": ["inspect", "<samples>/projects/nanogpt/ckpt.pt"],
    "inspect-malicious": ["inspect", "<samples>/malicious"],
    # check: every verdict (exact 0, inexact 3, weights-only 4, broken 5) and a run folder
    "check-hf-trainer": ["check", f"<samples>/{RUN}/checkpoint-6"],
    "check-run-folder": ["check", "<samples>/hf-run3"],
    "check-damaged": ["check", "<samples>/tiny-llama-damaged"],
    "check-deepspeed": ["check", "<samples>/deepspeed-run"],
    "check-dcp-world-size": ["check", "<samples>/dcp-ranks/ranks-2", "--world-size", "4"],
    # the file, not the folder: last.ckpt and epoch=0-step=4.ckpt are both step 4, and between
    # equal steps a folder check orders by modification time, which a git checkout does not keep
    "check-lightning": ["check", "<samples>/lightning/epoch=0-step=4.ckpt"],
    "check-megatron": ["check", "<samples>/megatron-run"],
    "check-nanogpt": ["check", "<samples>/projects/nanogpt/ckpt.pt"],
    "check-malicious": ["check", "<samples>/malicious"],
    # diff: a training-state diff, a weights diff with missing tensors, a resharded DCP, values
    "diff-state": ["diff", f"<samples>/{RUN}/checkpoint-3", f"<samples>/{RUN}/checkpoint-6"],
    "diff-damaged": ["diff", "<samples>/tiny-llama-release", "<samples>/tiny-llama-damaged"],
    "diff-dcp-reshard": ["diff", "<samples>/dcp-ranks/ranks-2", "<samples>/dcp-ranks/ranks-4"],
    "diff-values": ["diff", "--values", "--weights-only", "<samples>/tiny-llama-release",
                    f"<samples>/{RUN}/checkpoint-3"],
}
ALL = {**CASES, **{f"{name}-json": [*args, "--json"] for name, args in CASES.items()}}

# diff --values metrics that are sums over a tensor (numpy.dot goes through BLAS, whose summation
# order depends on the CPU's kernel); max_abs_diff is a max, exact on every machine
SUMMED_METRICS = ("mean_abs_diff", "rel_l2", "cosine")


@pytest.fixture(autouse=True)
def fixed_environment(monkeypatch, tmp_path):
    """The same environment on every machine: no CKPT_BROWSER_* settings (caps, allowed
    globals, debug), caches under tmp_path, and a fixed terminal width (only argparse reads
    COLUMNS today; the reports do not wrap)."""
    for name in [n for n in os.environ if n.startswith("CKPT_BROWSER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "30")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def run(args: list[str]) -> tuple[int, str, str]:
    argv = [a.replace(PLACEHOLDER, str(SAMPLES)) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


def machine_independent(text: str, as_json: bool = False) -> str:
    """Everything in the output that differs between machines, made the same:
    - the sample root is absolute (where the repository is checked out): `<samples>`;
    - --json timelines carry each checkpoint's modification time, which a git checkout sets
      to the time of the checkout: `"<mtime>"`;
    - the --values metrics that are sums over a tensor (SUMMED_METRICS) go through numpy.dot,
      i.e. BLAS, whose summation order depends on the CPU's kernel: rounded to 6 significant
      digits (the text report prints 4).
    File sizes are the committed files' (`.gitattributes` keeps the JSON ones LF), the text
    reports show no clocks, and ties that a folder check breaks by modification time are
    avoided in CASES. --json output is also re-indented, one value per line, so a diff shows the
    field that changed; key order is kept (it is the order the program writes)."""
    for root in {str(SAMPLES), os.path.realpath(SAMPLES)}:
        text = text.replace(root, PLACEHOLDER)
    if not as_json or not text.strip():
        return text
    return json.dumps(_stable_values(json.loads(text)), indent=2) + "\n"


def _stable_values(node, key: str = ""):
    if isinstance(node, dict):
        return {k: _stable_values(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_stable_values(v, key) for v in node]
    if key == "mtime" and node is not None:
        return "<mtime>"
    if key in SUMMED_METRICS and isinstance(node, float) and math.isfinite(node):
        return float(f"{node:.6g}")
    return node


def render(args: list[str]) -> str:
    code, out, err = run(args)
    out, err = machine_independent(out, as_json="--json" in args), machine_independent(err)
    return (f"$ ckpt-browser {' '.join(args)}\n"
            f"exit {code}\n"
            f"--- stdout\n{out}"
            f"--- stderr\n{err}")


@pytest.mark.parametrize("name", list(ALL))
def test_golden(name, update_golden):
    actual = render(ALL[name])
    path = EXPECTED / f"{name}.txt"
    if update_golden:
        path.write_text(actual, encoding="utf-8", newline="\n")
        return
    assert path.exists(), (f"{path.relative_to(HERE.parents[1])} is missing; create it with "
                           "`python -m pytest tests/golden --update-golden`")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True),
                                            actual.splitlines(keepends=True),
                                            f"expected/{name}.txt", "actual"))
        pytest.fail(f"output of `ckpt-browser {' '.join(ALL[name])}` changed:\n{diff}\n"
                    "if the change is intended: python -m pytest tests/golden --update-golden",
                    pytrace=False)
