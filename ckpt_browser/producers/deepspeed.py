"""DeepSpeed engine checkpoints: a `latest` marker naming a tag folder of *_states.pt files.

Read by `build_deepspeed` alone, and as an engine (base.Engine) inside trainers' folders.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from ckpt_browser.model import ERROR, INFO, WARNING, Component, Finding, Problem, TrainingState
from ckpt_browser.parts.common import (
    INCOMPLETE,
    OK,
    Found,
    as_int,
    count_tensors,
    dig,
    fields,
    find_optimizer,
    jsonable,
    leaf,
    matching,
    missing,
    not_needed,
    num,
    read_each,
    safe_fields,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_facts, optimizer_ok
from ckpt_browser.parts.rng import gaps, said_ranks
from ckpt_browser.parts.scaler import fp16_scaler_missing, scaler_from_state
from ckpt_browser.parts.scheduler import scheduler_component
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    OTHER,
    Detection,
    Engine,
    Producer,
    Seen,
    add,
    dangling,
    facts_of,
    isdir,
    listdir,
    missing_ranks,
    newest_name,
    read_marker,
    rx,
    step_name,
)
from ckpt_browser.standins import PickleFile

DS_MODEL = re.compile(r"^(?:mp_rank_\d\d|zero_pp_rank_\d+_mp_rank_\d\d)_model_states\.pt$")
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_\d\d_?optim_states\.pt$")
DS_MOE_OPTIM = re.compile(r"^expp_rank_\d+_mp_rank_\d\d_optim_states\.pt$")
DS_EXTRA_MODEL = rx(r"layer_\d+_expert_\d+_mp_rank_\d\d_model_states\.pt",
                    r"layer_\d\d-model_\d+-model_states\.pt")
DS_MARKERS = ("latest", "latest_universal")
STEPS = (step_name("global_stepN", r"global_step(\d+)(?:_universal)?"),)  # runtime/engine.py


def is_state_file(name: str) -> bool:
    return bool(DS_MODEL.match(name) or DS_OPTIM.match(name))


TAGS = rx(r"global_step.*")  # the tag folders it writes itself (engine.py: f"global_step{n}")


def save_dir(seen: Seen, tags: re.Pattern, pointer: bool) -> Detection | None:
    """A folder DeepSpeed saved into for another producer (a trainer's step folder): a
    marker, or a tag folder named by `tags`. `pointer`: that producer's resume loads the tag
    the marker names (else it names the tag itself)."""
    if not any(m in seen.names for m in DS_MARKERS) and not any(
            tags.match(n) and isdir(seen.path, n) for n in seen.names):
        return None
    return deepspeed_root(seen, tags, pointer)


def deepspeed_root(seen: Seen, tag_names: re.Pattern = TAGS, pointer: bool = True) -> Detection:
    path, names = seen.path, seen.names
    marker = "latest" if "latest" in names else "latest_universal"
    problems: list[Problem] = []
    info = [n for n in names if not isdir(path, n)]  # latest, zero_to_fp32.py ...
    tag, problem = read_marker(path, marker) if pointer and marker in names else ("", None)
    if problem:
        problems.append(problem)
    tags = [n for n in names if tag_names.match(n) and isdir(path, n)]
    if tag and (tag not in names or not isdir(path, tag)):  # names: loops left out
        problems.append(dangling(marker, tag, tags, here=path, step_names=STEPS))
        return Detection(path, path, "deepspeed", seen.read_step(tag)[0],
                         f"{marker} names {tag}", roles={OTHER: tuple(info)}, tag=tag,
                         problems=tuple(problems))
    if not tag:
        if not tags:
            return Detection(path, path, "deepspeed", roles={OTHER: tuple(info)},
                             problems=tuple(problems))
        tag = newest_name(tags, STEPS)
        if pointer:
            problems.append(Problem(WARNING, None, f"no readable latest; showing {tag}"))
    step = seen.read_step(tag)[0]
    det = deepspeed_tag(os.path.join(path, tag), path, tag, listdir(os.path.join(path, tag)),
                        step, f"{marker} names {tag}")
    roles = dict(det.roles)
    add(roles, OTHER, info)
    variant = "universal" if marker == "latest_universal" or det.variant == "universal" else ""
    return Detection(path, path, "deepspeed", step, det.step_source, variant=variant,
                     roles=roles, tag=tag, problems=tuple(problems) + det.problems)


def deepspeed_tag(folder: str, root: str, tag: str, names: list[str], step, source) -> Detection:
    prefix = f"{tag}/" if tag else ""
    model = [prefix + n for n in names if DS_MODEL.match(n)]
    optim = [prefix + n for n in names if DS_OPTIM.match(n) or DS_MOE_OPTIM.match(n)]
    roles: dict[str, tuple[str, ...]] = {}
    add(roles, "weights", model + [prefix + n for n in names if DS_EXTRA_MODEL.match(n)])
    add(roles, "optimizer", optim or model[:1])  # without ZeRO the optimizer is in model_states
    variant = ""
    if "zero" in names and isdir(folder, "zero"):
        add(roles, "optimizer", [prefix + "zero/"])
        variant = "universal"
    for role in ("scheduler", "progress", "data"):
        add(roles, role, model[:1])
    add(roles, "scaler", optim or model[:1])
    problems = () if model else (Problem(ERROR, tag or None, "no *model_states.pt file: the "
                                         "DeepSpeed save did not finish or files were lost"),)
    return Detection(folder if not tag else root, root, "deepspeed", step, source,
                     variant=variant, roles=roles, tag=tag, problems=problems)


def _claims(seen: Seen) -> bool:
    if seen.is_file:
        return is_state_file(seen.names[0])
    return any(m in seen.names for m in DS_MARKERS) or any(map(is_state_file, seen.names))


def _roles(seen: Seen) -> Detection:
    if not seen.is_file and any(m in seen.names for m in DS_MARKERS):
        return deepspeed_root(seen)
    step, source = seen.step, seen.source
    if seen.is_file and step is None:  # a states file named like a checkpoint (global_step4)
        step, _, source = seen.read_step(seen.names[0])
    return deepspeed_tag(seen.path, seen.root, "", seen.names, step, source)


def _own_file(det: Detection, name: str, keys: set[str]) -> Detection | None:
    """DeepSpeed's model or optimizer states by their keys, whatever they are called."""
    if ("module" in keys and keys & {"ds_config", "param_shapes", "ds_version"}) or \
            {"optimizer_state_dict", "ds_version"} <= keys:
        return replace(deepspeed_tag(det.path, det.root, "", [name], det.step, det.step_source),
                       path=det.path)
    return None


# --- reading its files -----------------------------------------------------------------


@dataclass
class DeepSpeedParts:
    model_files: list[str]
    optim_files: list[str]
    states: PickleFile | None  # the first model_states file
    ms: dict  # its fields (empty when unsafe or unreadable)

    @property
    def world(self) -> int | None:
        return as_int(self.ms.get("dp_world_size"))

    def owns(self, name: str) -> bool:
        return bool(DS_MODEL.match(leaf(name)))

    def weights(self, fs: StateFiles, files) -> Component:
        if not self.model_files:
            return missing("weights", "no DeepSpeed model_states file: nothing to load.")
        c = weights_component(fs, files, key_in=lambda o: fields(o).get("module"))
        if c.status == OK and any(leaf(f).startswith("zero_pp_rank_") for f in self.model_files):
            return Component("weights", OK, c.files, "ZeRO-3: the model_states hold only partition "
                             "placeholders; zero_to_fp32.py rebuilds full weights from the "
                             "optim_states files.", {**c.facts, "zero3": True})
        if c.status == OK:
            return Component("weights", OK, c.files, c.detail[:-1] + " (the 16-bit module; the "
                             "fp32 master copy is in the optimizer state).", c.facts)
        return c

    def optimizer(self, fs: StateFiles, universal) -> Component:
        if universal:
            return _universal(fs, universal)
        if not self.optim_files:
            opt = self.ms.get("optimizer")
            sd = find_optimizer(opt) if opt is not None else None
            if sd is None:
                return missing("optimizer", "DeepSpeed saved no optimizer state (no "
                               "*optim_states.pt and none in model_states): a resume starts the "
                               "optimizer from zero.")
            return optimizer_ok(fs, self.states, sd, self.model_files[:1], self.model_files[0])
        pfs, bad = read_each(fs, "optimizer", self.optim_files)
        if bad:
            return bad
        osd = fields(fields(pfs[0].obj).get("optimizer_state_dict"))
        sd = find_optimizer(osd)
        if sd is not None:
            facts = optimizer_facts(sd, fs.scalars(pfs[0]))
        else:
            base = osd.get("base_optimizer_state")
            groups = [fields(g) for g in base] if isinstance(base, list) else []
            facts = {"param_groups": len(groups),
                     "state_keys": sorted({str(k) for g in groups for k in g}),
                     "tensors": count_tensors(base)}
        for key in ("zero_stage", "partition_count", "dynamic_loss_scale", "clip_grad"):
            if key in osd:
                facts[key] = jsonable(osd[key])
        return _zero_shards(self, facts)

    def scheduler(self, fs: StateFiles) -> Component:
        if not self.ms:
            return missing("scheduler", "no readable model_states file, so the DeepSpeed LR "
                           "scheduler state is unknown.")
        sd = self.ms.get("lr_scheduler")
        if sd is None or self.states is None:
            return not_needed("scheduler", "DeepSpeed managed no LR scheduler (lr_scheduler is "
                              "None): the LR is constant, or the training script keeps the "
                              "schedule itself.")
        return scheduler_component(fs, self.states, sd, self.model_files[:1], self.model_files[0])

    def scaler(self, fs: StateFiles) -> Component:
        fp16 = dig(self.ms, "ds_config", "fp16", "enabled")
        bf16 = dig(self.ms, "ds_config", "bf16", "enabled")
        source = None
        for f in self.optim_files[:1] or self.model_files[:1]:
            pf = fs.pickle(f)
            osd = fields(pf.obj).get("optimizer_state_dict") or fields(pf.obj).get("optimizer")
            if fields(osd).get("loss_scaler") is not None:
                source = (pf, fields(osd)["loss_scaler"], f, fields(osd).get("dynamic_loss_scale"))
        if fp16 is None and not self.ms:
            return missing("scaler", "no readable model_states file, so whether the run used fp16 "
                           "(and needs its loss scaler) is unknown.")
        if fp16 is not True:
            mode = "bf16" if bf16 is True else "fp16 off"
            return not_needed("scaler", f"ds_config has {mode}: no fp16 loss scaler to restore.",
                              {"fp16": fp16, "bf16": bf16})
        files = self.optim_files[:1] or self.model_files[:1]
        _, bad = read_each(fs, "scaler", files, limit=None)
        if bad:
            return bad
        if source is None:
            return fp16_scaler_missing("DeepSpeed")
        pf, scaler, f, dynamic = source
        c = scaler_from_state(fs, pf, scaler, (f,), f)
        return Component("scaler", OK, c.files, c.detail, {**c.facts, "dynamic": jsonable(dynamic),
                                                            "fp16": True})


def deepspeed_parts(det: Detection, fs: StateFiles, out: Found) -> DeepSpeedParts:
    model = matching(det.files("weights"), DS_MODEL)
    optim = matching(det.files("optimizer"), DS_OPTIM)
    pf = fs.pickle(model[0]) if model else None
    ms = {} if pf is None else safe_fields(out, pf)
    return DeepSpeedParts(model, optim, pf, ms)


def _universal(fs: StateFiles, universal: list[str]) -> Component:
    params = len(listdir(os.path.join(fs.root, universal[0])))
    facts = {"universal": True, "params": params}
    if not params:
        return Component("optimizer", INCOMPLETE, tuple(universal), f"{universal[0]} is empty: "
                         "the universal conversion did not finish.", facts)
    return Component("optimizer", OK, tuple(universal),
                     f"universal checkpoint: optimizer state for {params} parameters under "
                     "zero/, loadable on any data-parallel size with load_universal=true.", facts)


def _zero_shards(ds: DeepSpeedParts, facts: dict) -> Component:
    """One optim_states file per data-parallel rank: all of them, or the optimizer is lost."""
    dp_ranks = sorted({int(m.group(1)) for f in ds.optim_files if (m := DS_OPTIM.match(leaf(f)))})
    world = as_int(ds.ms.get("dp_world_size"))
    lost, count = gaps(dp_ranks, world if world and world > 0 else None)
    facts.update(files=len(ds.optim_files), dp_ranks=len(dp_ranks))
    if lost:
        facts["missing_ranks"] = lost
        if count > len(lost):
            facts["missing_rank_count"] = count
        return Component("optimizer", INCOMPLETE, tuple(ds.optim_files),
                         f"ZeRO optimizer shards for data-parallel {said_ranks(lost, count)} "
                         "are missing: DeepSpeed cannot load the optimizer state.", facts)
    stage = facts.get("zero_stage")
    return Component("optimizer", OK, tuple(ds.optim_files),
                     f"ZeRO{f'-{stage}' if stage is not None else ''} optimizer state in "
                     f"{len(ds.optim_files)} shard{'s' if len(ds.optim_files) != 1 else ''} "
                     f"(one per data-parallel rank; resume needs the same {len(dp_ranks)} rank"
                     f"{'s' if len(dp_ranks) != 1 else ''} or a universal conversion), fp32 master "
                     "weights included.", facts)


def build_deepspeed(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = deepspeed_parts(det, fs, out)
    universal = [f for f in det.files("optimizer") if f.endswith("zero/")]
    out.add(ds.weights(fs, det.files("weights")) if det.files("weights") else
            missing("weights", f"{det.tag or 'the tag folder'} holds no *model_states.pt: nothing "
                    "to load."))
    out.add(ds.optimizer(fs, universal))
    out.add(ds.scheduler(fs))
    out.add(missing("rng", "DeepSpeed saves no RNG state: the resumed run draws different random "
                    "numbers (dropout, sampling) unless the script saved them."))
    out.step = as_int(ds.ms.get("global_steps"))
    out.ranks = ds.world
    _progress_and_data(ds, out)
    out.add(ds.scaler(fs))
    if det.problems and not det.files("weights"):
        out.add(missing("weights", f"{det.tag or 'the tag folder'} is missing, so nothing "
                        "can be loaded from this checkpoint."))
    return out


def _progress_and_data(ds: DeepSpeedParts, out: Found) -> None:
    keys = ("global_steps", "global_samples", "skipped_steps", "dp_world_size", "mp_world_size",
            "ds_version")
    facts = {k: jsonable(ds.ms[k]) for k in keys if k in ds.ms}
    if ds.ms:
        out.add(Component("progress", OK, tuple(ds.model_files[:1]),
                          f"global step {facts.get('global_steps')}, "
                          f"{num(facts.get('global_samples'))} samples seen, "
                          f"{num(facts.get('skipped_steps', 0))} steps skipped for fp16 overflow.",
                          facts))
    else:
        out.add(missing("progress", "no readable model_states file: the step is known only from "
                        "the tag name."))
    sampler = ds.ms.get("data_sampler")
    if sampler is not None:
        out.add(Component("data", OK, tuple(ds.model_files[:1]), "the curriculum data sampler's "
                          "position is saved in model_states.",
                          {"stored": True, "data_sampler": jsonable(sampler)}))
    else:
        seen = facts.get("global_samples")
        out.add(missing("data", f"DeepSpeed saves no data-loader position: the script must skip "
                        f"the {'' if seen is None else num(seen) + ' '}samples already seen "
                        "itself, or the data restarts from the beginning.",
                        {"stored": False, "global_samples": facts.get("global_samples")}))


# --- its resume rules -------------------------------------------------------------------

_ZERO_RANK = re.compile(r"zero_pp_rank_\d+_")


def _rank_checks(components: dict[str, Component]) -> list[Finding]:
    """ZeRO: one optimizer shard per data-parallel rank, every one of them needed."""
    opt = components["optimizer"]
    if "dp_ranks" not in opt.facts:
        return []
    ranks, out = missing_ranks(opt.facts, "optimizer", ERROR, "ZeRO optimizer shards")
    first = opt.files[0] if opt.files else "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    for r in ranks:
        name = _ZERO_RANK.sub(f"zero_pp_rank_{r}_", first, count=1)
        out.append(Finding(ERROR, "optimizer", name, f"{name} is missing: DeepSpeed needs the "
                           f"optimizer shard of every data-parallel rank (rank {r} here) and "
                           "cannot load the optimizer state without it, so only a warm start "
                           "from the weights is possible; copy the shard again or resume from an "
                           "earlier checkpoint."))
    return out


def _world_checks(ts: TrainingState, components: dict[str, Component], n: int) -> list[Finding]:
    """ZeRO's optimizer shards load only on the data-parallel size that wrote them."""
    opt, progress = components["optimizer"], components["progress"]
    if opt.facts.get("universal"):
        return [Finding(INFO, "optimizer", opt.files[0] if opt.files else None, "a universal "
                        f"checkpoint: DeepSpeed reshards its optimizer state to {n} ranks with "
                        "load_universal=true.")]
    dp = as_int(opt.facts.get("dp_ranks"))
    if not dp:
        return []
    mp = as_int(progress.facts.get("mp_world_size")) or 1
    target = n // mp if n % mp == 0 else None
    if target == dp:
        return []
    tag = opt.files[0].split("/")[0] if opt.files and "/" in opt.files[0] else "<tag>"
    where = f"{target} data-parallel rank{'s' if target != 1 else ''}" if target else \
        f"{n} ranks (not a multiple of the model-parallel size {mp})"
    return [Finding(
        ERROR, "optimizer", opt.files[0] if opt.files else None,
        f"the ZeRO optimizer state is split into {dp} shards, one per data-parallel rank; "
        f"DeepSpeed refuses to load it on {where} (\"The checkpoint being loaded used a DP "
        f"world size of {dp} but the current world size is {target or n}\"). Convert it "
        f"first: python deepspeed/checkpoint/ds_to_universal.py --input_folder "
        f"<save_dir>/{tag} --output_folder <save_dir>/{tag}_universal, then load with "
        "\"checkpoint\": {\"load_universal\": true}; without that only the weights load "
        "(load_module_only), a warm start.")]

def _scheduler_at(ts: TrainingState, last_epoch: int) -> tuple[int, str]:
    """The engine steps its scheduler once per update it did not skip (fp16 overflow)."""
    skipped = as_int(facts_of(ts, "progress").get("skipped_steps")) or 0
    return (ts.step or 0) - skipped, f"global step {ts.step} less {skipped} skipped"


DEEPSPEED = Producer("deepspeed", _claims, _roles, STEPS,
                     engine=Engine("deepspeed", "DeepSpeed", "latest", save_dir, deepspeed_parts),
                     rank_names=re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_"),
                     build=build_deepspeed, own_file=_own_file, rank_checks=_rank_checks,
                     world_checks=_world_checks, scheduler_at=_scheduler_at,
                     marks=DS_MARKERS, pointers=DS_MARKERS)
