"""The seven parts of training state (weights, optimizer, scheduler, rng, data, progress, scaler)
as one framework wrote them, read without executing any pickle.

`training_state(path)` detects the framework by names (readers/frameworks.py), reads each state
file once with the restricted readers, and fills one `Component` per kind with a status, the
files, one sentence for a tired human, and JSON-able facts. It decides no resume verdict.
Safetensors headers are never read here: the weights view does that.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field

from ckpt_browser.model import COMPONENTS, ERROR, WARNING, Component, Problem, TrainingState
from ckpt_browser.readers.frameworks import Detection, detect, listdir
from ckpt_browser.readers.pickle_safe import read_pickle_bytes
from ckpt_browser.readers.standins import (DcpCheckpoint, NumpyArray, Opaque, PickleFile,
                                           TensorRef, UnsafeCall)

MAX_JSON = 64 * 1024 * 1024
MAX_RANK_FILES = 1024  # per-rank files read in full; more are only counted
MAX_SHAPES = 10_000  # exp_avg shapes listed per optimizer
MAX_DCP_ITEM = 1024 * 1024  # non-tensor DCP items decoded (steps, counters, loader state)

OK, MISSING, INCOMPLETE, DAMAGED, UNSAFE, NOT_NEEDED = (
    "ok", "missing", "incomplete", "damaged", "unsafe", "not-needed")

# accelerate / Megatron RNG key -> the generator it restores (catalog 1.3, 2, 6)
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

_STRUCT = {"F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
           "U8": "B", "U16": "H", "U32": "I", "U64": "Q", "BOOL": "?"}


# --- reading, once per file -----------------------------------------------------------------------

class StateFiles:
    """Reads each state file once; remembers every PickleFile / DcpCheckpoint and problem."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._cache: dict[str, object] = {}
        self.read: list = []
        self.problems: list[Problem] = []
        self._handles: dict[str, object] = {}  # files whose scalar tensors are being read

    def close(self) -> None:
        for f in self._handles.values():
            f.close()
        self._handles.clear()

    def pickle(self, name: str) -> PickleFile:
        if name not in self._cache:
            from ckpt_browser.readers.torchfile import read_pickle_file

            try:
                pf = read_pickle_file(os.path.join(self.root, name), name)
            except Exception as e:  # a reader bug must not hide the other components
                pf = PickleFile(name, "pickle", problems=(Problem(ERROR, name, f"not read: {e}"),))
            self._cache[name] = pf
            self.read.append(pf)
            self.problems.extend(pf.problems)
        return self._cache[name]

    def dcp(self, rel: str) -> DcpCheckpoint:
        key = f"dcp:{rel}"
        if key not in self._cache:
            from ckpt_browser.readers.dcp import read_dcp

            try:
                d = read_dcp(os.path.join(self.root, rel) if rel else self.root, rel)
            except Exception as e:
                d = DcpCheckpoint(rel, problems=(Problem(ERROR, rel or None, f"not read: {e}"),))
            self._cache[key] = d
            self.read.append(d)
            self.problems.extend(d.problems)
        return self._cache[key]

    def json(self, name: str) -> tuple[dict | None, str]:
        """(document, why it is unreadable)."""
        key = f"json:{name}"
        if key not in self._cache:
            self._cache[key] = _read_json(os.path.join(self.root, name))
            if self._cache[key][1]:
                self.problems.append(Problem(ERROR, name, self._cache[key][1]))
        return self._cache[key]

    def dcp_value(self, rel: str, entry) -> object:
        """A non-tensor DCP item's value, or a label for tensors. Each item is a standalone
        torch.save zip inside a rank file (catalog 4.2): read it with the restricted unpickler."""
        if entry.kind == "tensor":
            return f"tensor {entry.dtype}{list(entry.shape or ())}"
        chunk = entry.chunks[0] if entry.chunks else None
        if chunk is None or chunk.file is None or not 0 < (chunk.length or 0) <= MAX_DCP_ITEM:
            return None
        name = f"{rel}/{chunk.file}" if rel else chunk.file
        try:
            with open(os.path.join(self.root, name), "rb") as f:
                f.seek(chunk.offset)
                blob = f.read(chunk.length)
            with zipfile.ZipFile(io.BytesIO(blob)) as zf:
                pkl = next((i for i in zf.infolist() if i.filename.endswith("/data.pkl")), None)
                if pkl is None or pkl.file_size > MAX_DCP_ITEM:
                    return None
                data = zf.read(pkl)
        except (OSError, zipfile.BadZipFile, ValueError, EOFError):
            return None
        obj, unsafe, problems = read_pickle_bytes(data, f"{name} ({entry.key})")
        if unsafe:
            self.problems.append(Problem(ERROR, name, f"item {entry.key} asks to run "
                                         f"{', '.join(unsafe)} when unpickled; not run"))
            return f"unsafe call {unsafe[0]} (not run)"
        return obj if not any(p.severity == ERROR for p in problems) else None

    def scalar(self, pf: PickleFile, ref) -> object:
        """The value of a one-element tensor, read from its storage bytes; plain values pass."""
        if not isinstance(ref, TensorRef):
            return ref
        fmt = _STRUCT.get(ref.dtype)
        where = pf.storages.get(ref.storage_key)
        if ref.numel != 1 or where is None or (fmt is None and ref.dtype != "BF16"):
            return None
        size = 2 if ref.dtype == "BF16" else struct.calcsize(fmt)
        begin = where[0] + ref.storage_offset * size
        if ref.storage_offset * size + size > where[1]:
            return None
        try:
            f = self._handles.get(pf.name)
            if f is None:
                f = self._handles[pf.name] = open(os.path.join(self.root, pf.name), "rb")
            f.seek(begin)
            raw = f.read(size)
        except OSError:
            return None
        if len(raw) != size:
            return None
        if ref.dtype == "BF16":
            return struct.unpack("<f", b"\0\0" + raw)[0]
        return struct.unpack("<" + fmt, raw)[0]


def _read_json(path: str) -> tuple[dict | None, str]:
    try:
        size = os.path.getsize(path)
        if size > MAX_JSON:
            return None, f"{size:,} bytes, over the {MAX_JSON:,}-byte limit for JSON; not read"
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, f"not valid JSON: {e}"
    except OSError as e:
        return None, f"cannot read it: {e.strerror or e}"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    return doc, ""


# --- small helpers over the object graphs ---------------------------------------------------------

def jsonable(value, scalar: Callable = lambda v: None, depth: int = 0):
    """Turn a stand-in graph into JSON values; tensors become their value (scalars) or a label."""
    if depth > 8:
        return "..."
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, TensorRef):
        v = scalar(value)
        if v is not None:
            return jsonable(v)
        return f"tensor {value.dtype}{list(value.shape)}"
    if isinstance(value, NumpyArray):
        return f"ndarray {value.dtype}{list(value.shape)}"
    if isinstance(value, Opaque):
        if not value.fields and len(value.args) == 1 and isinstance(value.args[0], (int, str)):
            return value.args[0]  # an Enum member, e.g. ZeroStageEnum(2) -> 2
        out = {"object": value.qualname}
        if value.args and not value.fields:
            out["args"] = jsonable(list(value.args), scalar, depth + 1)
        out.update({str(k): jsonable(v, scalar, depth + 1) for k, v in value.fields.items()})
        return out
    if isinstance(value, UnsafeCall):
        return f"unsafe call {value.qualname} (not run)"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value):,} bytes"
    if isinstance(value, dict):
        return {str(k): jsonable(v, scalar, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, scalar, depth + 1) for v in list(value)[:1000]]
    return repr(value)[:200]


def fields(obj) -> dict:
    """A dict, or the attributes of an Opaque object (Namespace, dataclass ...)."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Opaque):
        return obj.fields
    return {}


def dig(obj, *keys):
    for k in keys:
        obj = fields(obj).get(k)
        if obj is None:
            return None
    return obj


def count_tensors(obj, limit: int = 10_000_000) -> int:
    n, stack = 0, [obj]
    while stack and n < limit:
        o = stack.pop()
        if isinstance(o, TensorRef):
            n += 1
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, Opaque):
            stack.append(o.state)
    return n


def find_optimizer(obj, depth: int = 0):
    """The torch optimizer state_dict ({"state", "param_groups"}) inside a wrapper's dict."""
    f = fields(obj)
    if isinstance(f.get("state"), dict) and isinstance(f.get("param_groups"), list):
        return f
    if depth >= 4:
        return None
    for key in ("optimizer_state_dict", "base_optimizer_state", "optimizer", "optimizer_states"):
        inner = f.get(key)
        if isinstance(inner, list) and inner:
            inner = inner[0]
        found = find_optimizer(inner, depth + 1) if inner is not None else None
        if found is not None:
            return found
    return None


def rank_of(name: str) -> int:
    m = RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else 0


def gaps(ranks) -> list[int]:
    have = set(ranks)
    return [r for r in range(max(have) + 1) if r not in have] if have else []


def _names(files, n: int = 3) -> str:
    files = list(files)
    shown = ", ".join(files[:n])
    return shown + (f" and {len(files) - n} more" if len(files) > n else "")


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_num(x) for x in v) + "]"
    return str(v)


# --- statuses shared by every framework -----------------------------------------------------------

def damaged_or_unsafe(kind: str, files, pfs) -> Component | None:
    """A file with code-running globals makes the component unsafe; an unreadable one damaged."""
    for pf in pfs:
        if pf.unsafe:
            return Component(kind, UNSAFE, tuple(files),
                             f"{pf.name} asks to run {', '.join(pf.unsafe)} when unpickled (not "
                             "run here); torch.load(weights_only=False) would execute it.",
                             {"unsafe": list(pf.unsafe), "file": pf.name})
    for pf in pfs:
        if isinstance(pf, PickleFile) and (pf.obj is None or
                                           any(p.severity == ERROR for p in pf.problems)):
            why = next((p.message for p in pf.problems if p.severity == ERROR), "nothing readable")
            return Component(kind, DAMAGED, tuple(files), f"{pf.name} could not be read: {why}.",
                             {"file": pf.name})
    return None


def dcp_status(kind: str, files, d: DcpCheckpoint) -> Component | None:
    if d.unsafe:
        return Component(kind, UNSAFE, tuple(files), f"the DCP metadata in {d.folder or '.'} asks "
                         f"to run {', '.join(d.unsafe)} when unpickled (not run here); torch's "
                         "own reader would execute it.", {"unsafe": list(d.unsafe)})
    errors = [p.message for p in d.problems if p.severity == ERROR]
    if errors:
        unfinished = not d.entries and any(m.startswith(("incomplete", "empty")) for m in errors)
        status = INCOMPLETE if unfinished else DAMAGED
        return Component(kind, status, tuple(files),
                         f"the DCP folder {d.folder or '.'} is not usable: {errors[0]}.")
    return None


def missing(kind: str, detail: str, facts: dict | None = None) -> Component:
    return Component(kind, MISSING, (), detail, facts or {})


def not_needed(kind: str, detail: str, facts: dict | None = None) -> Component:
    return Component(kind, NOT_NEEDED, (), detail, facts or {})


# --- optimizer ------------------------------------------------------------------------------------

def optimizer_facts(sd: dict, scalar: Callable) -> dict:
    groups = []
    for g in sd.get("param_groups") or []:
        g = fields(g)
        params = g.get("params")
        hp = {str(k): jsonable(v, scalar) for k, v in g.items() if k != "params"}
        hp["params"] = len(params) if isinstance(params, (list, tuple)) else 0
        groups.append(hp)
    state = sd.get("state") if isinstance(sd.get("state"), dict) else {}
    keys: set[str] = set()
    steps: set = set()
    dtypes: set[str] = set()
    shapes: dict[str, list[int]] = {}
    for pid, st in state.items():
        st = fields(st)
        keys.update(str(k) for k in st)
        if "step" in st:
            v = jsonable(st["step"], scalar)
            steps.add(v if isinstance(v, (int, float, str)) else str(v))
        avg = st.get("exp_avg")
        if isinstance(avg, TensorRef):
            dtypes.add(avg.dtype)
            if len(shapes) < MAX_SHAPES:
                shapes[str(pid)] = list(avg.shape)
    return {"param_groups": groups, "params": sum(g["params"] for g in groups),
            "params_with_state": len(state), "state_keys": sorted(keys),
            "step": sorted(steps, key=lambda v: (isinstance(v, str), v)),
            "exp_avg": {"dtypes": sorted(dtypes), "shapes": shapes},
            "tensors": count_tensors(state)}


def optimizer_sentence(facts: dict, where: str) -> str:
    groups = facts["param_groups"]
    lrs = sorted({_num(g.get("lr")) for g in groups if "lr" in g})
    step = facts["step"]
    text = (f"{where} holds optimizer state for {facts['params_with_state']} of "
            f"{facts['params']} parameters in {len(groups)} param group"
            f"{'s' if len(groups) != 1 else ''}")
    if facts["state_keys"]:
        text += f" ({', '.join(facts['state_keys'])})"
    if step:
        text += f", at optimizer step {_num(step[0]) if len(step) == 1 else _num(step)}"
    if lrs:
        text += f", lr {', '.join(lrs)}"
    if not facts["params_with_state"]:
        text += "; it is empty, as after zero steps, so the moments start from zero on resume"
    return text + "."


def optimizer_from_pickles(fs: StateFiles, files, what: str = "") -> Component:
    files = tuple(files)
    pfs = [fs.pickle(f) for f in files[:MAX_RANK_FILES]]
    bad = damaged_or_unsafe("optimizer", files, pfs)
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
    facts = optimizer_facts(sd, lambda v: fs.scalar(pf, v))
    if len(files) > 1:
        facts["files"] = len(files)
    return Component("optimizer", OK, files, optimizer_sentence(facts, what or files[0]), facts)


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


# --- scheduler ------------------------------------------------------------------------------------

SCHEDULER_KEYS = ("last_epoch", "last_batch_iteration", "_step_count", "base_lrs", "_last_lr",
                  "max_lr", "min_lr", "lr_warmup_steps", "num_steps", "lr_decay_steps",
                  "lr_decay_style", "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps")


def scheduler_facts(sd, scalar: Callable) -> dict:
    f = fields(sd)
    facts = {str(k): jsonable(v, scalar) for k, v in f.items() if k != "lr_lambdas"}
    if "lr_lambdas" in f:
        facts["lr_lambdas"] = len(f["lr_lambdas"]) if isinstance(f["lr_lambdas"], list) else 0
    return facts


def scheduler_sentence(facts: dict, where: str) -> str:
    parts = [f"{k} {_num(facts[k])}" for k in SCHEDULER_KEYS if k in facts][:4]
    return f"{where} holds the LR schedule position ({'; '.join(parts) or 'no known keys'})."


def scheduler_component(fs: StateFiles, pf: PickleFile, sd, files, where: str) -> Component:
    if sd is None or not fields(sd):
        return missing("scheduler", f"{where} holds no LR scheduler state: the schedule restarts "
                       "from its first step (warmup again) unless the script restores it.")
    facts = scheduler_facts(sd, lambda v: fs.scalar(pf, v))
    return Component("scheduler", OK, tuple(files), scheduler_sentence(facts, where), facts)


# --- rng ------------------------------------------------------------------------------------------

def rng_component(fs: StateFiles, files, required=("python", "numpy", "cpu"),
                  expected: int | None = None,
                  when: str = "restored right after the data skip on resume; with a different "
                  "number of processes the Trainer silently skips that restore"
                  ) -> tuple[Component, int | None]:
    """Per-rank RNG files (HF rng_state*.pth, accelerate random_states_*.pkl)."""
    files = tuple(files)
    pfs = [fs.pickle(f) for f in files[:MAX_RANK_FILES]]
    bad = damaged_or_unsafe("rng", files, pfs)
    if bad:
        return bad, len(files) or None
    per_rank: dict[str, list[str]] = {}
    micro: dict[str, object] = {}
    for pf in pfs:
        f = fields(pf.obj)
        r = str(rank_of(pf.name))
        per_rank[r] = sorted({RNG_NAMES.get(str(k), str(k)) for k in f if str(k) != "step"})
        if "step" in f:
            micro[r] = jsonable(f["step"], lambda v, pf=pf: fs.scalar(pf, v))
    ranks = [rank_of(f) for f in files]
    lost = gaps(ranks)
    if expected:
        lost = sorted(set(lost) | {r for r in range(expected) if r not in ranks})
    facts: dict = {"ranks": per_rank}
    if micro:
        facts["micro_step"] = micro
    if lost:
        facts["missing_ranks"] = lost
        return Component("rng", INCOMPLETE, files,
                         f"RNG state for rank{'s' if len(lost) > 1 else ''} "
                         f"{', '.join(map(str, lost))} is missing: those ranks restart their "
                         "random streams, so dropout and shuffling differ from an uninterrupted "
                         "run.", facts), len(files) + len(lost)
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


# --- weights --------------------------------------------------------------------------------------

_OF = re.compile(r"-(\d+)-of-(\d+)\.")


def weights_by_name(files) -> Component | None:
    """Safetensors / .bin shards: listed, never opened here; shard counts checked by name."""
    files = tuple(files)
    shards = [f for f in files if _OF.search(os.path.basename(f))]
    if not shards:
        return None
    expected = max(int(_OF.search(os.path.basename(f)).group(2)) for f in shards)
    facts = {"format": "safetensors" if any(f.endswith(".safetensors") for f in files) else "torch",
             "files": len(files), "shards": len(shards), "shards_expected": expected}
    if len(shards) < expected:
        return Component("weights", INCOMPLETE, files,
                         f"only {len(shards)} of {expected} weight shards are here: the model "
                         "cannot be loaded until the rest are found.", facts)
    return Component("weights", OK, files,
                     f"{len(shards)} weight shards"
                     f"{' with an index' if any(f.endswith('.index.json') for f in files) else ''}"
                     "; their headers are checked in the weights view.", facts)


def weights_component(fs: StateFiles, files, key_in=None, dcp: str | None = None,
                      dcp_prefix: str = "model.") -> Component:
    """Weights from safetensors names, torch pickles (count tensors) or a DCP folder."""
    files = tuple(files)
    if not files:
        return missing("weights", "no model weights here: this checkpoint cannot even "
                       "warm-start a run.")
    if dcp is not None:
        d = fs.dcp(dcp)
        bad = dcp_status("weights", files, d)
        if bad:
            return bad
        n = sum(1 for k, e in d.entries.items()
                if e.kind == "tensor" and _is_model_key(k, dcp_prefix))
        if not n:
            return missing("weights", f"the DCP checkpoint in {dcp or '.'} holds no model tensors.")
        return Component("weights", OK, files, f"{n:,} model tensors in DCP "
                         f"({len(d.files)} rank file{'s' if len(d.files) != 1 else ''}).",
                         {"format": "dcp", "tensors": n, "rank_files": len(d.files)})
    by_name = weights_by_name(files)
    if by_name is not None:
        return by_name
    safetensors = [f for f in files if f.endswith((".safetensors", ".json"))]
    if safetensors and len(safetensors) == len(files):
        verb = "holds" if len(files) == 1 else "hold"
        return Component("weights", OK, files, f"{_names(files)} {verb} the model weights; "
                         "headers are checked in the weights view.",
                         {"format": "safetensors", "files": len(files)})
    torch_files = [f for f in files if not f.endswith((".safetensors", ".json", "/"))]
    pfs = [fs.pickle(f) for f in torch_files[:MAX_RANK_FILES]]
    bad = damaged_or_unsafe("weights", files, pfs)
    if bad:
        return bad
    n = 0
    for pf in pfs:
        n += count_tensors(key_in(pf.obj) if key_in else pf.obj)
    facts = {"format": "torch", "files": len(files), "tensors": n}
    if not n:
        return Component("weights", MISSING, files, f"{_names(files)} holds no model tensors.",
                         facts)
    return Component("weights", OK, files, f"{n:,} model tensors in {_names(files)}.", facts)


def _is_model_key(key: str, prefix: str) -> bool:
    if prefix:
        return key.startswith(prefix)
    return not key.startswith(("optimizer.", "lr_scheduler.", "dataloader.", "train_state."))


# --- progress and scaler helpers ------------------------------------------------------------------

def scaler_from_state(fs: StateFiles, pf: PickleFile, sd, files, where: str) -> Component:
    facts = {str(k): jsonable(v, lambda x: fs.scalar(pf, x)) for k, v in fields(sd).items()}
    scale = facts.get("scale", facts.get("cur_scale", facts.get("_scale")))
    return Component("scaler", OK, tuple(files),
                     f"{where} holds the fp16 loss scaler (scale {_num(scale)}), so the resumed "
                     "run keeps its loss scale instead of re-probing from the default.", facts)


def fp16_scaler_missing(framework: str) -> Component:
    return Component("scaler", MISSING, (),
                     f"the run used fp16 but {framework} saved no grad-scaler state: the resumed "
                     "run restarts at the default loss scale and may skip steps finding it again.")


# --- per framework --------------------------------------------------------------------------------

@dataclass
class Found:
    components: dict[str, Component] = field(default_factory=dict)
    step: int | None = None
    epoch: float | None = None
    ranks: int | None = None
    problems: list[Problem] = field(default_factory=list)

    def add(self, c: Component) -> None:
        self.components[c.kind] = c


def _base(f: str) -> str:
    return f.rstrip("/").rsplit("/", 1)[-1]


def _match(files, rx: re.Pattern) -> list[str]:
    return [f for f in files if rx.match(_base(f))]


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _under(files, rel: str) -> list[str]:
    return [f for f in files if f.startswith(rel + "/")] if rel else list(files)


def _unsafe_note(out: Found, pf: PickleFile) -> bool:
    if pf.unsafe:
        out.problems.append(Problem(ERROR, pf.name, f"asks to run {', '.join(pf.unsafe)} when "
                                    "unpickled; not run, and its contents are not used"))
    return bool(pf.unsafe)


# --- DeepSpeed engine checkpoints (alone, or inside HF / accelerate / Lightning) ------------------

DS_MODEL = re.compile(r"^(?:mp_rank_\d\d|zero_pp_rank_\d+_mp_rank_\d\d)_model_states\.pt$")
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d\d)_?optim_states\.pt$")


@dataclass
class DeepSpeedParts:
    model_files: list[str]
    optim_files: list[str]
    states: PickleFile | None  # the first model_states file
    ms: dict  # its fields (empty when unsafe or unreadable)


def deepspeed_parts(det: Detection, fs: StateFiles, out: Found) -> DeepSpeedParts:
    model = _match(det.files("weights"), DS_MODEL)
    optim = _match(det.files("optimizer"), DS_OPTIM)
    pf = fs.pickle(model[0]) if model else None
    ms = {} if pf is None or _unsafe_note(out, pf) else fields(pf.obj)
    return DeepSpeedParts(model, optim, pf, ms)


def ds_weights(fs: StateFiles, ds: DeepSpeedParts, files) -> Component:
    c = weights_component(fs, files, key_in=lambda o: fields(o).get("module"))
    if c.status == OK and any(_base(f).startswith("zero_pp_rank_") for f in ds.model_files):
        return Component("weights", OK, c.files, "ZeRO-3: the model_states hold only partition "
                         "placeholders; zero_to_fp32.py rebuilds full weights from the "
                         "optim_states files.", {**c.facts, "zero3": True})
    if c.status == OK:
        return Component("weights", OK, c.files, c.detail[:-1] + " (the 16-bit module; the fp32 "
                         "master copy is in the optimizer state).", c.facts)
    return c


def ds_optimizer(fs: StateFiles, ds: DeepSpeedParts, universal: list[str]) -> Component:
    if universal:
        params = len(listdir(os.path.join(fs.root, universal[0])))
        facts = {"universal": True, "params": params}
        if not params:
            return Component("optimizer", INCOMPLETE, tuple(universal), f"{universal[0]} is empty: "
                             "the universal conversion did not finish.", facts)
        return Component("optimizer", OK, tuple(universal),
                         f"universal checkpoint: optimizer state for {params} parameters under "
                         "zero/, loadable on any data-parallel size with load_universal=true.",
                         facts)
    if not ds.optim_files:
        opt = ds.ms.get("optimizer")
        sd = find_optimizer(opt) if opt is not None else None
        if sd is None:
            return missing("optimizer", "DeepSpeed saved no optimizer state (no *optim_states.pt "
                           "and none in model_states): a resume starts the optimizer from zero.")
        facts = optimizer_facts(sd, lambda v: fs.scalar(ds.states, v))
        return Component("optimizer", OK, tuple(ds.model_files[:1]),
                         optimizer_sentence(facts, ds.model_files[0]), facts)
    pfs = [fs.pickle(f) for f in ds.optim_files[:MAX_RANK_FILES]]
    bad = damaged_or_unsafe("optimizer", ds.optim_files, pfs)
    if bad:
        return bad
    osd = fields(fields(pfs[0].obj).get("optimizer_state_dict"))
    sd = find_optimizer(osd)
    if sd is not None:
        facts = optimizer_facts(sd, lambda v: fs.scalar(pfs[0], v))
    else:
        base = osd.get("base_optimizer_state")
        groups = [fields(g) for g in base] if isinstance(base, list) else []
        facts = {"param_groups": len(groups),
                 "state_keys": sorted({str(k) for g in groups for k in g}),
                 "tensors": count_tensors(base)}
    for key in ("zero_stage", "partition_count", "dynamic_loss_scale", "clip_grad"):
        if key in osd:
            facts[key] = jsonable(osd[key])
    dp_ranks = sorted({int(DS_OPTIM.match(_base(f)).group(1)) for f in ds.optim_files})
    world = _int(ds.ms.get("dp_world_size"))
    lost = sorted(set(gaps(dp_ranks)) | ({r for r in range(world) if r not in dp_ranks}
                                           if world else set()))
    facts.update(files=len(ds.optim_files), dp_ranks=len(dp_ranks))
    if lost:
        facts["missing_ranks"] = lost
        return Component("optimizer", INCOMPLETE, tuple(ds.optim_files),
                         f"ZeRO optimizer shards for data-parallel rank"
                         f"{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))} are missing: "
                         "DeepSpeed cannot load the optimizer state.", facts)
    stage = facts.get("zero_stage")
    return Component("optimizer", OK, tuple(ds.optim_files),
                     f"ZeRO{f'-{stage}' if stage is not None else ''} optimizer state in "
                     f"{len(ds.optim_files)} shard{'s' if len(ds.optim_files) != 1 else ''} "
                     f"(one per data-parallel rank; resume needs the same {len(dp_ranks)} rank"
                     f"{'s' if len(dp_ranks) != 1 else ''} or a universal conversion), fp32 master "
                     "weights included.", facts)


def ds_scheduler(fs: StateFiles, ds: DeepSpeedParts) -> Component:
    if not ds.ms:
        return missing("scheduler", "no readable model_states file, so the DeepSpeed LR "
                       "scheduler state is unknown.")
    sd = ds.ms.get("lr_scheduler")
    if sd is None:
        return not_needed("scheduler", "DeepSpeed managed no LR scheduler (lr_scheduler is None): "
                          "the LR is constant, or the training script keeps the schedule itself.")
    return scheduler_component(fs, ds.states, sd, ds.model_files[:1], ds.model_files[0])


def ds_progress_facts(ds: DeepSpeedParts) -> dict:
    keys = ("global_steps", "global_samples", "skipped_steps", "dp_world_size", "mp_world_size",
            "ds_version")
    return {k: jsonable(ds.ms[k]) for k in keys if k in ds.ms}


def ds_scaler(fs: StateFiles, ds: DeepSpeedParts) -> Component:
    fp16 = dig(ds.ms, "ds_config", "fp16", "enabled")
    bf16 = dig(ds.ms, "ds_config", "bf16", "enabled")
    source = None
    for f in ds.optim_files[:1] or ds.model_files[:1]:
        pf = fs.pickle(f)
        osd = fields(pf.obj).get("optimizer_state_dict") or fields(pf.obj).get("optimizer")
        if fields(osd).get("loss_scaler") is not None:
            source = (pf, fields(osd)["loss_scaler"], f, fields(osd).get("dynamic_loss_scale"))
    if fp16 is None and not ds.ms:
        return missing("scaler", "no readable model_states file, so whether the run used fp16 "
                       "(and needs its loss scaler) is unknown.")
    if fp16 is not True:
        mode = "bf16" if bf16 is True else "fp16 off"
        return not_needed("scaler", f"ds_config has {mode}: no fp16 loss scaler to restore.",
                          {"fp16": fp16, "bf16": bf16})
    files = ds.optim_files[:1] or ds.model_files[:1]
    bad = damaged_or_unsafe("scaler", files, [fs.pickle(f) for f in files])
    if bad:
        return bad
    if source is None:
        return fp16_scaler_missing("DeepSpeed")
    pf, scaler, f, dynamic = source
    c = scaler_from_state(fs, pf, scaler, (f,), f)
    return Component("scaler", OK, c.files, c.detail, {**c.facts, "dynamic": jsonable(dynamic),
                                                        "fp16": True})


def build_deepspeed(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = deepspeed_parts(det, fs, out)
    universal = [f for f in det.files("optimizer") if f.endswith("zero/")]
    out.add(ds_weights(fs, ds, det.files("weights")) if det.files("weights") else
            missing("weights", f"{det.tag or 'the tag folder'} holds no *model_states.pt: nothing "
                    "to load."))
    out.add(ds_optimizer(fs, ds, universal))
    out.add(ds_scheduler(fs, ds))
    out.add(missing("rng", "DeepSpeed saves no RNG state: the resumed run draws different random "
                    "numbers (dropout, sampling) unless the script saved them."))
    facts = ds_progress_facts(ds)
    out.step = _int(ds.ms.get("global_steps"))
    out.ranks = _int(ds.ms.get("dp_world_size"))
    if ds.ms:
        out.add(Component("progress", OK, tuple(ds.model_files[:1]),
                          f"global step {facts.get('global_steps')}, "
                          f"{_num(facts.get('global_samples'))} samples seen, "
                          f"{_num(facts.get('skipped_steps', 0))} steps skipped for fp16 overflow.",
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
                        f"the {'' if seen is None else _num(seen) + ' '}samples already seen "
                        "itself, or the data restarts from the beginning.",
                        {"stored": False, "global_samples": facts.get("global_samples")}))
    out.add(ds_scaler(fs, ds))
    if det.problems and not det.files("weights"):
        out.add(missing("weights", f"{det.tag or 'the tag folder'} is missing, so nothing "
                        "can be loaded from this checkpoint."))
    return out


# --- HF Trainer -----------------------------------------------------------------------------------

HF_ARGS = ("seed", "data_seed", "per_device_train_batch_size", "gradient_accumulation_steps",
           "ignore_data_skip", "dataloader_drop_last", "max_steps", "num_train_epochs",
           "fp16", "bf16", "save_only_model")
HF_PROGRESS = ("global_step", "epoch", "max_steps", "num_train_epochs", "num_input_tokens_seen",
               "total_flos", "train_batch_size", "logging_steps", "eval_steps", "save_steps",
               "best_metric", "best_global_step", "best_model_checkpoint")


def _weights_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None,
                     fsdp_prefix: str = "pytorch_model_fsdp") -> Component:
    files = det.files("weights")
    plain = [f for f in files if not DS_MODEL.match(_base(f)) and not _in_dcp(det, f)]
    dcp = [rel for rel in det.dcp if rel.startswith(fsdp_prefix)]
    if plain:
        return weights_component(fs, plain)
    if dcp:
        return weights_component(fs, _under(files, dcp[0]), dcp=dcp[0], dcp_prefix="model.")
    if ds is not None and ds.model_files:
        return ds_weights(fs, ds, [f for f in files if f not in plain])
    return missing("weights", "no model weights here: this checkpoint cannot even warm-start "
                   "a run.")


def _in_dcp(det: Detection, f: str) -> bool:
    return any(f.startswith(rel + "/") for rel in det.dcp if rel)


def _optimizer_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None) -> Component:
    files = det.files("optimizer")
    plain = [f for f in files if "/" not in f]
    dcp = [rel for rel in det.dcp if rel.startswith("optimizer")]
    if plain:
        return optimizer_from_pickles(fs, plain)
    if dcp:
        return optimizer_from_dcp(fs, _under(files, dcp[0]), dcp[0], "optimizer.")
    if ds is not None and (ds.optim_files or ds.model_files):
        return ds_optimizer(fs, ds, [f for f in files if f.endswith("zero/")])
    return missing("optimizer", "no optimizer state (saved with save_only_model=True?): "
                   "Adam's moments restart from zero, so this is a warm start, not a resume.")


def _scaler_file(fs: StateFiles, files) -> Component | None:
    files = [f for f in files if _base(f) == "scaler.pt"]
    if not files:
        return None
    pf = fs.pickle(files[0])
    return damaged_or_unsafe("scaler", files, [pf]) or scaler_from_state(
        fs, pf, pf.obj, files, files[0])


def build_hf(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = deepspeed_parts(det, fs, out) if det.variant == "deepspeed" else None
    args: dict = {}
    if "training_args.bin" in det.files("data"):
        pf = fs.pickle("training_args.bin")
        if not _unsafe_note(out, pf):
            args = fields(pf.obj)
    state, why = (fs.json("trainer_state.json") if "trainer_state.json" in det.files("progress")
                  else (None, ""))
    out.add(_weights_sources(fs, det, ds))
    optimizer = _optimizer_sources(fs, det, ds)
    out.add(optimizer)
    out.add(_hf_scheduler(fs, det, ds, optimizer, out))
    rng_files = det.files("rng")
    expected = _int(ds.ms.get("dp_world_size")) if ds else None
    if rng_files:
        rng, out.ranks = rng_component(fs, rng_files, expected=expected)
        out.add(rng)
    else:
        out.add(missing("rng", "no rng_state*.pth: the Trainer only logs an info line and the "
                        "resumed run draws different random numbers (dropout, sampling)."))
    if expected and (out.ranks or 0) < expected:
        out.ranks = expected
    out.add(_hf_progress(det, state, why, out))
    out.add(_hf_data(state, args, det))
    out.add(_hf_scaler(fs, det, ds, args))
    return out


def _hf_scheduler(fs, det, ds, optimizer: Component, out: Found) -> Component:
    files = [f for f in det.files("scheduler") if _base(f) == "scheduler.pt"]
    if files:
        pf = fs.pickle(files[0])
        c = damaged_or_unsafe("scheduler", files, [pf]) or scheduler_component(
            fs, pf, pf.obj, files, files[0])
    elif ds is not None and ds.ms.get("lr_scheduler") is not None:
        return ds_scheduler(fs, ds)
    else:
        c = None
    if ds is not None:
        return c or ds_scheduler(fs, ds)
    if c is None and optimizer.status != MISSING:
        if optimizer.status != OK:  # an unsafe or damaged optimizer keeps its own status
            return missing("scheduler", "no scheduler.pt: HF Trainer skips the optimizer AND "
                           "scheduler load unless both optimizer.pt and scheduler.pt exist.")
        out.components["optimizer"] = Component(
            "optimizer", INCOMPLETE, optimizer.files,
            f"{_names(optimizer.files)} is here but scheduler.pt is not: HF Trainer skips the "
            "optimizer AND scheduler load unless both exist, so both restart fresh.",
            optimizer.facts)
        return missing("scheduler", "no scheduler.pt: HF Trainer skips the optimizer AND scheduler "
                       "load unless both optimizer.pt and scheduler.pt exist, so the LR schedule "
                       "and Adam's moments both restart.")
    if c is None:
        return missing("scheduler", "no scheduler.pt: the LR schedule restarts from its first "
                       "step (warmup again).")
    if optimizer.status == MISSING and c.status == OK:
        return Component("scheduler", INCOMPLETE, c.files,
                         "scheduler.pt is here but no optimizer file: HF Trainer loads neither "
                         "unless both exist, so the LR schedule restarts.", c.facts)
    return c


def _hf_progress(det: Detection, state: dict | None, why: str, out: Found) -> Component:
    if state is None:
        if why:
            return Component("progress", DAMAGED, ("trainer_state.json",),
                             f"trainer_state.json is unreadable ({why}): the resume cannot learn "
                             "its global step.")
        return missing("progress", "no trainer_state.json, which the Trainer writes last: the save "
                       "was probably interrupted, and a resume would start from global step 0.")
    facts = {k: jsonable(state[k]) for k in HF_PROGRESS if k in state}
    log = state.get("log_history")
    if isinstance(log, list):
        facts["log_history_entries"] = len(log)
        if log and isinstance(log[-1], dict):
            facts["last_log"] = jsonable({k: v for k, v in log[-1].items()
                                          if isinstance(v, (int, float, str))})
    callbacks = state.get("stateful_callbacks")
    if isinstance(callbacks, dict):
        facts["stateful_callbacks"] = sorted(callbacks)
    gs = _int(state.get("global_step"))
    out.step = gs
    out.epoch = state.get("epoch") if isinstance(state.get("epoch"), (int, float)) else None
    if gs is None:
        return Component("progress", DAMAGED, ("trainer_state.json",),
                         "trainer_state.json has no integer global_step, which the resume needs.",
                         facts)
    if det.step is not None and det.step != gs:
        out.problems.append(Problem(WARNING, "trainer_state.json", f"global_step is {gs} but the "
                                    f"folder is named for step {det.step}"))
    text = f"trainer_state.json: global step {gs}"
    if _int(state.get("max_steps")):
        text += f" of {state['max_steps']}"
    if out.epoch is not None:
        text += f", epoch {_num(out.epoch)}"
    tokens = _int(state.get("num_input_tokens_seen"))
    if tokens:
        text += f", {tokens:,} input tokens seen"
    return Component("progress", OK, ("trainer_state.json",), text + ".", facts)


def _hf_data(state: dict | None, args: dict, det: Detection) -> Component:
    facts = {"stored": False, "derived_from": "trainer_state.json global_step"}
    facts.update({k: jsonable(args[k]) for k in HF_ARGS if k in args})
    files = tuple(f for f in det.files("data") if f == "trainer_state.json" or args)
    gs = _int(state.get("global_step")) if state else None
    if gs is None:
        return Component("data", MISSING, files, "the Trainer stores no data-loader position and "
                         "derives it from trainer_state.json's global_step, which is unreadable "
                         "or missing: the data would restart from the first batch.", facts)
    facts["global_step"] = gs
    if state.get("epoch") is not None:
        facts["epoch"] = jsonable(state.get("epoch"))
    same = "the same seed"
    if "seed" in args:
        same += f" ({args['seed']})"
    batch = args.get("per_device_train_batch_size")
    accum = args.get("gradient_accumulation_steps")
    if batch is not None:
        same += f", batch size ({batch} x {accum or 1} accumulation)"
    else:
        same += ", batch size"
    if args.get("ignore_data_skip") is True:
        return Component("data", INCOMPLETE, files, "training_args has ignore_data_skip=True: on "
                         "resume the Trainer does not skip the batches already seen, so the epoch "
                         "replays from its start.", facts)
    return Component("data", OK, files, f"not stored: on resume the Trainer skips the batches "
                     f"implied by global step {gs}, which replays the same order only with "
                     f"{same}, data and world size.", facts)


def _hf_scaler(fs, det, ds, args: dict) -> Component:
    c = _scaler_file(fs, det.files("scaler"))
    if c is not None:
        return c
    if ds is not None:
        return ds_scaler(fs, ds)
    if args.get("fp16") is True:
        return fp16_scaler_missing("the Trainer")
    why = "training_args has fp16=False" if args.get("fp16") is False else \
        "the Trainer writes one only for fp16 mixed precision"
    return not_needed("scaler", f"no scaler.pt and {why}: no GradScaler to restore "
                      "(bf16 and fp32 need none).", {"fp16": jsonable(args.get("fp16"))})


# --- accelerate -----------------------------------------------------------------------------------

DL_KEYS = ("_num_yielded", "_sampler_iter_yielded", "_iterator_finished", "_shared_seed",
           "_steps_since_snapshot", "_index_sampler_state", "_sampler_iter_state")


def build_accelerate(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = deepspeed_parts(det, fs, out) if det.variant == "deepspeed" else None
    out.add(_weights_sources(fs, det, ds))
    out.add(_optimizer_sources(fs, det, ds))
    sched = [f for f in det.files("scheduler") if "/" not in f]
    if sched:
        pf = fs.pickle(sched[0])
        out.add(damaged_or_unsafe("scheduler", sched, [pf]) or scheduler_component(
            fs, pf, pf.obj, sched, sched[0]))
    elif ds is not None:
        out.add(ds_scheduler(fs, ds))
    else:
        out.add(missing("scheduler", "no scheduler.bin: either the run had no scheduler, or it was "
                        "not passed to accelerator.prepare(); any LR schedule restarts from its "
                        "first step."))
    if det.files("rng"):
        rng, out.ranks = rng_component(fs, det.files("rng"),
                                       when="restored by load_state (a failure there is only "
                                       "logged at info level)")
        out.add(rng)
    else:
        out.add(missing("rng", "no random_states_*.pkl: the resumed run draws different random "
                        "numbers (dropout, sampling)."))
    out.add(_accelerate_data(fs, det.files("data")))
    out.add(_accelerate_progress(fs, det, out))
    out.add(_scaler_file(fs, det.files("scaler")) or (ds_scaler(fs, ds) if ds else not_needed(
        "scaler", "no scaler.pt: accelerate writes one only when an fp16 GradScaler exists, so "
        "none is needed unless the run used fp16.")))
    return out


def _accelerate_data(fs: StateFiles, files) -> Component:
    if not files:
        return missing("data", "accelerate saved no data-loader position (no dl_state_dict.bin; "
                       "use_stateful_dataloader was off): the data restarts at the epoch start "
                       "unless the script calls skip_first_batches.", {"stored": False})
    pfs = [fs.pickle(f) for f in files]
    bad = damaged_or_unsafe("data", files, pfs)
    if bad:
        return bad
    facts: dict = {"stored": True}
    parts = []
    for pf in pfs:
        f = fields(pf.obj)
        if _base(pf.name).startswith("dl_state_dict"):
            snap = fields(f.get("_snapshot"))
            main = fields(snap.get("_main_snapshot")) if snap else f
            entry = {k: jsonable(main[k], lambda v, pf=pf: fs.scalar(pf, v))
                     for k in DL_KEYS if k in main}
            entry.update({k: jsonable(f[k]) for k in DL_KEYS if k in f and k not in entry})
            entry["keys"] = sorted(str(k) for k in f)
            facts[pf.name] = entry
            n = entry.get("_num_yielded", entry.get("_sampler_iter_yielded"))
            parts.append(f"{pf.name} (StatefulDataLoader, {_num(n)} batches yielded)")
        else:
            qual = pf.obj.qualname if isinstance(pf.obj, Opaque) else type(pf.obj).__name__
            facts[pf.name] = {"object": qual, **{str(k): jsonable(v) for k, v in f.items()}}
            parts.append(f"{pf.name} (a pickled {qual.rsplit('.', 1)[-1]})")
    return Component("data", OK, tuple(files), f"data position saved in {', '.join(parts)}.", facts)


def _accelerate_progress(fs: StateFiles, det: Detection, out: Found) -> Component:
    facts: dict = {"stored": False}
    if det.step is not None:
        facts["step_from_name"] = det.step
    files = det.files("progress")
    if files:
        pfs = [fs.pickle(f) for f in files]
        bad = damaged_or_unsafe("progress", files, pfs)
        if bad:
            return bad
        facts["custom"] = {pf.name: jsonable(pf.obj, lambda v, pf=pf: fs.scalar(pf, v))
                           for pf in pfs}
        shown = [f"{k} {_num(v)}" for custom in facts["custom"].values() if isinstance(custom, dict)
                 for k, v in custom.items() if isinstance(v, (int, float))
                 and ("step" in k.lower() or k.lower() in ("epoch", "iteration"))]
        if shown:
            return Component("progress", OK, tuple(files), f"accelerate saves no global step, but "
                             f"{_names(files)} (registered by your script) holds "
                             f"{', '.join(shown[:4])}.", facts)
        return Component("progress", MISSING, tuple(files), f"accelerate saves no global step, and "
                         f"{_names(files)} (registered by your script) holds no step counter "
                         "that could be recognised.", facts)
    where = (f"only the folder name ({det.step_source}) says step {det.step}"
             if det.step is not None else "nothing here says which step this was")
    return Component("progress", MISSING, (), f"accelerate saves no global step (the step in "
                     f"random_states_*.pkl counts gradient-accumulation micro-steps); {where}, so "
                     "the script must restore it itself.", facts)


# --- Lightning ------------------------------------------------------------------------------------

LOOP_STEP = ("epoch_loop.automatic_optimization.optim_progress", "optimizer", "step", "total",
             "completed")
LOOP_MANUAL_STEP = ("epoch_loop.manual_optimization.optim_step_progress", "total", "completed")
LOOP_EPOCH = ("epoch_progress", "current", "completed")
LOOP_BATCH = ("epoch_loop.batch_progress", "current", "completed")
LOOP_LAST_BATCH = ("epoch_loop.batch_progress", "is_last_batch")
LOOP_STEPPED = ("epoch_loop.state_dict", "_batches_that_stepped")
LOOP_LOADER = ("state_dict", "combined_loader")
SCALER_KEYS = ("MixedPrecision", "native_amp_scaling_state")


def build_lightning(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    if det.variant == "folder" or not det.roles:
        for kind in COMPONENTS:
            out.add(missing(kind, "this .ckpt folder holds neither meta.pt (FSDP) nor a "
                            "DeepSpeed tag, so nothing of the training state can be read."))
        return out
    if det.variant == "deepspeed":
        ds = deepspeed_parts(det, fs, out)
        ck, pf, where = ds.ms, ds.states, (ds.model_files[0] if ds.model_files else "model_states")
        out.add(ds_weights(fs, ds, det.files("weights")) if ds.model_files else missing(
            "weights", "no DeepSpeed model_states file: nothing to load."))
        out.add(ds_optimizer(fs, ds, []))
    elif det.variant == "sharded":
        pf, where = fs.pickle("meta.pt"), "meta.pt"
        ck = {} if _unsafe_note(out, pf) else fields(pf.obj)
        files = det.files("weights")
        out.add(weights_component(fs, files, dcp="", dcp_prefix="model."))
        out.add(optimizer_from_dcp(fs, det.files("optimizer"), "", "optimizer_0."))
    else:
        name = det.files("weights")[0]
        pf, where = fs.pickle(name), name
        bad = damaged_or_unsafe("weights", (name,), [pf])
        if bad:
            for kind in COMPONENTS:
                out.add(Component(kind, bad.status, (name,), bad.detail, bad.facts)
                        if kind != "rng" else _lightning_rng())
            return out
        ck = fields(pf.obj)
        out.add(weights_component(fs, (name,), key_in=lambda o: fields(o).get("state_dict")))
        out.add(_lightning_optimizer(fs, pf, ck, name))
    scalar = (lambda v: fs.scalar(pf, v)) if pf is not None else (lambda v: None)
    out.add(_lightning_scheduler(fs, pf, ck, det.files("scheduler"), where))
    out.add(_lightning_rng())
    out.add(_lightning_progress(ck, det.files("progress"), where, scalar, out))
    out.add(_lightning_data(ck, det.files("data"), where, scalar))
    out.add(_lightning_scaler(fs, pf, ck, det.files("scaler"), where))
    if det.variant == "deepspeed" and out.ranks is None:
        out.ranks = _int(ck.get("dp_world_size"))
    return out


def _lightning_rng() -> Component:
    return missing("rng", "Lightning never saves RNG state: dropout and sampling after the resume "
                   "differ from an uninterrupted run.")


def _lightning_optimizer(fs: StateFiles, pf: PickleFile, ck: dict, name: str) -> Component:
    states = ck.get("optimizer_states")
    if states is None:
        return missing("optimizer", f"{name} has no optimizer_states (saved with "
                       "save_weights_only=True): a warm start only; Adam's moments restart.")
    if not isinstance(states, list) or not states:
        return missing("optimizer", f"{name} has an empty optimizer_states list: no optimizer "
                       "state to restore.")
    sd = find_optimizer(states[0])
    if sd is None:
        return Component("optimizer", DAMAGED, (name,), f"optimizer_states[0] in {name} is not an "
                         "optimizer state_dict.")
    facts = optimizer_facts(sd, lambda v: fs.scalar(pf, v))
    facts["optimizers"] = len(states)
    return Component("optimizer", OK, (name,), optimizer_sentence(facts, name), facts)


def _lightning_scheduler(fs, pf, ck: dict, files, where: str) -> Component:
    scheds = ck.get("lr_schedulers")
    if scheds is None:
        return missing("scheduler", f"{where} has no lr_schedulers (a weights-only save): any LR "
                       "schedule restarts from its first step.")
    if not isinstance(scheds, list) or not scheds:
        return not_needed("scheduler", "no LR scheduler was configured (lr_schedulers is empty).",
                          {"schedulers": 0})
    c = scheduler_component(fs, pf, scheds[0], files, where)
    return Component("scheduler", c.status, c.files, c.detail, {**c.facts,
                                                                  "schedulers": len(scheds)})


def _lightning_progress(ck: dict, files, where: str, scalar, out: Found) -> Component:
    fit = dig(ck, "loops", "fit_loop")
    facts: dict = {}
    if "pytorch-lightning_version" in ck:
        facts["lightning_version"] = jsonable(ck["pytorch-lightning_version"])
    for key in ("global_step", "epoch"):
        if key in ck:
            facts[key] = jsonable(ck[key], scalar)
    if fit is not None:
        for name, path in (("optimizer_steps", LOOP_STEP), ("manual_steps", LOOP_MANUAL_STEP),
                           ("epochs_completed", LOOP_EPOCH), ("batch_in_epoch", LOOP_BATCH),
                           ("is_last_batch", LOOP_LAST_BATCH),
                           ("batches_that_stepped", LOOP_STEPPED)):
            v = dig(fit, *path)
            if v is not None:
                facts[name] = jsonable(v, scalar)
    step = _int(facts.get("optimizer_steps")) or _int(facts.get("manual_steps"))
    if step is None:
        step = _int(facts.get("global_step"))
    out.step = step
    out.epoch = facts.get("epoch") if isinstance(facts.get("epoch"), (int, float)) else None
    facts["step"] = step
    if fit is None and step is None:
        return missing("progress", f"{where} has no loops and no global_step: the resume starts "
                       "at step 0.", facts)
    text = f"global step {step}, epoch {_num(facts.get('epoch'))}"
    if facts.get("batch_in_epoch") is not None:
        text += f", {_num(facts['batch_in_epoch'])} batches into the epoch"
    if fit is None:
        return Component("progress", INCOMPLETE, tuple(files), f"{where} has only the legacy "
                         f"global_step/epoch ({text}), no loops: Lightning < 1.6 format.", facts)
    return Component("progress", OK, tuple(files), f"loops.fit_loop: {text}.", facts)


def _lightning_data(ck: dict, files, where: str, scalar) -> Component:
    fit = dig(ck, "loops", "fit_loop")
    loader = dig(fit, *LOOP_LOADER) if fit is not None else None
    batch = dig(fit, *LOOP_BATCH) if fit is not None else None
    last = dig(fit, *LOOP_LAST_BATCH) if fit is not None else None
    facts = {"stored": loader is not None, "batch_in_epoch": jsonable(batch, scalar),
             "is_last_batch": jsonable(last)}
    if loader is not None:
        facts["combined_loader"] = jsonable(loader, scalar)
        return Component("data", OK, tuple(files), "loops.fit_loop holds the stateful data "
                         "loader's position (combined_loader).", facts)
    if fit is None:
        return missing("data", f"{where} has no loops: the data position is unknown.", facts)
    if isinstance(batch, int) and batch > 0 and last is not True:
        return Component("data", MISSING, tuple(files), f"saved mid-epoch ({batch} batches in) "
                         "with a loader that is not stateful: Lightning warns and replays the "
                         "epoch from its first batch.", facts)
    return not_needed("data", "saved at an epoch boundary: the next epoch starts fresh, as it "
                      "would have without the interruption.", facts)


def _lightning_scaler(fs, pf, ck: dict, files, where: str) -> Component:
    for key in SCALER_KEYS:
        if isinstance(ck.get(key), dict) and ck[key]:
            return scaler_from_state(fs, pf, ck[key], files, f"{where} ({key})")
    return not_needed("scaler", "no MixedPrecision scaler state: the run did not use 16-mixed "
                      "precision (bf16 and fp32 need no scaler).")


# --- torchtitan and plain DCP ---------------------------------------------------------------------

TITAN_STATE = ("optimizer.", "lr_scheduler.", "dataloader.", "train_state.")


def _dcp_values(fs: StateFiles, rel: str, d: DcpCheckpoint, prefix: str) -> dict:
    """Non-tensor DCP items under `prefix`, decoded when small and plain; tensors as labels."""
    values = {}
    for key, e in d.entries.items():
        if key.startswith(prefix):
            values[key[len(prefix):]] = jsonable(fs.dcp_value(rel, e))
    return values


def _unsafe_items(kind: str, files, values: dict, prefix: str) -> Component | None:
    bad = [k for k, v in values.items() if isinstance(v, str) and v.startswith("unsafe call")]
    if not bad:
        return None
    return Component(kind, UNSAFE, tuple(files), f"DCP item {prefix}{bad[0]} holds "
                     f"{values[bad[0]]}; torch's default DCP load would execute it.",
                     {"unsafe_items": [prefix + k for k in bad]})


def build_torchtitan(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    if det.variant == "hf":
        out.add(weights_component(fs, det.files("weights")))
        for kind, what in (("optimizer", "no optimizer"), ("scheduler", "no LR scheduler"),
                           ("data", "no data-loader"), ("progress", "no train_state")):
            out.add(missing(kind, f"a last_save_in_hf export: model weights only, {what} state, "
                            "so this can only warm-start a run."))
        out.add(_titan_rng())
        out.add(not_needed("scaler", "torchtitan trains in bf16/fp32 and has no grad scaler."))
        return out
    return _dcp_build(det, fs, out, titan=True)


def build_dcp(det: Detection, fs: StateFiles) -> Found:
    return _dcp_build(det, fs, Found(), titan=False)


def _titan_rng() -> Component:
    return missing("rng", "torchtitan never saves RNG state: random streams (dropout, sampling) "
                   "restart on resume.")


def _dcp_build(det: Detection, fs: StateFiles, out: Found, titan: bool) -> Found:
    files = det.files("weights")
    d = fs.dcp("")
    bad = dcp_status("weights", files, d)
    if bad:
        for kind in COMPONENTS:
            out.add(Component(kind, bad.status, bad.files, bad.detail) if kind != "rng"
                    else (_titan_rng() if titan else missing("rng", "no RNG state.")))
        return out
    keys = d.entries
    has_model_prefix = any(k.startswith("model.") for k in keys)
    prefix = "model." if has_model_prefix or not titan else ""
    out.add(weights_component(fs, files, dcp="", dcp_prefix=prefix))
    out.add(optimizer_from_dcp(fs, files, "", "optimizer."))
    ranks = {m.group(1) for f in d.files if (m := re.match(r"^__(\d+)_\d+\.distcp$", f))}
    out.ranks = len(ranks) or None
    if not titan:
        for kind, pre in (("scheduler", "lr_scheduler."), ("data", "dataloader."),
                          ("progress", "train_state.")):
            if any(k.startswith(pre) for k in keys):
                vals = _dcp_values(fs, "", d, pre)
                out.add(_unsafe_items(kind, files, vals, pre) or Component(
                    kind, OK, tuple(files), f"{pre}* keys in the DCP checkpoint: "
                    f"{_names(sorted(vals), 5)}.", {"keys": vals}))
            else:
                out.add(missing(kind, f"a plain DCP checkpoint with no {pre}* keys: which "
                                "framework wrote it is unknown, so this state is not found."))
        out.add(missing("rng", "DCP stores no RNG state unless the training script adds it."))
        out.add(not_needed("scaler", "no grad-scaler keys in this DCP checkpoint."))
        return out
    sched = _dcp_values(fs, "", d, "lr_scheduler.")
    if _unsafe_items("scheduler", files, sched, "lr_scheduler."):
        out.add(_unsafe_items("scheduler", files, sched, "lr_scheduler."))
    elif sched:
        out.add(Component("scheduler", OK, tuple(files), f"lr_scheduler.last_epoch is "
                          f"{_num(sched.get('last_epoch'))} (torchtitan schedules are stateless "
                          "lambdas, so this is all they need).", sched))
    else:
        out.add(missing("scheduler", "no lr_scheduler.* keys: the LR schedule restarts (warmup "
                        "again) on resume."))
    out.add(_titan_data(fs, d, files, out))
    train = _dcp_values(fs, "", d, "train_state.")
    step = train.get("step")
    out.step = _int(step)
    if _unsafe_items("progress", files, train, "train_state."):
        out.add(_unsafe_items("progress", files, train, "train_state."))
    elif train:
        tokens = train.get("ntokens_seen")
        out.add(Component("progress", OK, tuple(files), f"train_state.step is {_num(step)}"
                          + (f", {tokens:,} tokens seen." if _int(tokens) else "."), train))
    else:
        out.add(missing("progress", "no train_state.* keys: the step is known only from the "
                        f"folder name ({det.step_source or 'none'})."))
    if det.step is not None and out.step is not None and out.step != det.step:
        out.problems.append(Problem(WARNING, None, f"train_state.step is {out.step} but the folder "
                                    f"is named step-{det.step}"))
    out.add(_titan_rng())
    out.add(not_needed("scaler", "torchtitan trains in bf16/fp32 and has no grad scaler."))
    return out


def _titan_data(fs: StateFiles, d: DcpCheckpoint, files, out: Found) -> Component:
    vals = _dcp_values(fs, "", d, "dataloader.")
    unsafe = _unsafe_items("data", files, vals, "dataloader.")
    if unsafe:
        return unsafe
    if not vals:
        return missing("data", "no dataloader.* keys: the data restarts from the beginning on "
                       "resume.", {"stored": False})
    world = vals.get("dp_world_size", vals.get("world_size"))
    per_rank = sorted({k.split(".")[0] for k in vals if k.startswith("dp_rank_")},
                      key=lambda k: int(re.sub(r"\D", "", k) or 0))
    facts = {"stored": True, "world_size": jsonable(world), "per_rank": per_rank,
             "state": dict(sorted(vals.items())[:50])}
    if _int(world):
        out.ranks = world
    elif per_rank:
        out.ranks = len(per_rank)
    expected = _int(world)
    if expected and len(per_rank) < expected:
        return Component("data", INCOMPLETE, tuple(files), f"data-loader state for only "
                         f"{len(per_rank)} of {expected} data-parallel ranks.", facts)
    return Component("data", OK, tuple(files), f"data-loader position for {len(per_rank)} "
                     f"data-parallel rank{'s' if len(per_rank) != 1 else ''} "
                     f"(dp_world_size {_num(world)}); resuming on a different number of ranks "
                     "loses or refuses it.", facts)


# --- Megatron -------------------------------------------------------------------------------------

MEGATRON_SCHED = ("max_lr", "min_lr", "lr_warmup_steps", "num_steps", "lr_decay_steps",
                  "lr_decay_style", "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps")


def build_megatron(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    main = [f for f in det.files("progress") if _base(f) == "model_optim_rng.pt"]
    if det.variant in ("torch_dist", "torch_dcp"):
        return _megatron_dist(det, fs, out)
    if not main:
        why = det.problems[0].message if det.problems else "no model_optim_rng.pt was found"
        for kind in COMPONENTS:
            out.add(missing(kind, f"nothing to read: {why}."))
        return out
    pf = fs.pickle(main[0])
    bad = damaged_or_unsafe("progress", main, [pf])
    if bad:
        for kind in COMPONENTS:
            out.add(Component(kind, bad.status, tuple(det.files(kind)) or bad.files, bad.detail))
        return out
    ck = fields(pf.obj)
    args = fields(ck.get("args"))
    scalar = lambda v: fs.scalar(pf, v)  # noqa: E731
    model_key = lambda o: {k: v for k, v in fields(o).items()  # noqa: E731
                           if str(k) == "model" or re.match(r"^model\d+$", str(k))}
    out.add(weights_component(fs, det.files("weights"), key_in=model_key))
    opt = ck.get("optimizer")
    if opt is None:
        out.add(missing("optimizer", f"{main[0]} has no optimizer (saved with --no-save-optim): "
                        "a warm start only.", {}))
    else:
        sd = find_optimizer(opt)
        facts = optimizer_facts(sd, scalar) if sd else {"keys": sorted(map(str, fields(opt)))}
        files = det.files("optimizer")
        text = optimizer_sentence(facts, main[0]) if sd else (
            f"{main[0]} holds the optimizer ({', '.join(facts['keys'][:5])}).")
        if any(_base(f) == "distrib_optim.pt" for f in files):
            text = text[:-1] + "; the distributed optimizer's state is in distrib_optim.pt."
        out.add(Component("optimizer", OK, tuple(files), text, facts))
    sched = ck.get("opt_param_scheduler")
    out.add(scheduler_component(fs, pf, sched, main[:1], main[0]) if sched is not None else
            missing("scheduler", f"{main[0]} has no opt_param_scheduler: the LR schedule "
                    "restarts."))
    out.add(_megatron_rng(fs, det.files("rng")))
    iteration = _int(ck.get("iteration"))
    out.step = iteration if iteration is not None else det.step
    facts = {"iteration": iteration, "checkpoint_version": jsonable(ck.get("checkpoint_version")),
             "num_floating_point_operations_so_far":
                 jsonable(ck.get("num_floating_point_operations_so_far"))}
    out.add(Component("progress", OK if iteration is not None else MISSING, tuple(main[:1]),
                      f"iteration {iteration}." if iteration is not None else
                      f"{main[0]} has no iteration: the resume would start from 0.", facts))
    data = {k: jsonable(args[k]) for k in ("consumed_train_samples", "consumed_valid_samples",
                                           "skipped_train_samples") if k in args}
    if "consumed_train_samples" in data:
        out.add(Component("data", OK, tuple(main[:1]), f"args.consumed_train_samples is "
                          f"{_num(data['consumed_train_samples'])}: the data loader resumes "
                          "right after those samples.", {"stored": True, **data}))
    else:
        out.add(missing("data", "args has no consumed_train_samples: the data restarts from the "
                        "first sample.", {"stored": False}))
    out.ranks = _int(args.get("world_size"))
    out.add(_megatron_scaler(fs, pf, opt, args, main[0]))
    parallel = {k: args[k] for k in ("world_size", "tensor_model_parallel_size",
                                     "pipeline_model_parallel_size") if _int(args.get(k))}
    if parallel:
        prog = out.components["progress"]
        out.add(Component(prog.kind, prog.status, prog.files, prog.detail,
                          {**prog.facts, "parallel": parallel}))
    return out


def _megatron_rng(fs: StateFiles, files) -> Component:
    if not files:
        return missing("rng", "no model_optim_rng.pt to read RNG state from.")
    per: dict[str, list[str]] = {}
    pfs = [fs.pickle(f) for f in files[:MAX_RANK_FILES]]
    bad = damaged_or_unsafe("rng", files, pfs)
    if bad:
        return bad
    for f, pf in zip(files, pfs):
        rank_dir = f.rsplit("/", 2)[-2] if "/" in f else f
        states = fields(pf.obj).get("rng_state")
        if states is None and "random_rng_state" in fields(pf.obj):
            states = [pf.obj]  # very old checkpoints keep the five keys at top level
        if isinstance(states, dict):
            states = [states]
        for i, st in enumerate(states or []):
            key = rank_dir if len(states) == 1 else f"{rank_dir}#{i}"
            per[key] = sorted({RNG_NAMES.get(str(k), str(k)) for k in fields(st)})
    if not per:
        return missing("rng", "model_optim_rng.pt has no rng_state (saved with --no-save-rng): "
                       "random streams restart on resume.")
    gens = sorted({g for keys in per.values() for g in keys})
    return Component("rng", OK, tuple(files), f"RNG state for {len(per)} model-parallel "
                     f"rank{'s' if len(per) != 1 else ''} ({', '.join(gens)}); restored unless "
                     "--finetune or --no-load-rng.", {"ranks": per})


def _megatron_scaler(fs, pf, opt, args: dict, where: str) -> Component:
    scaler = dig(opt, "grad_scaler") if opt is not None else None
    fp16 = args.get("fp16")
    if fp16 is not True:
        return not_needed("scaler", f"args.fp16 is {fp16}: no fp16 grad scaler to restore.",
                          {"fp16": jsonable(fp16)})
    if not fields(scaler):
        return fp16_scaler_missing("Megatron")
    return scaler_from_state(fs, pf, scaler, (where,), f"{where} (optimizer.grad_scaler)")


def _megatron_dist(det: Detection, fs: StateFiles, out: Found) -> Found:
    files = det.files("weights")
    rel = det.dcp[0] if det.dcp else ""
    d = fs.dcp(rel)
    bad = dcp_status("weights", files, d)
    if bad:
        for kind in COMPONENTS:
            out.add(Component(kind, bad.status, bad.files, bad.detail))
        return out
    keys = list(d.entries)
    opt = [k for k in keys if k.startswith("optimizer.")]
    n_model = sum(1 for k, e in d.entries.items() if e.kind == "tensor" and not k.startswith(
        ("optimizer.", "rng_state", "common_state")))
    out.add(Component("weights", OK if n_model else MISSING, tuple(files),
                      f"{n_model:,} model tensors in Megatron dist checkpointing (DCP).",
                      {"format": "dcp", "tensors": n_model}))
    out.add(optimizer_from_dcp(fs, files, rel, "optimizer.") if opt else missing(
        "optimizer", "no optimizer.* keys (saved with --no-save-optim): a warm start only."))
    rng = sorted(k for k in keys if k.startswith("rng_state"))
    out.add(Component("rng", OK, tuple(files), f"{len(rng)} rng_state shard objects.",
                      {"keys": rng}) if rng else missing(
        "rng", "no rng_state/* objects (saved with --no-save-rng): random streams restart."))
    common = [f for f in det.files("progress") if _base(f) == "common.pt"]
    if common:
        pf = fs.pickle(common[0])
        ck = {} if pf.unsafe else fields(pf.obj)
        iteration = _int(ck.get("iteration"))
        out.step = iteration
        out.add(Component("progress", OK if iteration is not None else MISSING, tuple(common),
                          f"common.pt: iteration {iteration}.", {"iteration": iteration}))
        sched = ck.get("opt_param_scheduler")
        out.add(scheduler_component(fs, pf, sched, common, common[0]) if sched is not None
                else missing("scheduler", "common.pt has no opt_param_scheduler."))
        consumed = dig(ck, "args", "consumed_train_samples")
        out.add(Component("data", OK, tuple(common), f"args.consumed_train_samples is "
                          f"{_num(consumed)}.", {"stored": True, "consumed_train_samples":
                                                 jsonable(consumed)})
                if consumed is not None else missing("data", "no consumed_train_samples."))
    else:
        stored = [k for k in keys if k.startswith("common_state")]
        for kind in ("progress", "scheduler", "data"):
            out.add(Component(kind, OK if stored else MISSING, tuple(files),
                              "kept in the DCP common_state object (args, iteration, "
                              "opt_param_scheduler); not decoded here." if stored else
                              "no common_state object and no common.pt.", {"keys": stored}))
    out.add(not_needed("scaler", "grad scaler state, if any, is inside the optimizer keys."))
    return out


# --- weights only, and nothing known --------------------------------------------------------------

def build_safetensors(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    out.add(weights_component(fs, det.files("weights")))
    for kind in ("optimizer", "scheduler", "rng", "data", "progress"):
        out.add(missing(kind, "a weights-only folder: no training state, so this can only "
                        "warm-start a run."))
    out.add(not_needed("scaler", "weights only: there is no run to resume."))
    return out


def build_unknown(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    for kind in COMPONENTS:
        out.add(missing(kind, "no framework's checkpoint files were recognised here."))
    return out


BUILDERS: dict[str, Callable[[Detection, StateFiles], Found]] = {
    "hf-trainer": build_hf, "accelerate": build_accelerate, "lightning": build_lightning,
    "torchtitan": build_torchtitan, "dcp": build_dcp, "deepspeed": build_deepspeed,
    "megatron": build_megatron, "safetensors": build_safetensors, "unknown": build_unknown,
}


def training_state(path: str) -> TrainingState:
    """Detect the framework at `path` and describe all seven components. Never raises for a
    damaged or malicious file: those become statuses and problems."""
    det = detect(path)
    fs = StateFiles(det.root)
    try:
        found = BUILDERS.get(det.framework, build_unknown)(det, fs)
    finally:
        fs.close()
    comps = {k: found.components.get(k) or missing(k, "nothing in this checkpoint holds it.")
             for k in COMPONENTS}
    step = found.step if found.step is not None else det.step
    epoch = found.epoch if found.epoch is not None else det.epoch
    problems = list(det.problems) + fs.problems + found.problems
    return TrainingState(det.framework, step, epoch, found.ranks, comps, tuple(fs.read),
                         tuple(dict.fromkeys(problems)))
