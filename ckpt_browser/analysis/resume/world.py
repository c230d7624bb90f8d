"""`--world-size N`: can the run resume on N ranks? (FORMATS.md "Resume verdict")

Per-rank RNG files map only to the same ranks; the HF Trainer's data position is derived from
the step and the number of processes; DeepSpeed ZeRO shards need a universal conversion for
another data-parallel size; legacy Megatron needs the same tensor/pipeline degrees; DCP tensors
reshard, but torchtitan's data-loader state refuses another data-parallel size.
"""

from __future__ import annotations

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import ERROR, INFO, WARNING, TrainingState
from ckpt_browser.parts.common import as_int, leaf
from ckpt_browser.producers import BY_ID
from ckpt_browser.standins import DcpCheckpoint

NOT_EXACT = "the resume will not be bit-exact"


def check_world_size(draft: Draft, ts: TrainingState, n: int) -> None:
    before = len(draft.findings)
    saved = ts.ranks
    _rng_files(draft, ts, n)
    _hf_data(draft, ts, n)
    _deepspeed(draft, n)
    _megatron(draft, n)
    _titan_data(draft, ts, n)
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


def _hf_data(draft: Draft, ts: TrainingState, n: int) -> None:
    data = draft.components["data"]
    if ts.framework != "hf-trainer" or data.status != "ok" or data.facts.get("stored"):
        return
    saved = ts.ranks
    if saved is None or saved == n:
        return
    step = data.facts.get("global_step")
    draft.add(WARNING, "data", None, f"the Trainer derives the data position from global step "
              f"{step} and the number of processes: with {n} instead of {saved}, each step "
              "covers a different share of the data, so the batches it skips and those it trains "
              f"on next differ from the original run; {NOT_EXACT}.")


def _deepspeed(draft: Draft, n: int) -> None:
    opt, progress = draft.components["optimizer"], draft.components["progress"]
    if opt.facts.get("universal"):
        draft.add(INFO, "optimizer", opt.files[0] if opt.files else None, "a universal "
                  f"checkpoint: DeepSpeed reshards its optimizer state to {n} ranks with "
                  "load_universal=true.")
        return
    dp = as_int(opt.facts.get("dp_ranks"))
    if not dp:
        return
    mp = as_int(progress.facts.get("mp_world_size")) or 1
    target = n // mp if n % mp == 0 else None
    if target == dp:
        return
    tag = opt.files[0].split("/")[0] if opt.files and "/" in opt.files[0] else "<tag>"
    where = f"{target} data-parallel rank{'s' if target != 1 else ''}" if target else \
        f"{n} ranks (not a multiple of the model-parallel size {mp})"
    draft.add(ERROR, "optimizer", opt.files[0] if opt.files else None,
              f"the ZeRO optimizer state is split into {dp} shards, one per data-parallel rank; "
              f"DeepSpeed refuses to load it on {where} (\"The checkpoint being loaded used a DP "
              f"world size of {dp} but the current world size is {target or n}\"). Convert it "
              f"first: python deepspeed/checkpoint/ds_to_universal.py --input_folder "
              f"<save_dir>/{tag} --output_folder <save_dir>/{tag}_universal, then load with "
              "\"checkpoint\": {\"load_universal\": true}; without that only the weights load "
              "(load_module_only), a warm start.")


def _megatron(draft: Draft, n: int) -> None:
    progress, data = draft.components["progress"], draft.components["data"]
    par = progress.facts.get("parallel")
    if not isinstance(par, dict) or "world_size" not in par:
        return
    tp = as_int(par.get("tensor_model_parallel_size")) or 1
    pp = as_int(par.get("pipeline_model_parallel_size")) or 1
    saved = as_int(par.get("world_size"))
    mp = tp * pp
    if n % mp:
        draft.add(ERROR, "optimizer", None, f"{n} ranks cannot keep tensor-parallel {tp} x "
                  f"pipeline-parallel {pp}, and this legacy checkpoint is split into {mp} "
                  "model-parallel part(s) that Megatron loads only with the same degrees: "
                  "tools/checkpoint/convert.py reshards the weights but not the optimizer, so "
                  "that is a warm start.")
        return
    if n == saved:
        return
    dp_old, dp_new = (saved or mp) // mp, n // mp
    if any(leaf(f) == "distrib_optim.pt" for f in draft.components["optimizer"].files):
        draft.add(ERROR, "optimizer", None, f"distrib_optim.pt shards the optimizer over "
                  f"{dp_old} data-parallel ranks; legacy Megatron loads it only on the same "
                  f"data-parallel size, not {dp_new}: resume with --no-load-optim, a warm start.")
    draft.add(WARNING, "data", None, f"the data-parallel size changes from {dp_old} to {dp_new}: "
              "consumed_train_samples carries the data position over, but each rank's batches "
              f"and random streams change, so {NOT_EXACT}.")
    gbs, mbs = as_int(data.facts.get("global_batch_size")), as_int(data.facts.get(
        "micro_batch_size"))
    if gbs and mbs and gbs % (mbs * dp_new):
        draft.add(WARNING, "data", None, f"global_batch_size {gbs} is not a multiple of "
                  f"micro_batch_size {mbs} x {dp_new} data-parallel ranks: Megatron refuses to "
                  "start until the batch sizes change, and changing them changes the run.")


def _titan_data(draft: Draft, ts: TrainingState, n: int) -> None:
    data = draft.components["data"]
    world = as_int(data.facts.get("world_size"))
    if ts.framework != "torchtitan" or not world or world == n:
        return
    draft.add(WARNING, "data", None, f"dataloader.dp_world_size is {world}: torchtitan refuses "
              f"to load the data-loader state on another data-parallel size ({n} if every rank "
              "is data-parallel). Add \"dataloader\" to checkpoint.exclude_from_loading to "
              f"resume; the data then restarts from the beginning, so {NOT_EXACT}.")


def _dcp(draft: Draft, ts: TrainingState, n: int) -> None:
    folders = [d for d in ts.files if isinstance(d, DcpCheckpoint) and d.entries]
    if not folders or ts.ranks == n:
        return
    kinds = [k for k in ("weights", "optimizer") if any(
        f.endswith((".metadata", ".distcp")) for f in draft.components[k].files)]
    what = " and ".join({"weights": "model", "optimizer": "optimizer"}[k] for k in kinds) or "the"
    draft.add(INFO, kinds[0] if kinds else "weights", None, f"{what} tensors in DCP are "
              f"resharded on load, so {n} rank{'s' if n != 1 else ''} can read them.")
