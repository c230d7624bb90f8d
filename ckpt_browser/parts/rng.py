"""RNG state saved per rank (HF rng_state*.pth, accelerate random_states_*.pkl)."""

from __future__ import annotations

import re

from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    INCOMPLETE,
    OK,
    Found,
    fields,
    jsonable,
    missing,
    read_each,
)
from ckpt_browser.parts.files import StateFiles

# RNG key, as training frameworks name them -> the generator it restores (FORMATS.md)
RNG_NAMES = {
    "python": "python", "numpy": "numpy", "cpu": "cpu", "cuda": "cuda", "xla": "xla", "npu": "npu",
    "hpu": "hpu", "mlu": "mlu", "musa": "musa", "xpu": "xpu", "mps": "mps",
    "random_state": "python", "numpy_random_seed": "numpy", "torch_manual_seed": "cpu",
    "torch_cuda_manual_seed": "cuda", "torch_xpu_manual_seed": "xpu",
    "torch_mlu_manual_seed": "mlu", "torch_sdaa_manual_seed": "sdaa",
    "torch_musa_manual_seed": "musa", "torch_hpu_manual_seed": "hpu",
    "torch_neuron_manual_seed": "neuron", "xm_seed": "xla",
    "random_rng_state": "python", "np_rng_state": "numpy", "torch_rng_state": "cpu",
    "cuda_rng_state": "cuda", "rng_tracker_states": "cuda-tracker",
}
RANK_IN_NAME = re.compile(r"_(\d+)\.(?:pth|pkl)$")


def rank_of(name: str) -> int:
    m = RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else 0


MAX_MISSING = 1_000  # missing ranks listed in the facts; the rest are counted


def gaps(ranks, world: int | None = None) -> tuple[list[int], int]:
    """The ranks with no file below the highest one found (or below `world`): the first
    MAX_MISSING of them, and how many in all. Counted, never enumerated: a file named
    rng_state_999999.pth, or a world size of 10**30 in a pickle, names that many ranks."""
    have = sorted(set(ranks))
    top = max(have[-1] + 1 if have else 0, world or 0)
    listed: list[int] = []
    below = -1
    for r in [*have, top]:
        listed.extend(range(below + 1, min(r, below + 1 + MAX_MISSING - len(listed))))
        below = r
    return listed, top - len(have)


def said_ranks(listed: list[int], count: int, shown: int = 8) -> str:
    """'rank 3', 'ranks 1, 2, 5' or 'ranks 1, 2, 3 ... and 999,995 more'."""
    head = ", ".join(map(str, listed[:shown]))
    more = f" and {count - min(shown, len(listed)):,} more" if count > min(shown, len(listed)) \
        else ""
    return f"rank{'s' if count > 1 else ''} {head}{more}"


def generators(state, skip: str | None = None) -> list[str]:
    """The generators an RNG dict restores, by their common names."""
    return sorted({RNG_NAMES.get(str(k), str(k)) for k in fields(state) if str(k) != skip})


def add_rng(out: Found, fs: StateFiles, files, absent: str, **how) -> None:
    """The per-rank RNG files, or `absent` saying why their lack matters; sets out.ranks."""
    if not files:
        out.add(missing("rng", absent))
        return
    rng, out.ranks = rng_component(fs, files, **how)
    out.add(rng)


def rng_component(fs: StateFiles, files, required=("python", "numpy", "cpu"),
                  expected: int | None = None,
                  when: str = "restored right after the data skip on resume; with a different "
                  "number of processes the Trainer silently skips that restore"
                  ) -> tuple[Component, int | None]:
    files = tuple(files)
    pfs, bad = read_each(fs, "rng", files)
    if bad:
        return bad, len(files) or None
    per_rank: dict[str, list[str]] = {}
    micro: dict[str, object] = {}
    for pf in pfs:
        f = fields(pf.obj)
        r = str(rank_of(pf.name))
        per_rank[r] = generators(f, skip="step")
        if "step" in f:
            micro[r] = jsonable(f["step"], fs.scalars(pf))
    lost, count = gaps([rank_of(f) for f in files], expected)
    facts: dict = {"ranks": per_rank}
    if micro:
        facts["micro_step"] = micro
    if lost:
        facts["missing_ranks"] = lost
        if count > len(lost):
            facts["missing_rank_count"] = count
        return Component("rng", INCOMPLETE, files,
                         f"RNG state for {said_ranks(lost, count)} is missing: those ranks "
                         "restart their random streams, so dropout and shuffling differ from an "
                         "uninterrupted run.", facts), len(files) + count
    short = {r: [k for k in required if k not in keys] for r, keys in per_rank.items()}
    short = {r: ks for r, ks in short.items() if ks}
    if short:
        facts["missing_generators"] = short
        r, ks = next(iter(short.items()))
        return Component("rng", INCOMPLETE, files,
                         f"rank {r}'s RNG file lacks the {', '.join(ks)} generator state, so "
                         "those streams restart on resume.", facts), len(files)
    n = len(files)
    gens = sorted({g for keys in per_rank.values() for g in keys})
    return Component("rng", OK, files,
                     f"RNG state for {n} rank{'s' if n != 1 else ''} ({', '.join(gens)}), "
                     f"{when}.", facts), n
