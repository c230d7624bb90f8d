"""LR scheduler state: a small dict of counters and schedule settings, any framework."""

from __future__ import annotations

from collections.abc import Callable

from ckpt_browser.model import Component
from ckpt_browser.parts.common import OK, fields, jsonable, missing, num
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.standins import PickleFile

SCHEDULER_KEYS = ("last_epoch", "last_batch_iteration", "last_step", "_global_step", "_step_count",
                  "base_lrs", "_last_lr", "base_values", "_last_value",
                  "max_lr", "min_lr", "lr_warmup_steps", "num_steps", "lr_decay_steps",
                  "lr_decay_style", "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps")


def scheduler_facts(sd, scalar: Callable) -> dict:
    f = fields(sd)
    facts = {str(k): jsonable(v, scalar) for k, v in f.items() if k != "lr_lambdas"}
    if "lr_lambdas" in f:
        facts["lr_lambdas"] = len(f["lr_lambdas"]) if isinstance(f["lr_lambdas"], list) else 0
    return facts


def scheduler_sentence(facts: dict, where: str) -> str:
    parts = [f"{k} {num(facts[k])}" for k in SCHEDULER_KEYS if k in facts][:4]
    return f"{where} holds the LR schedule position ({'; '.join(parts) or 'no known keys'})."


def scheduler_component(fs: StateFiles, pf: PickleFile, sd, files, where: str) -> Component:
    if sd is None or not fields(sd):
        return missing("scheduler", f"{where} holds no LR scheduler state: the schedule restarts "
                       "from its first step (warmup again) unless the script restores it.")
    facts = scheduler_facts(sd, fs.scalars(pf))
    return Component("scheduler", OK, tuple(files), scheduler_sentence(facts, where), facts)
