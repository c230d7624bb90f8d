"""Naming an optimizer's ids from the checkpoint's own weights (parts.mapping says
when that is certain), for any builder: a custom loop's single file, HF Trainer's optimizer.pt
beside its weights, accelerate's optimizer.bin ..."""

from __future__ import annotations

from dataclasses import replace

from ckpt_browser.model import Checkpoint, Component
from ckpt_browser.parts.mapping import IdNames, name_ids
from ckpt_browser.parts.signatures import fields
from ckpt_browser.parts.tag import named_weights
from ckpt_browser.readers.files import PICKLE_FORMATS
from ckpt_browser.standins import PickleFile

WRAPPERS = ("optimizer_state_dict", "base_optimizer_state", "optimizer", "optimizer_states")
UNORDERED = {"safetensors": "safetensors files", "dcp-metadata": "a DCP folder"}


def model_weights(ckpt: Checkpoint) -> tuple[list, bool, str]:
    """(name, tensor) of the model weights, whether they are in saved order, and where they
    are. Pickled state dicts keep the model's order (shards in name order); safetensors
    headers and DCP metadata do not."""
    pickled = [x for f in ckpt.files if f.format in PICKLE_FORMATS for x in named_weights(f)]
    if pickled:
        return pickled, True, "pickled weights"
    for fmt, where in UNORDERED.items():
        named = [x for f in ckpt.files if f.format == fmt for x in named_weights(f)]
        if named:
            return named, False, where
    return [], True, ""


def find_with_path(obj, path: str = "", depth: int = 0) -> tuple[str, dict] | None:
    """(dotted path, fields) of the torch optimizer state_dict inside a wrapper's dict."""
    f = fields(obj)
    if isinstance(f.get("state"), dict) and isinstance(f.get("param_groups"), list):
        return path, f
    if depth >= 4:
        return None
    for key in WRAPPERS:
        inner, at = f.get(key), f"{path}.{key}" if path else key
        if isinstance(inner, list) and inner:
            inner, at = inner[0], f"{at}.0"
        found = find_with_path(inner, at, depth + 1) if inner is not None else None
        if found is not None:
            return found
    return None


def ids_named(ckpt: Checkpoint, sd: dict) -> IdNames:
    named, ordered, where = model_weights(ckpt)
    return name_ids(sd, named, ordered, where)


def with_names(comp: Component, ids: IdNames, file: str, path: str) -> Component:
    facts = {**comp.facts, "ids": ids.why, "file": file, "path": path}
    if ids.names:
        facts["param_names"] = dict(sorted(ids.names.items(), key=lambda kv: int(kv[0])))
    return replace(comp, facts=facts)


def name_optimizer(ckpt: Checkpoint, comp: Component) -> Component:
    """The optimizer component, with its ids named (facts "param_names", "file", "path") when
    certain and the reason in facts "ids" either way; unchanged when a builder already did,
    or when the state is not a torch state_dict in a pickle (DCP and ZeRO say names or none)."""
    if comp.kind != "optimizer" or "ids" in comp.facts or not comp.files:
        return comp
    if comp.facts.get("dcp"):
        return replace(comp, facts={**comp.facts, "ids": "the DCP keys name each parameter."})
    by_name = {f.name: f for f in ckpt.files}
    for name in comp.files:
        f = by_name.get(name)
        pf = f.source if f is not None and isinstance(f.source, PickleFile) else None
        found = find_with_path(pf.obj) if pf is not None and not pf.unsafe else None
        if found is not None:
            return with_names(comp, ids_named(ckpt, found[1]), name, found[0])
    return comp
