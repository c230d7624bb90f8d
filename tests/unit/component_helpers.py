"""Hand-built checkpoint folders (empty files with the right names) and independent readings
of the real samples with torch (weights_only=True, our own samples only)."""

from __future__ import annotations

import json
from pathlib import Path

from .helpers import SAMPLES

TORCHTITAN = SAMPLES / "torchtitan-run"
TITAN_STEP = TORCHTITAN / "checkpoint" / "step-10"
LIGHTNING = SAMPLES / "lightning"
ACCELERATE = SAMPLES / "accelerate-state" / "step_4"
DEEPSPEED = SAMPLES / "deepspeed-run"
MEGATRON = SAMPLES / "megatron-run"
HF_MULTIRANK = SAMPLES / "hf-multirank" / "checkpoint-4"
HF_RUN3 = SAMPLES / "hf-run3"
MALICIOUS = SAMPLES / "malicious"
SENTINEL = "ckpt-browser-PWNED"


def tree(root: Path, spec: dict) -> Path:
    """spec: name -> None (empty file), str (file text) or dict (a subfolder)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in spec.items():
        path = root / name
        if isinstance(value, dict):
            tree(path, value)
        else:
            path.write_text(value or "")
    return root


def dcp(*ranks: int) -> dict:
    """A finished DCP folder: .metadata plus one data file per rank."""
    return {".metadata": None, **{f"__{r}_0.distcp": None for r in ranks}}


def safe_load(path: Path):
    """torch.load(weights_only=True) with the numpy RNG globals allowed, as the HF Trainer does
    (FORMATS.md "HF Trainer")."""
    return safe_load_with(path, [])


def safe_load_with(path: Path, extra: list):
    """Our own samples only: weights_only=True plus the numpy globals and `extra` classes."""
    import numpy as np
    import torch

    allowed = [np._core.multiarray._reconstruct, np.ndarray, np.dtype,
               type(np.dtype(np.uint32)), *extra]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, weights_only=True, map_location="cpu")


def expected_optimizer(sd: dict) -> dict:
    """The facts components.py should report, computed from a real torch state_dict."""
    import torch

    groups = []
    for g in sd["param_groups"]:
        hp = {}
        for k, v in g.items():
            if k == "params":
                continue
            hp[k] = list(v) if isinstance(v, tuple) else v
        hp["params"] = len(g["params"])
        groups.append(hp)
    state = sd["state"]
    steps = sorted({float(s["step"]) if isinstance(s["step"], torch.Tensor) else s["step"]
                    for s in state.values() if "step" in s})
    keys = sorted({k for s in state.values() for k in s})
    shapes = {str(k): list(s["exp_avg"].shape) for k, s in state.items() if "exp_avg" in s}
    return {"groups": groups, "params_with_state": len(state), "state_keys": keys,
            "step": steps, "shapes": shapes}


def trainer_state(folder: Path) -> dict:
    return json.loads((folder / "trainer_state.json").read_text())
