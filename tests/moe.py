"""The 163-shard DeepSeek-V3-shaped checkpoint of benchmarks/make_moe_checkpoint.py, written as
sparse files (real headers, tensor bytes left as holes: about 20 MB on disk) for tests that need
a checkpoint at its real scale. Generated per session under tmp_path, never committed."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "deepseek-v3"


def make_moe(folder: Path) -> Path:
    spec = importlib.util.spec_from_file_location(
        "make_moe_checkpoint", ROOT / "benchmarks" / "make_moe_checkpoint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with contextlib.redirect_stdout(io.StringIO()):
        assert module.main([str(folder)]) == 0
    return folder
