"""`--world-size N`: can the run resume on N ranks? (FORMATS.md "Resume verdict")

Per-rank RNG files map only to the same ranks, and DCP tensors reshard; every other rule is
a producer's own (`Producer.world_checks`: how its resume splits the data, its optimizer
shards, its parallel degrees).
"""

from __future__ import annotations

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import ERROR, INFO, WARNING, TrainingState
from ckpt_browser.parts.common import leaf
from ckpt_browser.producers import BY_ID, PRODUCERS
from ckpt_browser.producers.base import NOT_EXACT
from ckpt_browser.standins import DcpCheckpoint


def check_world_size(draft: Draft, ts: TrainingState, n: int) -> None:
    before = len(draft.findings)
    saved = ts.ranks
    _rng_files(draft, ts, n)
    for producer in PRODUCERS:
        if producer.world_checks:
            draft.extend(producer.world_checks(ts, draft.components, n))
    _dcp(draft, ts, n)
    added = draft.findings[before:]
    if saved is None:
        if not added:
            draft.add(INFO, "data", None, f"this checkpoint does not record how many ranks wrote "
                      f"it and holds nothing per rank, so it loads on {n}; if that differs from "
                      "the original run, batches are split differently and " + NOT_EXACT + ".")
    elif saved != n and not any(f.severity in (ERROR, WARNING) for f in added):
        draft.add(WARNING, "data", None, f"saved by {saved} rank{'s' if saved != 1 else ''}, "
                  f"resumed on {n}: batches are split differently across ranks, so the run "
                  f"continues but {NOT_EXACT}.")


def _ranks(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


def _rng_files(draft: Draft, ts: TrainingState, n: int) -> None:
    """One RNG file per process, named by the producer (HF `rng_state[_r].pth`, accelerate
    `random_states_r.pkl`)."""
    rng = draft.components["rng"]
    producer = BY_ID.get(ts.framework)
    rng_file = producer.rng_file if producer else None
    if rng_file is None or not rng.files:
        return
    have = {leaf(f) for f in rng.files}
    wanted = {r: rng_file(r, n) for r in range(n)}
    fresh = [r for r, name in wanted.items() if name not in have]
    unread = sorted(have - set(wanted.values()))
    if not fresh and not unread:
        return
    parts = []
    if fresh:
        names = [wanted[r] for r in fresh]
        shown = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}"
        one = len(fresh) == 1
        parts.append(f"on {n} rank{'s' if n != 1 else ''}, {_ranks(fresh)} find{'s' if one else ''}"
                     f" no {shown} and start{'s' if one else ''} from a fresh RNG (the framework "
                     "only logs it at info level)")
    if unread:
        parts.append(f"{', '.join(unread[:4])}{' ...' if len(unread) > 4 else ''} "
                     f"{'is' if len(unread) == 1 else 'are'} not read")
    draft.add(WARNING, "rng", None, f"the RNG files were written by {len(have)} process"
              f"{'es' if len(have) != 1 else ''}: {'; '.join(parts)}; data order and dropout "
              f"diverge from the original run, so {NOT_EXACT}.")


def _dcp(draft: Draft, ts: TrainingState, n: int) -> None:
    folders = [d for d in ts.files if isinstance(d, DcpCheckpoint) and d.entries]
    if not folders or ts.ranks == n:
        return
    kinds = [k for k in ("weights", "optimizer") if any(
        f.endswith((".metadata", ".distcp")) for f in draft.components[k].files)]
    what = " and ".join({"weights": "model", "optimizer": "optimizer"}[k] for k in kinds) or "the"
    draft.add(INFO, kinds[0] if kinds else "weights", None, f"{what} tensors in DCP are "
              f"resharded on load, so {n} rank{'s' if n != 1 else ''} can read them.")
