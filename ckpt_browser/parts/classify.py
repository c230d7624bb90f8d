"""Find the parts of a pickled file by what they hold (FORMATS.md "State by content").

One walk down the object graph: at each node the signatures are tried in order (optimizer,
scheduler, scaler, RNG, data position, weights); a node that matches becomes a Part and is not
entered further, except an optimizer, whose loss scaler may sit inside it. Anything else is a
container to look into: counters are noted on the way. Key names only break ties (EMA copies,
config records, a disabled scaler's `{}`), never decide alone what a tensor is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckpt_browser.parts import signatures as sig
from ckpt_browser.standins import Opaque, TensorRef

MAX_DEPTH = 12
MAX_ITEMS = 512  # list items looked into (a param_shapes list, an RNG list per device ...)


@dataclass(frozen=True)
class Found:
    """One recognised part: its kind, where it is, the node itself, and why."""

    kind: str  # weights, ema, optimizer, scheduler, scaler, rng, data, progress, config
    path: str  # dotted, as readers.torchfile.walk names the tensors under it
    node: Any
    what: str

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]


def classify(obj) -> list[Found]:
    """Every part of one file's object graph, outermost first."""
    out: list[Found] = []
    if type(obj) is TensorRef and not sig.rng_leaf(obj):
        return [Found("weights", "", obj, "a tensor saved on its own")]
    if type(obj) in (list, tuple) and obj and all(type(v) is TensorRef for v in obj) \
            and not sig.rng_kinds(obj):
        return [Found("weights", "", obj, f"a list of {len(obj)} tensors")]
    _visit(obj, "", "", 0, out, {})
    return out


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _visit(node, path: str, key: str, depth: int, out: list[Found], seen: dict) -> None:
    """`seen`: (id, key) of each container visited -> the parts found in it, by path below it.
    An object the pickle shares (memoised, reached by many paths: a Learner's data loaders)
    is searched once under each key and its parts said again under each other path."""
    if depth > MAX_DEPTH:
        return
    kind = type(node)
    if kind is dict or kind is Opaque or kind is list or kind is tuple:
        memo = (id(node), key)
        done = seen.get(memo)
        if done is not None:
            out.extend(Found(f.kind, path + rel, f.node, f.what) for rel, f in done)
            return
        start = len(out)
        _container(node, kind, path, key, depth, out, seen)
        seen[memo] = [(f.path[len(path):], f) for f in out[start:]]
        return
    if kind is TensorRef:
        leaf = sig.rng_leaf(node)
        if leaf:
            out.append(Found("rng", path, node, f"{leaf} RNG state"))
        elif node.numel == 1 and node.dtype.startswith(("I", "U")) and sig.counter_kind(key, 1):
            out.append(Found("progress", path, node, f"{sig.counter_kind(key, 1)} counter"))
        return
    if kind is int or kind is sig.Unread:
        counter = sig.counter_kind(key, node)
        if counter:
            out.append(Found("progress", path, node, f"{counter} counter"))
        return
    if key == "loss_scale" and kind is float:
        out.append(Found("scaler", path, node, "loss scale"))


def _container(node, kind, path: str, key: str, depth: int, out: list[Found],
               seen: dict) -> None:
    if kind in (list, tuple):
        _sequence(node, path, key, depth, out, seen)
        return
    f = sig.fields(node)
    if kind is Opaque and (node.qualname in ("argparse.Namespace", "types.SimpleNamespace")
                           or node.qualname.endswith(("TrainingArguments", "Config", "Args"))):
        out.append(Found("config", path, node, node.qualname))
        return
    if sig.module_record(node):
        ema = sig.EMA_NAMES.search(key)
        out.append(Found("ema" if ema else "weights", path, node,
                         f"a pickled {node.qualname} module"))
        return
    found = _part(f, node, key)
    if found is not None:
        out.append(Found(found[0], path, node, found[1]))
        if found[0] == "optimizer":
            _scalers_inside(f, path, out)
        return
    if sig.CONFIG_NAMES.match(key) and not sig.tensor_count(f):
        out.append(Found("config", path, node, f"settings ({key})"))
        return
    # Composer's Timestamp: its state_dict, under "timestamp", or under its class name there
    if key in ("timestamp", "Timestamp") and "epoch" in f and "batch" in f:
        out.append(Found("progress", path, node, "Composer timestamp"))
        return
    for k, v in f.items():
        _visit(v, _join(path, k), str(k), depth + 1, out, seen)


def _part(f: dict, node, key: str) -> tuple[str, str] | None:
    what = sig.optimizer_kind(f)
    if what:
        return "optimizer", what
    what = sig.scheduler_kind(f)
    if what:
        return "scheduler", what
    what = sig.scaler_kind(f, key, node)
    if what:
        return "scaler", what
    kinds = sig.rng_kinds(node)
    if kinds:
        return "rng", "RNG state (" + ", ".join(dict.fromkeys(kinds)) + ")"
    what = sig.data_kind(f, key)
    if what:
        return "data", what
    if sig.state_dict_like(f):
        return ("ema" if sig.EMA_NAMES.search(key) else "weights"), "a state_dict of tensors"
    if sig.SCHEDULER_NAMES.match(key) and f and all(
            type(v) in sig.PLAIN or type(v) is list for v in f.values()):
        return "scheduler", f"LR scheduler state ({key})"
    return None


def _sequence(node, path: str, key: str, depth: int, out: list[Found], seen: dict) -> None:
    kinds = sig.rng_kinds(node)
    if kinds:
        out.append(Found("rng", path, node, "RNG states (" + ", ".join(dict.fromkeys(kinds))
                         + ")"))
        return
    if sig.scheduler_list(node):
        out.append(Found("scheduler", path, node, f"{len(node)} LR scheduler state"
                         f"{'s' if len(node) != 1 else ''}"))
        return
    for i, v in enumerate(node[:MAX_ITEMS]):
        if type(v) in (dict, Opaque, list, tuple, TensorRef):
            _visit(v, _join(path, i), str(i), depth + 1, out, seen)


def _scalers_inside(f: dict, path: str, out: list[Found]) -> None:
    """A loss scaler kept inside the optimizer's state (an fp16 optimizer wrapper's)."""
    for k, v in f.items():
        what = sig.scaler_kind(sig.fields(v), str(k), v)
        if what:
            out.append(Found("scaler", _join(path, k), v, what))
        elif k == "loss_scale" and type(v) is float:
            out.append(Found("scaler", _join(path, k), v, "fairseq loss scale"))


def kinds_of(parts) -> dict[str, str]:
    """Part path -> kind, for `innermost`; the first part found at a path wins."""
    kinds: dict[str, str] = {}
    for p in parts:
        kinds.setdefault(p.path, p.kind)
    return kinds


def innermost(kinds: dict[str, str], path: str) -> str | None:
    """The kind of the innermost part holding `path` (`kinds_of`); None when none does, or
    when it is settings ("config"). A lookup per level of the path, whatever the parts."""
    end = len(path)
    while end > 0:
        kind = kinds.get(path[:end])
        if kind is not None:
            return None if kind == "config" else kind
        end = path.rfind(".", 0, end)
    kind = kinds.get("")
    return None if kind in (None, "config") else kind


def component_at(parts: list[Found], path: str) -> str:
    """The kind of the innermost part holding `path` ("other" when none does)."""
    return innermost(kinds_of(parts), path) or "other"
