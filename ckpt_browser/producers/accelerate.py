"""accelerate's save_state folders: `checkpoint_N` counts saves (automatic naming), its
examples name them `step_N` or `epoch_N` (`accelerator.py` save_state).

Read by `build_accelerate`: model/optimizer/scheduler .bin files, random_states_*.pkl,
an optional StatefulDataLoader state and the script's own registered objects.
"""

from __future__ import annotations

import re

from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    MISSING,
    OK,
    Found,
    fields,
    from_one_pickle,
    jsonable,
    leaf,
    missing,
    name_list,
    not_needed,
    num,
    read_each,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.rng import add_rng
from ckpt_browser.parts.scaler import scaler_file
from ckpt_browser.parts.scheduler import scheduler_component
from ckpt_browser.producers.base import (
    Detection,
    Producer,
    Seen,
    engine_parts,
    match_roles,
    rx,
    step_name,
)
from ckpt_browser.producers.trainer import TrainerRule, optimizer_sources, weights_sources
from ckpt_browser.standins import Opaque

RULE = TrainerRule(
    "accelerate",
    {
        "weights": rx(r"model(?:_\d+)?\.safetensors", r"pytorch_model(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin"),
        "optimizer": rx(r"optimizer(?:_\d+)?\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin"),
        "scheduler": rx(r"scheduler(?:_\d+)?\.bin"),
        "rng": rx(r"random_states_\d+\.pkl"),
        "data": rx(r"dl_state_dict(?:_\d+)?\.bin", r"sampler(?:_\d+)?\.bin"),
        "progress": rx(r"custom_checkpoint_\d+\.pkl"),
        "scaler": rx(r"scaler\.pt"),
    },
    rx(r"random_states_\d+\.pkl", r"optimizer(?:_\d+)?\.bin", r"scheduler(?:_\d+)?\.bin",
       r"dl_state_dict(?:_\d+)?\.bin", r"custom_checkpoint_\d+\.pkl"),
    re.compile(r"^pytorch_model(?:_\d+)?$"), engine_pointer=False,  # it loads by tag
    pretrained=True)


def _claims(seen: Seen) -> bool:
    """A folder: one of its signature names. One file: any of its names, but a lone
    .safetensors file is plain safetensors."""
    if seen.is_file:
        return not seen.names[0].endswith(".safetensors") and bool(
            match_roles(RULE.roles, seen.names))
    return RULE.signed(seen)


# --- reading its files -----------------------------------------------------------------

DL_KEYS = ("_num_yielded", "_sampler_iter_yielded", "_iterator_finished", "_shared_seed",
           "_steps_since_snapshot", "_index_sampler_state", "_sampler_iter_state")


def build_accelerate(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = engine_parts(det, fs, out)
    out.add(weights_sources(fs, det, ds))
    out.add(optimizer_sources(fs, det, ds))
    sched = [f for f in det.files("scheduler") if "/" not in f]
    if sched:
        out.add(from_one_pickle(fs, "scheduler", sched, scheduler_component))
    elif ds is not None:
        out.add(ds.scheduler(fs))
    else:
        out.add(missing("scheduler", "no scheduler.bin: either the run had no scheduler, or it was "
                        "not passed to accelerator.prepare(); any LR schedule restarts from its "
                        "first step."))
    add_rng(out, fs, det.files("rng"), "no random_states_*.pkl: the resumed run draws different "
            "random numbers (dropout, sampling).",
            when="restored by load_state (a failure there is only logged at info level)")
    out.add(_data(fs, det.files("data")))
    out.add(_progress(fs, det))
    out.add(scaler_file(fs, det.files("scaler")) or (ds.scaler(fs) if ds else not_needed(
        "scaler", "no scaler.pt: accelerate writes one only when an fp16 GradScaler exists, so "
        "none is needed unless the run used fp16.")))
    return out


def _data(fs: StateFiles, files) -> Component:
    if not files:
        return missing("data", "accelerate saved no data-loader position (no dl_state_dict.bin; "
                       "use_stateful_dataloader was off): the data restarts at the epoch start "
                       "unless the script calls skip_first_batches.", {"stored": False})
    pfs, bad = read_each(fs, "data", files, limit=None)
    if bad:
        return bad
    facts: dict = {"stored": True}
    parts = []
    for pf in pfs:
        f = fields(pf.obj)
        if leaf(pf.name).startswith("dl_state_dict"):
            snap = fields(f.get("_snapshot"))
            main = fields(snap.get("_main_snapshot")) if snap else f
            entry = {k: jsonable(main[k], fs.scalars(pf)) for k in DL_KEYS if k in main}
            entry.update({k: jsonable(f[k]) for k in DL_KEYS if k in f and k not in entry})
            entry["keys"] = sorted(str(k) for k in f)
            facts[pf.name] = entry
            n = entry.get("_num_yielded", entry.get("_sampler_iter_yielded"))
            parts.append(f"{pf.name} (StatefulDataLoader, {num(n)} batches yielded)")
        else:
            qual = pf.obj.qualname if isinstance(pf.obj, Opaque) else type(pf.obj).__name__
            facts[pf.name] = {"object": qual, **{str(k): jsonable(v) for k, v in f.items()}}
            parts.append(f"{pf.name} (a pickled {qual.rsplit('.', 1)[-1]})")
    return Component("data", OK, tuple(files), f"data position saved in {', '.join(parts)}.", facts)


def _progress(fs: StateFiles, det: Detection) -> Component:
    facts: dict = {"stored": False}
    if det.step is not None:
        facts["step_from_name"] = det.step
    files = det.files("progress")
    if files:
        pfs, bad = read_each(fs, "progress", files, limit=None)
        if bad:
            return bad
        facts["custom"] = {pf.name: jsonable(pf.obj, fs.scalars(pf)) for pf in pfs}
        shown = [f"{k} {num(v)}" for custom in facts["custom"].values() if isinstance(custom, dict)
                 for k, v in custom.items() if isinstance(v, (int, float))
                 and ("step" in k.lower() or k.lower() in ("epoch", "iteration"))]
        if shown:
            return Component("progress", OK, tuple(files), f"accelerate saves no global step, but "
                             f"{name_list(files)} (registered by your script) holds "
                             f"{', '.join(shown[:4])}.", facts)
        return Component("progress", MISSING, tuple(files), f"accelerate saves no global step, "
                         f"and {name_list(files)} (registered by your script) holds no step "
                         "counter that could be recognised.", facts)
    where = (f"only the folder name ({det.step_source}) says step {det.step}"
             if det.step is not None else "nothing here says which step this was")
    return Component("progress", MISSING, (), f"accelerate saves no global step (the step in "
                     f"random_states_*.pkl counts gradient-accumulation micro-steps); {where}, so "
                     "the script must restore it itself.", facts)


ACCELERATE = Producer(
    "accelerate", _claims, RULE.roles_of,
    (step_name("step_N", r"step_(\d+)"), step_name("epoch_N", r"epoch_(\d+)", "epoch"),
     step_name("checkpoint_N", r"checkpoint_(\d+)", "save")),
    rank_names=re.compile(r"^random_states_(\d+)\.pkl$"),
    rng_file=lambda rank, n: f"random_states_{rank}.pkl",
    build=build_accelerate,
                      nests=("checkpoints",))
