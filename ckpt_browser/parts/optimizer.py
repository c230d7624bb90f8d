"""Optimizer state, from torch pickles (a state_dict inside any wrapper) or from DCP keys."""

from __future__ import annotations

from collections.abc import Callable

from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    DAMAGED,
    OK,
    count_tensors,
    dcp_status,
    fields,
    find_optimizer,
    jsonable,
    missing,
    num,
    read_each,
    set_key,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.signatures import MOMENTS
from ckpt_browser.standins import TensorRef

MAX_SHAPES = 10_000  # exp_avg shapes listed per optimizer


def optimizer_facts(sd: dict, scalar: Callable) -> dict:
    groups = []
    groups_in = sd.get("param_groups") or fields(sd.get("hypers")).get("items") or []
    for g in groups_in if isinstance(groups_in, (list, tuple)) else []:
        g = fields(g)
        params = g.get("params")
        hp = {str(k): jsonable(v, scalar) for k, v in g.items() if k != "params"}
        hp["params"] = len(params) if isinstance(params, (list, tuple)) else 0
        groups.append(hp)
    state = sd.get("state")
    if isinstance(state, (list, tuple)):  # fastai: one dict per parameter, in order
        state = {i: st for i, st in enumerate(state) if fields(st)}
    elif not isinstance(state, dict):
        state = {}
    keys: set[str] = set()
    steps: set = set()
    dtypes: set[str] = set()
    shapes: dict[str, list[int]] = {}
    for pid, st in state.items():
        st = fields(st)
        keys.update(str(k) for k in st)
        if "step" in st:
            v = jsonable(st["step"], scalar)
            steps.add(set_key(v))
        avg = st.get("exp_avg", st.get("grad_avg"))
        if isinstance(avg, TensorRef):
            dtypes.add(avg.dtype)
            if len(shapes) < MAX_SHAPES:
                shapes[str(pid)] = list(avg.shape)
    if groups and not any(g["params"] for g in groups):  # fastai's hypers name no params
        groups[0]["params"] = len(sd["state"]) if isinstance(sd.get("state"), list) else 0
    return {"param_groups": groups, "params": sum(g["params"] for g in groups),
            "params_with_state": len(state), "state_keys": sorted(keys),
            "step": sorted(steps, key=lambda v: (isinstance(v, str), v)),
            "exp_avg": {"dtypes": sorted(dtypes), "shapes": shapes},
            "tensors": count_tensors(state)}


def optimizer_sentence(facts: dict, where: str) -> str:
    groups = facts["param_groups"]
    lrs = sorted({num(g.get("lr")) for g in groups if "lr" in g})
    step = facts["step"]
    text = (f"{where} holds optimizer state for {facts['params_with_state']} of "
            f"{facts['params']} parameters in {len(groups)} param group"
            f"{'s' if len(groups) != 1 else ''}")
    if facts["state_keys"]:
        text += f" ({', '.join(facts['state_keys'])})"
    if step:
        text += f", at optimizer step {num(step[0]) if len(step) == 1 else num(step)}"
    if lrs:
        text += f", lr {', '.join(lrs)}"
    if not facts["params_with_state"]:
        text += "; it is empty, as after zero steps, so the moments start from zero on resume"
    return text + "."


def optimizer_ok(fs: StateFiles, pf, sd: dict, names, where: str, **extra) -> Component:
    """An optimizer state_dict found in `pf` (one of the files `names`), described; `extra`
    facts may include "files", their count."""
    facts = optimizer_facts(sd, fs.scalars(pf))
    facts.update(extra)
    return Component("optimizer", OK, tuple(names), optimizer_sentence(facts, where), facts)


def optimizer_from_pickles(fs: StateFiles, files, what: str = "") -> Component:
    files = tuple(files)
    pfs, bad = read_each(fs, "optimizer", files)
    if bad:
        return bad
    sd = None
    for pf in pfs:
        sd = find_optimizer(pf.obj)
        if sd is not None:
            break
    if sd is None:
        keys = sorted(str(k) for k in fields(pfs[0].obj))[:20]
        return Component("optimizer", DAMAGED, files,
                         f"{files[0]} holds no optimizer state_dict (no 'state' and "
                         f"'param_groups'); its keys are {', '.join(keys) or 'none'}.",
                         {"keys": keys})
    extra = {"files": len(files)} if len(files) > 1 else {}
    return optimizer_ok(fs, pf, sd, files, what or files[0], **extra)


def optimizer_from_dcp(fs: StateFiles, files, rel: str, prefix: str = "optimizer.") -> Component:
    d = fs.dcp(rel)
    bad = dcp_status("optimizer", files, d)
    if bad:
        return bad
    state: dict[str, dict[str, object]] = {}
    group_keys: set[str] = set()
    tensors = 0
    for key, e in d.entries.items():
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix):]
        if rest.startswith("state."):
            head, _, tail = rest[len("state."):].partition(".")
            if head in MOMENTS and tail:  # sharded by moment: state.exp_avg.<param>
                fqn, leaf = tail, head
            else:  # torch: state.<param>.exp_avg
                fqn, _, leaf = rest[len("state."):].rpartition(".")
            state.setdefault(fqn, {})[leaf] = e
            tensors += e.kind == "tensor"
        elif rest.startswith("param_groups."):
            group_keys.add(rest.rpartition(".")[2])
    if not state and not group_keys:
        return missing("optimizer", f"the DCP checkpoint in {rel or '.'} has no {prefix}* keys: "
                       "no optimizer state was saved, so the moments start from zero on resume.")
    keys = sorted({k for st in state.values() for k in st})
    dtypes = sorted({st["exp_avg"].dtype for st in state.values()
                     if "exp_avg" in st and st["exp_avg"].dtype})
    shapes = {fqn: list(st["exp_avg"].shape) for fqn, st in list(state.items())[:MAX_SHAPES]
              if "exp_avg" in st and st["exp_avg"].shape is not None}
    facts = {"params_with_state": len(state), "state_keys": keys,
             "param_group_keys": sorted(group_keys - {"params"}),
             "exp_avg": {"dtypes": dtypes, "shapes": shapes}, "tensors": tensors,
             "dcp": rel or "."}
    return Component("optimizer", OK, tuple(files),
                     f"DCP holds optimizer state for {len(state)} parameters "
                     f"({', '.join(keys)}), reshardable to another number of ranks.", facts)
