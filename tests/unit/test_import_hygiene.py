"""The core never imports Textual, and a safetensors-only browse imports no torch.

Checked in a fresh interpreter, because this test session has imported all of them already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from .helpers import RUN6

SCRIPT = """
import io, json, sys, contextlib
import ckpt_browser.readers
import ckpt_browser.readers.integrity
import ckpt_browser.analysis.modules
import ckpt_browser.report.json_report
import ckpt_browser.report.text
import ckpt_browser.cli as cli

out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = cli.main(["inspect", "--json", sys.argv[1]])
with contextlib.redirect_stdout(io.StringIO()):
    cli.main(["inspect", sys.argv[1]])
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in {"textual", "torch", "safetensors", "numpy"})
print(json.dumps({"code": code, "tensors": len(json.loads(out.getvalue())["tensors"]),
                  "heavy": heavy}))
"""


def test_core_and_inspect_import_no_textual_torch_or_safetensors(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(RUN6)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["tensors"] > 0  # the inspect really ran
    assert result["heavy"] == []


def test_the_check_can_fail():
    """Guard against a vacuous check: importing the TUI does pull Textual in."""
    script = ("import sys, ckpt_browser.tui.browse.screen; "
              "print('textual' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"
