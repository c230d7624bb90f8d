"""Rank completeness: one finding per missing rank-indexed file, named as the producer names it
(`rng_state_2.pth`, `random_states_2.pkl`; a producer's own per-rank files, such as optimizer
shards, by its rank_checks).

The ranks come from `training_state` (facts["missing_ranks"]: gaps in the numbering, or ranks
below the producer's own record of its world size)."""

from __future__ import annotations

import re

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import WARNING
from ckpt_browser.producers import PRODUCERS
from ckpt_browser.producers.base import missing_ranks

_RANK_SUFFIX = re.compile(r"^(?P<stem>.*?)(?:_(?P<rank>\d+))?(?P<ext>\.[A-Za-z0-9]+)$")


def rank_file(files, rank: int) -> str:
    """The name a rank's file would have, following the files that exist."""
    first = files[0] if files else "rng_state_0.pth"
    folder, _, leaf = first.rpartition("/")
    m = _RANK_SUFFIX.match(leaf)
    name = f"{m.group('stem')}_{rank}{m.group('ext')}" if m else f"{leaf}_{rank}"
    return f"{folder}/{name}" if folder else name


def check_ranks(draft: Draft) -> None:
    rng = draft.components["rng"]
    ranks, more = missing_ranks(rng.facts, "rng", WARNING, "RNG files")
    draft.extend(more)
    for r in ranks:
        name = rank_file(rng.files, r)
        draft.add(WARNING, "rng", name, f"{name} is missing: rank {r} will start from a fresh "
                  "RNG, so data order and dropout diverge from the original run; the resume will "
                  "not be bit-exact.")
    for producer in PRODUCERS:
        if producer.rank_checks:
            draft.extend(producer.rank_checks(draft.components))
