"""Model weights: safetensors and .bin shards listed by name, torch pickles and DCP counted.

Safetensors headers are never read here: the weights view does that.
"""

from __future__ import annotations

import os
import re

from ckpt_browser import limits
from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    INCOMPLETE,
    MISSING,
    OK,
    count_tensors,
    damaged_or_unsafe,
    dcp_status,
    missing,
    name_list,
)
from ckpt_browser.parts.files import StateFiles

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
                      dcp_prefix: str = "model.", dcp_kinds: dict | None = None) -> Component:
    """Weights from safetensors names, torch pickles (count tensors) or a DCP folder (its
    keys under `dcp_prefix`, or, given `dcp_kinds` (part path -> kind, read by content),
    those in a weights part)."""
    files = tuple(files)
    if not files:
        return missing("weights", "no model weights here: this checkpoint cannot even "
                       "warm-start a run.")
    if dcp is not None:
        return _weights_in_dcp(fs, files, dcp, dcp_prefix, dcp_kinds)
    by_name = weights_by_name(files)
    if by_name is not None:
        return by_name
    safetensors = [f for f in files if f.endswith((".safetensors", ".json"))]
    if safetensors and len(safetensors) == len(files) and not any(
            f.endswith(".safetensors") for f in files):
        return Component("weights", INCOMPLETE, files, f"{name_list(files)} names the weight "
                         "shards, but none of them is here: the model cannot be loaded.",
                         {"format": "safetensors", "files": len(files), "shards": 0})
    if safetensors and len(safetensors) == len(files):
        verb = "holds" if len(files) == 1 else "hold"
        return Component("weights", OK, files, f"{name_list(files)} {verb} the model weights; "
                         "headers are checked in the weights view.",
                         {"format": "safetensors", "files": len(files)})
    torch_files = [f for f in files if not f.endswith((".safetensors", ".json", "/"))]
    pfs = [fs.pickle(f) for f in torch_files[:limits.LIMITS.rank_files]]
    bad = damaged_or_unsafe("weights", files, pfs)
    if bad:
        return bad
    n = 0
    for pf in pfs:
        n += count_tensors(key_in(pf.obj) if key_in else pf.obj)
    facts = {"format": "torch", "files": len(files), "tensors": n}
    if not n:
        return Component("weights", MISSING, files, f"{name_list(files)} holds no model tensors.",
                         facts)
    return Component("weights", OK, files, f"{n:,} model tensors in {name_list(files)}.", facts)


def _weights_in_dcp(fs: StateFiles, files: tuple, dcp: str, prefix: str,
                    kinds: dict | None) -> Component:
    d = fs.dcp(dcp)
    bad = dcp_status("weights", files, d)
    if bad:
        return bad
    if kinds is not None:
        from ckpt_browser.parts.tag import dcp_kind

        n = sum(1 for k, e in d.entries.items()
                if e.kind == "tensor" and dcp_kind(kinds, k) == "weights")
    else:
        n = sum(1 for k, e in d.entries.items()
                if e.kind == "tensor" and _is_model_key(k, prefix))
    if not n:
        return missing("weights", f"the DCP checkpoint in {dcp or '.'} holds no model tensors.")
    return Component("weights", OK, files, f"{n:,} model tensors in DCP "
                     f"({len(d.files)} rank file{'s' if len(d.files) != 1 else ''}).",
                     {"format": "dcp", "tensors": n, "rank_files": len(d.files)})


def _is_model_key(key: str, prefix: str) -> bool:
    if prefix:
        return key.startswith(prefix)
    return not key.startswith(("optimizer.", "lr_scheduler.", "dataloader.", "train_state."))

