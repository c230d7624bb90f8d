"""Independent readings for the value tests: what torch and safetensors load, and metrics that
torch computes in float64. Nothing here uses ckpt_browser except `locs` (the object under test).

Reference loads: safetensors.torch.load_file; torch.load(weights_only=True) of our own samples
(numpy RNG globals, argparse.Namespace for Megatron's args, stand-ins for DeepSpeed's three
classes); DCP through torch's own dcp_to_torch_save into a temporary folder.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from .helpers import SAMPLES
from .state_helpers import leaves

RUN = SAMPLES / "tiny-llama-run"
CKPT3, CKPT6 = RUN / "checkpoint-3", RUN / "checkpoint-6"
RELEASE = SAMPLES / "tiny-llama-release"
DAMAGED = SAMPLES / "tiny-llama-damaged"
TITAN = SAMPLES / "torchtitan-run" / "checkpoint" / "step-10"
DCP_RANKS = SAMPLES / "dcp-ranks"
RANKS2, RANKS4 = DCP_RANKS / "ranks-2", DCP_RANKS / "ranks-4"

# torch files that weights_only=True refuses and that hold no tensors (a pickled TrainingArguments)
NOT_STATE = ("training_args.bin",)
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl")


# -- the object under test -------------------------------------------------------------------

def locs(path) -> dict:
    """name -> TensorLoc for a checkpoint, as `diff` and `stats` see it."""
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.values.diff import side_of

    return {loc.name: loc for loc in side_of(open_path(str(path))).locs}


def st_loc(path: Path, tensors: dict, name: str = "x"):
    """Write `tensors` with safetensors.torch.save_file and locate `name` in the file."""
    from safetensors.torch import save_file

    save_file(tensors, str(path))
    return locs(path)[name]


# -- reference readings ------------------------------------------------------------------------

class _StandIn:
    """Takes the place of a DeepSpeed class while torch.load(weights_only=True) reads the file;
    the objects are dropped (only tensors are compared)."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


_DEEPSPEED = ("deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
              "deepspeed.runtime.zero.config.ZeroStageEnum",
              "deepspeed.utils.tensor_fragment.fragment_address")


def torch_load(path) -> object:
    """torch.load(weights_only=True) of one of our own samples, with the allowlist it needs."""
    import argparse

    import numpy as np

    core = getattr(np, "_core", None) or np.core
    allow = [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32)),
             argparse.Namespace]
    allow += [(type(n.rsplit(".", 1)[1], (_StandIn,), {}), n) for n in _DEEPSPEED]
    with torch.serialization.safe_globals(allow):
        return torch.load(str(path), weights_only=True, map_location="cpu")


def dcp_tensors(folder) -> dict[str, torch.Tensor]:
    """DCP key -> tensor, as torch's own dcp_to_torch_save converts the folder."""
    import warnings

    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory(prefix="ckpt-dcp-ref-") as tmp:
        dst = os.path.join(tmp, "converted.pt")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp_to_torch_save(str(folder), dst)
        return dict(leaves(torch.load(dst, weights_only=True)))


def reference(root: Path) -> dict[tuple[str, str], torch.Tensor]:
    """(file relative to root, tensor name) -> tensor, for every tensor-holding file under root
    (or the one file `root`). A DCP tensor's file is its folder's .metadata, as in TensorLoc."""
    from safetensors.torch import load_file

    root = Path(root)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    base = root.parent if root.is_file() else root
    out: dict[tuple[str, str], torch.Tensor] = {}
    for p in files:
        rel = p.relative_to(base).as_posix()
        if p.suffix == ".safetensors":
            found = load_file(str(p))
        elif p.name == ".metadata":
            found = dcp_tensors(p.parent)
        elif p.suffix in TORCH_SUFFIXES and p.name not in NOT_STATE:
            found = dict(leaves(torch_load(p)))
        else:
            continue
        out.update({(rel, k): v for k, v in found.items()})
    return out


def raw(t: torch.Tensor) -> bytes:
    """The tensor's elements as bytes in row-major order (NaN payloads included)."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


# read_all gives values in a numpy dtype that holds them: BF16 and FP8 as float32, complex32 as
# complex64 (exact conversions); blocks keep the stored bytes in a container of the same size
NATURAL = {torch.bfloat16: torch.float32, torch.float8_e4m3fn: torch.float32,
           torch.float8_e5m2: torch.float32, torch.float8_e4m3fnuz: torch.float32,
           torch.float8_e5m2fnuz: torch.float32, torch.float8_e8m0fnu: torch.float32,
           torch.complex32: torch.complex64}


def assert_same_tensor(got, want: torch.Tensor, what: str = "") -> None:
    """`got` from read_all (numpy) equals torch's `want`: the same values bit for bit, except
    that NaN payloads may differ where a format (FP8) converts NaN to float32."""
    if isinstance(got, np.ndarray):
        want = want.to(NATURAL.get(want.dtype, want.dtype))
        got = torch.from_numpy(got.copy())  # ascontiguousarray would make 0-d arrays 1-d
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: {list(got.shape)} != " \
        f"{list(want.shape)}"
    g, w = got.reshape(-1), want.reshape(-1)
    if got.is_floating_point() or got.is_complex():
        gn, wn = torch.isnan(g), torch.isnan(w)
        assert torch.equal(gn, wn), f"{what}: NaN in other places"
        g, w = g[~gn], w[~wn]
    assert raw(g) == raw(w), f"{what}: values differ"


def assert_same_blocks(blocks, want: torch.Tensor, what: str = "") -> None:
    """Blocks from iter_blocks hold exactly the stored bytes of `want`, in row-major order."""
    for b in blocks:
        assert b.ndim == 1 and b.itemsize == want.element_size(), what
    assert sum(b.size for b in blocks) == want.numel(), what
    assert b"".join(b.tobytes() for b in blocks) == raw(want), f"{what}: bytes differ"


# -- metrics computed by torch -----------------------------------------------------------------

WIDE = (torch.float64, torch.int64, torch.int32, torch.uint64, torch.uint32)


def torch_metrics(a: torch.Tensor, b: torch.Tensor) -> dict:
    """max/mean |a-b|, ||a-b||/||a|| and a.b/(|a||b|) in float64, over the elements finite on
    both sides, after the float32 cast compare applies to narrow dtypes (exact for them)."""
    cast = torch.float64 if a.dtype in WIDE or b.dtype in WIDE else torch.float32
    x = a.to(cast).double().reshape(-1)
    y = b.to(cast).double().reshape(-1)
    both = torch.isfinite(x) & torch.isfinite(y)
    x, y = x[both], y[both]
    d = x - y
    na, nb = x.norm().item(), y.norm().item()
    return {"max_abs_diff": d.abs().max().item() if d.numel() else None,
            "mean_abs_diff": d.abs().mean().item() if d.numel() else None,
            "rel_l2": d.norm().item() / na if na else None,
            "cosine": torch.dot(x, y).item() / (na * nb) if na and nb else None,
            "nonfinite_mismatch": int((~(torch.isfinite(a.double()) & torch.isfinite(b.double()))
                                       & ~((a.double() == b.double())
                                           | (a.double().isnan() & b.double().isnan()))).sum())}


def close(got, want, rel: float, absolute: float = 0.0) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(got, want, rel_tol=rel, abs_tol=absolute)


def assert_metrics(v, a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> None:
    """A ValueDiff (or a JSON row) against torch_metrics. `rel` covers float32 accumulation."""
    want = torch_metrics(a, b)
    get = (lambda k: v[k]) if isinstance(v, dict) else (lambda k: getattr(v, k))
    for k in ("max_abs_diff", "mean_abs_diff", "rel_l2"):
        assert close(get(k), want[k], rel, 1e-12), f"{k}: {get(k)} != torch {want[k]}"
    assert close(get("cosine"), want["cosine"], rel, 1e-6), f"cosine: {get('cosine')} != " \
        f"torch {want['cosine']}"


# -- histogram check ---------------------------------------------------------------------------

def assert_histogram(hist: list[int], hist_range, finite: torch.Tensor) -> None:
    """hist counts every finite value once and equals torch.histc over the reported range and
    bin count. A value within float rounding of a bin edge (1e-9 of the range) may fall on
    either side of it; any other value must be in exactly the bin histc puts it in."""
    values = finite.double().reshape(-1)
    assert sum(hist) == values.numel()
    if not values.numel():
        assert hist == [] and hist_range is None
        return
    lo, hi = hist_range
    k = len(hist)
    assert 1 <= k <= 32
    assert lo <= values.min().item() and values.max().item() <= hi
    want = torch.histc(values, bins=k, min=lo, max=hi).long().tolist()
    if want == hist:
        return
    width = (hi - lo) / k
    pos = (values - lo) / width
    near = (pos - pos.round()).abs() * width <= 1e-9 * (hi - lo)
    clear = values[~near]
    clear_hist = torch.histc(clear, bins=k, min=lo, max=hi).long().tolist() if clear.numel() \
        else [0] * k
    moved = sum(abs(h - w) for h, w in zip(hist, want))
    assert moved <= 2 * int(near.sum()), f"{hist} != torch.histc {want}"
    assert all(h >= c for h, c in zip(hist, clear_hist)), f"{hist} misses values histc bins " \
        f"as {clear_hist}"


# -- the DCP pair written by 2 and 4 gloo ranks --------------------------------------------------

_DCP_READY = False


def wait_for_dcp_ranks(timeout: float = 20 * 60) -> None:
    """sample_checkpoints/dcp-ranks is written by make_training_samples.py; DCP writes .metadata
    last, so both folders are complete once both have it and their files stop changing."""
    global _DCP_READY
    if _DCP_READY:
        return
    deadline = time.monotonic() + timeout
    last = None
    while True:
        ready = all((d / ".metadata").is_file() for d in (RANKS2, RANKS4))
        if ready:
            now = sorted((str(p), p.stat().st_size) for d in (RANKS2, RANKS4)
                         for p in d.iterdir())
            if now == last:
                _DCP_READY = True
                return
            last = now
        if time.monotonic() > deadline:
            raise AssertionError(f"{DCP_RANKS} was not complete after {timeout:.0f} s")
        time.sleep(1.0 if ready else 10.0)


# -- CLI output --------------------------------------------------------------------------------

def strict_json(text: str) -> dict:
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    def refuse(token):
        raise AssertionError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def one_line(err: str, *words: str) -> None:
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, f"stderr is not one line: {err!r}"
    for w in words:
        assert w in err, (w, err)
