"""Which framework wrote a checkpoint, its step, and which files hold which part of the state.

Decided from file and folder names only (catalog sections 1-6, 9 and 10). The only files
opened are tiny text markers: DeepSpeed's `latest`, Megatron's
`latest_checkpointed_iteration.txt` and `metadata.json`. No pickle is touched here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace

from ckpt_browser.model import ERROR, INFO, WARNING, Problem, natural_key

MAX_MARKER = 4096  # `latest` and the Megatron tracker hold one short line
OTHER = "other"  # role for files that hold no resume state (config, training_args.bin ...)

FRAMEWORKS = ("hf-trainer", "accelerate", "lightning", "torchtitan", "dcp", "deepspeed",
              "megatron", "safetensors", "unknown")


@dataclass(frozen=True)
class Detection:
    """What the names in a checkpoint say. File names are relative to `root`."""

    path: str  # as the user gave it
    root: str  # folder the names below are relative to
    framework: str  # one of FRAMEWORKS
    step: int | None = None
    step_source: str = ""  # "folder name checkpoint-6", "latest names global_step4" ...
    epoch: int | None = None  # from `epoch=E-step=S.ckpt` or `epoch_N`
    variant: str = ""  # "fsdp", "deepspeed", "sharded", "universal", "torch_dist", "torch" ...
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)  # component kind -> files
    dcp: tuple[str, ...] = ()  # DCP folders relative to root ("" is root itself)
    tag: str = ""  # DeepSpeed tag / Megatron iteration folder, relative to root
    problems: tuple[Problem, ...] = ()

    def files(self, role: str) -> tuple[str, ...]:
        return self.roles.get(role, ())


# --- name patterns -------------------------------------------------------------------------

def _rx(*patterns: str) -> re.Pattern:
    return re.compile("^(?:" + "|".join(patterns) + ")$")


STEP_DIRS = [  # (regex, what the number counts)
    (re.compile(r"^checkpoint-(\d+)$"), "step"),
    (re.compile(r"^step-(\d+)$"), "step"),
    (re.compile(r"^step_(\d+)$"), "step"),
    (re.compile(r"^global_step(\d+)(?:_universal)?$"), "step"),
    (re.compile(r"^iter_(\d{7})$"), "step"),
    (re.compile(r"^epoch_(\d+)$"), "epoch"),
    (re.compile(r"^checkpoint_(\d+)$"), "save"),  # accelerate: a save counter, not a step
]
LIGHTNING_NAME = re.compile(r"(?:^|[-_])epoch=(\d+)|(?:^|[-_])step=(\d+)")

DCP_FILE = _rx(r"\.metadata", r"\.metadata\.tmp", r"__\d+\.metadata", r"__\d+_\d+\.distcp")
DCP_DATA = re.compile(r"^__(\d+)_(\d+)\.distcp$")
SAFETENSORS = _rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                  r"model\.safetensors\.index\.json")

HF_ROLES = {
    "weights": _rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                   r"model\.safetensors\.index\.json", r"pytorch_model\.bin",
                   r"pytorch_model-\d+-of-\d+\.bin", r"pytorch_model\.bin\.index\.json",
                   r"adapter_model\.(?:safetensors|bin)", r"pytorch_model_fsdp\.bin",
                   r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin",
                   r"rank\d+-of-\d+-pytorch_model\.bin"),
    "optimizer": _rx(r"optimizer\.pt", r"optimizer\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin",
                     r"rank\d+-of-\d+-optimizer\.pt", r"optimizer\.pt_.+"),
    "scheduler": _rx(r"scheduler\.pt"),
    "rng": _rx(r"rng_state\.pth", r"rng_state_\d+\.pth"),
    "progress": _rx(r"trainer_state\.json"),
    "data": _rx(r"trainer_state\.json", r"training_args\.bin"),
    "scaler": _rx(r"scaler\.pt"),
}
HF_SIGNATURE = _rx(r"trainer_state\.json", r"training_args\.bin", r"optimizer\.pt",
                   r"scheduler\.pt", r"rng_state(?:_\d+)?\.pth")

ACC_ROLES = {
    "weights": _rx(r"model(?:_\d+)?\.safetensors", r"pytorch_model(?:_\d+)?\.bin",
                   r"pytorch_model_fsdp(?:_\d+)?\.bin",
                   r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin"),
    "optimizer": _rx(r"optimizer(?:_\d+)?\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin"),
    "scheduler": _rx(r"scheduler(?:_\d+)?\.bin"),
    "rng": _rx(r"random_states_\d+\.pkl"),
    "data": _rx(r"dl_state_dict(?:_\d+)?\.bin", r"sampler(?:_\d+)?\.bin"),
    "progress": _rx(r"custom_checkpoint_\d+\.pkl"),
    "scaler": _rx(r"scaler\.pt"),
}
ACC_SIGNATURE = _rx(r"random_states_\d+\.pkl", r"optimizer(?:_\d+)?\.bin",
                    r"scheduler(?:_\d+)?\.bin",
                    r"dl_state_dict(?:_\d+)?\.bin", r"custom_checkpoint_\d+\.pkl")

DS_MODEL = re.compile(r"^(?:mp_rank_\d\d|zero_pp_rank_\d+_mp_rank_\d\d)_model_states\.pt$")
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_\d\d_?optim_states\.pt$")
DS_MOE_OPTIM = re.compile(r"^expp_rank_\d+_mp_rank_\d\d_optim_states\.pt$")
DS_EXTRA_MODEL = _rx(r"layer_\d+_expert_\d+_mp_rank_\d\d_model_states\.pt",
                     r"layer_\d\d-model_\d+-model_states\.pt")
DS_MARKERS = ("latest", "latest_universal")

MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
MEGATRON_ITER = re.compile(r"^(?:iter_(\d{7})|release)$")
MEGATRON_RANK_DIR = re.compile(r"^mp_rank_\d\d(?:_\d{3})?(?:_\d{3})?$")

# Lightning never writes RNG state (catalog 3), so no file serves that role.
LIGHTNING_ROLES = ("weights", "optimizer", "scheduler", "data", "progress", "scaler")


# --- entry point -------------------------------------------------------------------------------

def detect(path: str) -> Detection:
    """Say which framework wrote `path` (a checkpoint folder or one file). Never raises for
    odd contents; a missing path gives framework "unknown" with an error problem."""
    if os.path.isdir(path):
        return _folder(path)
    if os.path.isfile(path):
        return _single_file(path)
    return Detection(path, path, "unknown",
                     problems=(Problem(ERROR, None, "no such file or folder"),))


def listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder), key=natural_key)
    except OSError:
        return []


def _isdir(folder: str, name: str) -> bool:
    return os.path.isdir(os.path.join(folder, name))


def step_from_name(name: str) -> tuple[int | None, int | None, str]:
    """(step, epoch, source) from a checkpoint folder or file name."""
    for rx, what in STEP_DIRS:
        m = rx.match(name)
        if m:
            n = int(m.group(1))
            if what == "step":
                return n, None, f"folder name {name}"
            if what == "epoch":
                return None, n, f"folder name {name}"
            return None, None, f"folder name {name} counts saves, not steps"
    if name.endswith(".ckpt"):
        step = epoch = None
        for m in LIGHTNING_NAME.finditer(name[:-5]):
            if m.group(1) is not None:
                epoch = int(m.group(1))
            else:
                step = int(m.group(2))
        if step is not None or epoch is not None:
            return step, epoch, f"file name {name}"
    return None, None, ""


# --- single files ------------------------------------------------------------------------------

def _single_file(path: str) -> Detection:
    root, name = os.path.split(path)
    root = root or "."
    parent = os.path.basename(os.path.abspath(root))
    step, epoch, source = step_from_name(name if name.endswith(".ckpt") else parent)
    if name.endswith(".ckpt"):
        roles = {k: (name,) for k in LIGHTNING_ROLES}
        return Detection(path, root, "lightning", step, source, epoch, roles=roles)
    if name in ("model_optim_rng.pt", "distrib_optim.pt"):
        grand = os.path.basename(os.path.dirname(os.path.abspath(root)))
        step, epoch, source = step_from_name(grand)
        keys = ("optimizer",) if name == "distrib_optim.pt" else (
            "weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")
        return Detection(path, root, "megatron", step, source, roles={k: (name,) for k in keys},
                         variant="torch")
    if DS_MODEL.match(name) or DS_OPTIM.match(name):
        return _deepspeed_tag(path, root, "", [name], step, source)
    if name.endswith((".safetensors", ".index.json")):
        return Detection(path, root, "safetensors", roles={"weights": (name,)})
    for framework, table in (("hf-trainer", HF_ROLES), ("accelerate", ACC_ROLES)):
        roles = _classify(table, [name])
        if roles and (framework == "accelerate" or HF_SIGNATURE.match(name)):
            return Detection(path, root, framework, step, source, epoch, roles=roles)
    return Detection(path, root, "unknown", roles={OTHER: (name,)})


# --- folders -----------------------------------------------------------------------------------

def _folder(path: str) -> Detection:
    names = listdir(path)
    base = os.path.basename(os.path.abspath(path))
    step, epoch, source = step_from_name(base)
    if base.endswith(".ckpt"):
        return _lightning_dir(path, names, step, epoch, source)
    if MEGATRON_TRACKER in names:
        return _megatron_root(path, names)
    if MEGATRON_ITER.match(base) and _megatron_format(path, names):
        return _megatron_iter(path, "", names, step, source)
    if MEGATRON_RANK_DIR.match(base) and "model_optim_rng.pt" in names:
        grand = os.path.basename(os.path.dirname(os.path.abspath(path)))
        step, _, source = step_from_name(grand)
        return _megatron_iter(path, "", [], step, source, rank_files=names)
    if any(HF_SIGNATURE.match(n) for n in names):
        return _hf(path, names, step, source)
    if any(ACC_SIGNATURE.match(n) for n in names):
        return _accelerate(path, names, step, epoch, source)
    if any(m in names for m in DS_MARKERS):
        return _deepspeed_root(path, names)
    if any(DS_MODEL.match(n) or DS_OPTIM.match(n) for n in names):
        return _deepspeed_tag(path, path, "", names, step, source)
    if any(DCP_FILE.match(n) for n in names):
        framework = "torchtitan" if base.startswith("step-") else "dcp"
        return _dcp_only(path, names, framework, step, source)
    if base.startswith("step-") and "model.safetensors.index.json" in names:
        return Detection(path, path, "torchtitan", step, source, variant="hf",
                         roles={"weights": tuple(n for n in names if SAFETENSORS.match(n))})
    if any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names):
        weights = tuple(n for n in names if n.endswith((".safetensors", ".safetensors.index.json")))
        roles = {"weights": weights}
        return Detection(path, path, "safetensors", step, source, roles=_with_other(roles, names))
    latest = _latest_child(path, names)
    if latest is not None:
        return latest
    return Detection(path, path, "unknown", step, source, epoch,
                     roles={OTHER: tuple(names)} if names else {})


def _classify(table: dict[str, re.Pattern], names: list[str], prefix: str = "") -> dict:
    roles: dict[str, tuple[str, ...]] = {}
    for role, rx in table.items():
        hits = tuple(prefix + n for n in names if rx.match(n))
        if hits:
            roles[role] = hits
    return roles


def _with_other(roles: dict, names: list[str], prefix: str = "") -> dict:
    used = {f for files in roles.values() for f in files}
    rest = tuple(prefix + n for n in names if prefix + n not in used and not n.startswith("."))
    if rest:
        roles = {**roles, OTHER: roles.get(OTHER, ()) + rest}
    return roles


def _add(roles: dict, role: str, files) -> None:
    files = tuple(files)
    if files:
        roles[role] = roles.get(role, ()) + tuple(f for f in files if f not in roles.get(role, ()))


def dcp_files(folder: str, rel: str, names: list[str] | None = None) -> tuple[str, ...]:
    names = listdir(os.path.join(folder, rel)) if names is None else names
    prefix = f"{rel}/" if rel else ""
    return tuple(prefix + n for n in names if DCP_FILE.match(n))


def _is_dcp(folder: str) -> bool:
    return any(DCP_FILE.match(n) for n in listdir(folder))


# --- HF Trainer and accelerate -------------------------------------------------------------------

def _fsdp_dirs(path: str, names: list[str], roles: dict, dcp: list[str]) -> str:
    """DCP folders an FSDP run nests inside HF / accelerate checkpoints (catalog 1.5, 2)."""
    variant = ""
    for n in names:
        if not _isdir(path, n) or not _is_dcp(os.path.join(path, n)):
            continue
        if re.match(r"^pytorch_model_fsdp_\d+$", n):
            _add(roles, "weights", dcp_files(path, n))
        elif re.match(r"^optimizer_\d+$", n):
            _add(roles, "optimizer", dcp_files(path, n))
        else:
            continue
        dcp.append(n)
        variant = "fsdp"
    if any(re.match(r"^pytorch_model_fsdp", n) for n in names):
        variant = "fsdp"
    return variant


def _nested_deepspeed(path: str, names: list[str], roles: dict, tag_rx: re.Pattern) -> tuple:
    """A DeepSpeed engine checkpoint inside an HF or accelerate folder."""
    problems: list[Problem] = []
    tags = [n for n in names if tag_rx.match(n) and _isdir(path, n)]
    if "latest" in names:
        tag, problem = _read_marker(path, "latest")
        if problem:
            problems.append(problem)
        elif tag not in tags:
            problems.append(Problem(ERROR, "latest", f"latest names {tag}, which does not exist"))
        if tag in tags:
            tags = [tag]
    if not tags:
        return "", problems
    tag = max(tags, key=natural_key)
    inner = _deepspeed_tag(os.path.join(path, tag), path, tag, listdir(os.path.join(path, tag)),
                           None, "")
    for role, files in inner.roles.items():
        if role != OTHER:
            _add(roles, role, files)
    _add(roles, OTHER, [n for n in ("latest", "zero_to_fp32.py") if n in names])
    return "deepspeed", problems + list(inner.problems)


def _hf(path: str, names: list[str], step, source) -> Detection:
    roles = _classify(HF_ROLES, names)
    for sub in names:  # PEFT adapters saved per adapter name
        if os.path.isfile(os.path.join(path, sub, "adapter_model.safetensors")):
            _add(roles, "weights", [f"{sub}/adapter_model.safetensors"])
    dcp: list[str] = []
    variant = _fsdp_dirs(path, names, roles, dcp)
    ds_variant, problems = _nested_deepspeed(path, names, roles, re.compile(r"^global_step\d+$"))
    roles = _with_other(roles, [n for n in names if not _isdir(path, n)])
    return Detection(path, path, "hf-trainer", step, source, variant=ds_variant or variant,
                     roles=roles, dcp=tuple(dcp), problems=tuple(problems))


def _accelerate(path: str, names: list[str], step, epoch, source) -> Detection:
    roles = _classify(ACC_ROLES, names)
    dcp: list[str] = []
    variant = _fsdp_dirs(path, names, roles, dcp)
    ds_variant, problems = _nested_deepspeed(path, names, roles,
                                             re.compile(r"^pytorch_model(?:_\d+)?$"))
    roles = _with_other(roles, [n for n in names if not _isdir(path, n)])
    return Detection(path, path, "accelerate", step, source, epoch, ds_variant or variant,
                     roles, tuple(dcp), problems=tuple(problems))


# --- Lightning -------------------------------------------------------------------------------

def _lightning_dir(path: str, names: list[str], step, epoch, source) -> Detection:
    """A `.ckpt` that is a folder: FSDP sharded (DCP + meta.pt) or DeepSpeed (tag `checkpoint`)."""
    if "meta.pt" in names:
        files = dcp_files(path, "", names)
        roles = {"weights": files, "optimizer": files}
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = ("meta.pt",)
        problems = () if ".metadata" in names else (
            Problem(ERROR, None, "a sharded Lightning checkpoint without .metadata: the DCP "
                    "save did not finish"),)
        return Detection(path, path, "lightning", step, source, epoch, "sharded",
                         _with_other(roles, names), ("",), problems=problems)
    if any(m in names for m in DS_MARKERS) or _isdir(path, "checkpoint"):
        ds = _deepspeed_root(path, names)
        roles = dict(ds.roles)
        model = tuple(f for f in ds.files("weights") if DS_MODEL.match(os.path.basename(f)))
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = model[:1] + (() if role != "scaler" else tuple(
                f for f in ds.files("optimizer") if f not in model))
        return Detection(path, path, "lightning", step, source, epoch, "deepspeed", roles,
                         tag=ds.tag, problems=ds.problems)
    return Detection(path, path, "lightning", step, source, epoch, "folder",
                     roles={OTHER: tuple(names)} if names else {},
                     problems=(Problem(ERROR, None, "a .ckpt folder with neither meta.pt (FSDP) "
                                       "nor latest (DeepSpeed)"),))


# --- DCP and torchtitan --------------------------------------------------------------------------

def _dcp_only(path: str, names: list[str], framework: str, step, source) -> Detection:
    files = dcp_files(path, "", names)
    roles = {k: files for k in ("weights", "optimizer", "scheduler", "data", "progress")}
    problems = []
    if ".metadata" not in names and not any(re.match(r"^__\d+\.metadata$", n) for n in names):
        what = ".metadata.tmp is there but was never renamed" if ".metadata.tmp" in names \
            else "no .metadata"
        problems.append(Problem(ERROR, None, f"DCP save did not finish: {what}"))
    return Detection(path, path, framework, step, source, roles=_with_other(roles, names),
                     dcp=("",), problems=tuple(problems))


# --- DeepSpeed ---------------------------------------------------------------------------------

def _read_marker(folder: str, name: str) -> tuple[str, Problem | None]:
    try:
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read(MAX_MARKER + 1)
    except OSError as e:
        return "", Problem(ERROR, name, f"cannot read it: {e.strerror or e}")
    if len(raw) > MAX_MARKER:
        return "", Problem(ERROR, name, f"is over {MAX_MARKER:,} bytes; a marker holds one line")
    text = raw.decode("utf-8", "replace").strip()
    if not text or "/" in text or "\\" in text or text in (".", ".."):
        return "", Problem(ERROR, name, f"holds {text!r}, not a folder name")
    return text, None


def _deepspeed_root(path: str, names: list[str]) -> Detection:
    marker = "latest" if "latest" in names else "latest_universal"
    problems: list[Problem] = []
    info = [n for n in names if not _isdir(path, n)]  # latest, zero_to_fp32.py ...
    tag, problem = _read_marker(path, marker) if marker in names else ("", None)
    if problem:
        problems.append(problem)
    tags = [n for n in names
            if (n.startswith("global_step") or n == "checkpoint") and _isdir(path, n)]
    if tag and not _isdir(path, tag):
        newest = f"; the newest tag folder here is {max(tags, key=natural_key)}" if tags else ""
        problems.append(Problem(ERROR, marker,
                                f"{marker} names {tag}, which does not exist{newest}"))
        step, _, _ = step_from_name(tag)
        return Detection(path, path, "deepspeed", step, f"{marker} names {tag}",
                         roles={OTHER: tuple(info)}, tag=tag, problems=tuple(problems))
    if not tag:
        if not tags:
            return Detection(path, path, "deepspeed", roles={OTHER: tuple(info)},
                             problems=tuple(problems))
        tag = max(tags, key=natural_key)
        problems.append(Problem(WARNING, None, f"no readable latest; showing {tag}"))
    step, _, _ = step_from_name(tag)
    det = _deepspeed_tag(os.path.join(path, tag), path, tag, listdir(os.path.join(path, tag)),
                         step, f"{marker} names {tag}")
    roles = dict(det.roles)
    _add(roles, OTHER, info)
    variant = "universal" if marker == "latest_universal" or det.variant == "universal" else ""
    return Detection(path, path, "deepspeed", step, det.step_source, variant=variant,
                     roles=roles, tag=tag, problems=tuple(problems) + det.problems)


def _deepspeed_tag(folder: str, root: str, tag: str, names: list[str], step, source) -> Detection:
    prefix = f"{tag}/" if tag else ""
    model = [prefix + n for n in names if DS_MODEL.match(n)]
    optim = [prefix + n for n in names if DS_OPTIM.match(n) or DS_MOE_OPTIM.match(n)]
    roles: dict[str, tuple[str, ...]] = {}
    _add(roles, "weights", model + [prefix + n for n in names if DS_EXTRA_MODEL.match(n)])
    _add(roles, "optimizer", optim or model[:1])  # without ZeRO the optimizer is in model_states
    variant = ""
    if "zero" in names and _isdir(folder, "zero"):
        _add(roles, "optimizer", [prefix + "zero/"])
        variant = "universal"
    for role in ("scheduler", "progress", "data"):
        _add(roles, role, model[:1])
    _add(roles, "scaler", optim or model[:1])
    if not tag and step is None:
        step, _, source = step_from_name(os.path.basename(os.path.abspath(folder)))
    problems = () if model else (Problem(ERROR, tag or None, "no *model_states.pt file: the "
                                         "DeepSpeed save did not finish or files were lost"),)
    return Detection(folder if not tag else root, root, "deepspeed", step, source,
                     variant=variant, roles=roles, tag=tag, problems=problems)


# --- Megatron ----------------------------------------------------------------------------------

def _megatron_format(folder: str, names: list[str]) -> str:
    """Megatron's `_get_checkpoint_format`: metadata.json -> torch_dist (or zarr),
    mp_rank_0* -> torch, .metadata -> torch_dcp."""
    if "metadata.json" in names:
        try:
            with open(os.path.join(folder, "metadata.json"), "rb") as f:
                doc = json.loads(f.read(MAX_MARKER * 16))
            backend = doc.get("sharded_backend") if isinstance(doc, dict) else None
        except (OSError, ValueError):
            backend = None
        return "zarr" if backend == "zarr" else "torch_dist"
    if any(n.startswith("mp_rank_0") for n in names):
        return "torch"
    if ".metadata" in names or any(DCP_DATA.match(n) for n in names):
        return "torch_dcp"
    return ""


def _megatron_root(path: str, names: list[str]) -> Detection:
    text, problem = _read_marker(path, MEGATRON_TRACKER)
    iters = [n for n in names if MEGATRON_ITER.match(n) and _isdir(path, n)]
    if problem:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(problem,))
    if text == "release":
        tag, step = "release", None
    elif text.isdigit():
        step = int(text)
        tag = f"iter_{step:07d}"
    else:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(Problem(ERROR, MEGATRON_TRACKER,
                                           f"holds {text!r}, not an iteration or 'release'"),))
    source = f"{MEGATRON_TRACKER} says {text}"
    if tag not in iters:
        newest = f"; the newest iteration folder here is {max(iters, key=natural_key)}" \
            if iters else ""
        problem = Problem(ERROR, MEGATRON_TRACKER,
                          f"{MEGATRON_TRACKER} names {tag}, which does not exist{newest}")
        return Detection(path, path, "megatron", step, source, roles={OTHER: (MEGATRON_TRACKER,)},
                         tag=tag, problems=(problem,))
    det = _megatron_iter(os.path.join(path, tag), tag, listdir(os.path.join(path, tag)), step,
                         source, root=path)
    roles = dict(det.roles)
    _add(roles, OTHER, [MEGATRON_TRACKER])
    return Detection(path, path, "megatron", step, source, variant=det.variant, roles=roles,
                     dcp=det.dcp, tag=tag, problems=det.problems)


def _megatron_iter(folder: str, tag: str, names: list[str], step, source, root: str | None = None,
                   rank_files: list[str] | None = None) -> Detection:
    root = root or folder
    prefix = f"{tag}/" if tag else ""
    roles: dict[str, tuple[str, ...]] = {}
    all_roles = ("weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")
    if rank_files is not None:  # the user opened one mp_rank_XX folder
        for role in all_roles:
            _add(roles, role, ["model_optim_rng.pt"])
        _add(roles, "optimizer", [n for n in rank_files if n == "distrib_optim.pt"
                                  or n.startswith("layer_wise_optimizer_")])
        return Detection(folder, folder, "megatron", step, source, variant="torch", roles=roles)
    variant = _megatron_format(folder, names)
    problems: list[Problem] = []
    dcp: tuple[str, ...] = ()
    if variant == "torch":
        rank_dirs = [n for n in names if MEGATRON_RANK_DIR.match(n) and _isdir(folder, n)]
        main = []
        for d in rank_dirs:
            inner = listdir(os.path.join(folder, d))
            if "model_optim_rng.pt" in inner:
                main.append(f"{prefix}{d}/model_optim_rng.pt")
            else:
                problems.append(Problem(ERROR, f"{prefix}{d}", "has no model_optim_rng.pt"))
            _add(roles, "optimizer", [f"{prefix}{d}/{n}" for n in inner if n == "distrib_optim.pt"
                                      or n.startswith("layer_wise_optimizer_")])
        for role in ("weights", "rng"):
            _add(roles, role, main)
        for role in ("optimizer", "scheduler", "data", "progress", "scaler"):
            _add(roles, role, main[:1])
        roles["optimizer"] = tuple(sorted(roles.get("optimizer", ()), key=natural_key))
    elif variant in ("torch_dist", "torch_dcp"):
        files = dcp_files(folder, "", names)
        files = tuple(prefix + f for f in files)
        for role in all_roles:
            _add(roles, role, files)
        if "common.pt" in names:
            for role in ("scheduler", "data", "progress"):
                _add(roles, role, [prefix + "common.pt"])
        dcp = (tag,)
        if ".metadata" not in names:
            problems.append(Problem(ERROR, tag or None,
                                    "no DCP .metadata: the save did not finish"))
    elif variant == "zarr":
        problems.append(Problem(WARNING, prefix + "metadata.json", "zarr backend: removed from "
                                "Megatron in 2026-01, current Megatron cannot load it"))
        _add(roles, OTHER, [prefix + n for n in names])
    else:
        problems.append(Problem(ERROR, tag or None, "no Megatron checkpoint files here (no "
                                "metadata.json, mp_rank_* folder or DCP .metadata)"))
    _add(roles, OTHER, [prefix + "metadata.json"] if "metadata.json" in names else [])
    return Detection(folder, root, "megatron", step, source, variant=variant, roles=roles,
                     dcp=dcp, tag=tag, problems=tuple(problems))


# --- a folder of several checkpoints -----------------------------------------------------------

def _latest_child(path: str, names: list[str]) -> Detection | None:
    """A run folder holding checkpoint-N / step-N ... folders: open the latest (catalog 9.1)."""
    for nest in ("checkpoint", "checkpoints"):
        if nest in names and _isdir(path, nest):
            inner = listdir(os.path.join(path, nest))
            found = _latest_child(os.path.join(path, nest), inner)
            if found is not None:
                return found
    steps = []
    for n in names:
        step, _, _ = step_from_name(n)
        if step is not None and (_isdir(path, n) or n.endswith(".ckpt")):
            steps.append((step, n))
    if not steps:
        return None
    step, name = max(steps)
    found = detect(os.path.join(path, name))
    note = Problem(INFO, None, f"{len(steps)} checkpoints here; showing {name}, the latest"
                   if len(steps) > 1 else f"showing {name}, the only checkpoint here")
    return replace(found, problems=(note,) + found.problems)
