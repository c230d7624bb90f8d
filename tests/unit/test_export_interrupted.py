"""An export stopped midway (SIGSTOP, then SIGKILL, as a crash or Ctrl-Z and kill would) leaves
nothing in OUT that a loader takes for a complete checkpoint, and a second export says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import save_file

from ckpt_browser.export.write import PARTIAL

SHARDS = 8


def loadable(out) -> list[str]:
    """What in OUT a loader would open as a checkpoint: the one file, or an index."""
    return [n for n in ("model.safetensors", "model.safetensors.index.json", "config.json")
            if (out / n).exists()]


@pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP and /proc")
def test_a_killed_export_leaves_nothing_that_looks_complete(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    save_file({f"layer.{i}.weight": torch.full((2048, 2048), float(i)) for i in range(SHARDS)},
              src / "model.safetensors")  # 8 x 16 MiB
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))
    out = tmp_path / "out"
    # bf16: each block goes through torch, so the export takes long enough to be caught
    proc = subprocess.Popen([sys.executable, "-m", "ckpt_browser", "export", str(src), str(out),
                             "--dtype", "bf16", "--max-shard-size", "8M"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial = out / PARTIAL
    try:
        # wait on the files, not on time: two shards written, the third begun
        while proc.poll() is None and not (partial.is_dir() and
                                           len(list(partial.glob("model-*"))) >= 3):
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGSTOP)
        assert proc.poll() is None, "the export finished before it could be stopped"
        assert sorted(p.name for p in out.iterdir()) == [PARTIAL]
        assert loadable(out) == []
    finally:
        proc.kill()
        proc.wait()
    assert loadable(out) == []  # no config.json either: from_pretrained finds no model
    again = subprocess.run([sys.executable, "-m", "ckpt_browser", "export", str(src), str(out)],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert again.returncode == 2
    assert "interrupted export" in again.stderr and "Traceback" not in again.stderr
