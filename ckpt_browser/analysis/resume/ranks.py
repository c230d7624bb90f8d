"""Rank completeness: one finding per missing rank-indexed file, named as the framework names it
(`rng_state_2.pth`, `random_states_2.pkl`, `zero_pp_rank_1_mp_rank_00_optim_states.pt`).

The ranks come from `training_state` (facts["missing_ranks"]: gaps in the numbering, or ranks
below the framework's own record of its world size)."""

from __future__ import annotations

import re

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import ERROR, WARNING

MAX_LISTED = 8
_RANK_SUFFIX = re.compile(r"^(?P<stem>.*?)(?:_(?P<rank>\d+))?(?P<ext>\.[A-Za-z0-9]+)$")
_ZERO_RANK = re.compile(r"zero_pp_rank_\d+_")


def rank_file(files, rank: int, zero: bool = False) -> str:
    """The name a rank's file would have, following the files that exist."""
    first = files[0] if files else ("zero_pp_rank_0_mp_rank_00_optim_states.pt" if zero
                                    else "rng_state_0.pth")
    if zero:
        return _ZERO_RANK.sub(f"zero_pp_rank_{rank}_", first, count=1)
    folder, _, leaf = first.rpartition("/")
    m = _RANK_SUFFIX.match(leaf)
    name = f"{m.group('stem')}_{rank}{m.group('ext')}" if m else f"{leaf}_{rank}"
    return f"{folder}/{name}" if folder else name


def check_ranks(draft: Draft) -> None:
    rng = draft.components["rng"]
    for r in _listed(draft, rng.facts, "rng", WARNING, "RNG files"):
        name = rank_file(rng.files, r)
        draft.add(WARNING, "rng", name, f"{name} is missing: rank {r} will start from a fresh "
                  "RNG, so data order and dropout diverge from the original run; the resume will "
                  "not be bit-exact.")
    opt = draft.components["optimizer"]
    if "dp_ranks" in opt.facts:  # DeepSpeed ZeRO: one optimizer shard per data-parallel rank
        for r in _listed(draft, opt.facts, "optimizer", ERROR, "ZeRO optimizer shards"):
            name = rank_file(opt.files, r, zero=True)
            draft.add(ERROR, "optimizer", name, f"{name} is missing: DeepSpeed needs the "
                      f"optimizer shard of every data-parallel rank (rank {r} here) and cannot "
                      "load the optimizer state without it, so only a warm start from the weights "
                      "is possible; copy the shard again or resume from an earlier checkpoint.")


def _listed(draft: Draft, facts: dict, kind: str, severity: str, what: str) -> list[int]:
    """The first missing ranks, one finding each; a count for the rest (the facts list the
    first ones and count them all when there are more)."""
    ranks = list(facts.get("missing_ranks") or ())
    count = facts.get("missing_rank_count", len(ranks))
    if count > MAX_LISTED:
        upto = f" to {ranks[-1]}" if count == len(ranks) else " on"
        draft.add(severity, kind, None, f"{count - MAX_LISTED:,} more {what} are missing "
                  f"(ranks {ranks[MAX_LISTED]}{upto}).")
    return ranks[:MAX_LISTED]
