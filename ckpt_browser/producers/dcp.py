"""torch DCP folders (`.metadata` + `__R_N.distcp`), alone or nested by other frameworks."""


from __future__ import annotations

import os
import re

from ckpt_browser import limits
from ckpt_browser.model import ERROR, WARNING, Component, Problem, natural_key
from ckpt_browser.parts.common import (
    OK,
    UNSAFE,
    Found,
    dcp_status,
    every_kind,
    jsonable,
    missing,
    name_list,
    not_needed,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_from_dcp
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import Detection, Producer, Seen, listdir, rx, with_other
from ckpt_browser.standins import DcpCheckpoint

DCP_FILE = rx(r"\.metadata", r"\.metadata\.tmp", r"__\d+\.metadata", r"__\d+_\d+\.distcp")
DCP_DATA = re.compile(r"^__(\d+)_(\d+)\.distcp$")


def dcp_files(folder: str, rel: str, names: list[str] | None = None) -> tuple[str, ...]:
    names = listdir(os.path.join(folder, rel)) if names is None else names
    prefix = f"{rel}/" if rel else ""
    return tuple(prefix + n for n in names if DCP_FILE.match(n))


def is_dcp(folder: str) -> bool:
    return any(DCP_FILE.match(n) for n in listdir(folder))


def has_dcp(seen: Seen) -> bool:
    return not seen.is_file and any(DCP_FILE.match(n) for n in seen.names)


def dcp_only(seen: Seen, framework: str = "dcp") -> Detection:
    """A plain DCP folder (torchtitan's step-N or anyone's): every state part is in it."""
    path, names = seen.path, seen.names
    files = dcp_files(path, "", names)
    roles = {k: files for k in ("weights", "optimizer", "scheduler", "data", "progress")}
    problems = []
    if ".metadata" not in names and not any(re.match(r"^__\d+\.metadata$", n) for n in names):
        what = ".metadata.tmp is there but was never renamed" if ".metadata.tmp" in names \
            else "no .metadata"
        problems.append(Problem(ERROR, None, f"DCP save did not finish: {what}"))
    return Detection(path, path, framework, seen.step, seen.source,
                     roles=with_other(roles, names), dcp=("",), problems=tuple(problems))


# --- reading its files -----------------------------------------------------------------


def build_dcp(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    d = model_and_optimizer(det, fs, out)
    if d is None:
        return out
    files = det.files("weights")
    for kind, pre in (("scheduler", "lr_scheduler."), ("data", "dataloader."),
                      ("progress", "train_state.")):
        vals = dcp_values(fs, d, pre)
        out.add(unsafe_items(kind, files, vals, pre) or (
            Component(kind, OK, tuple(files), f"{pre}* keys in the DCP checkpoint: "
                      f"{name_list(sorted(vals), 5)}.", {"keys": vals}) if vals else
            missing(kind, f"a plain DCP checkpoint with no {pre}* keys: which framework wrote it "
                    "is unknown, so this state is not found.")))
    out.add(missing("rng", "DCP stores no RNG state unless the training script adds it."))
    out.add(not_needed("scaler", "no grad-scaler keys in this DCP checkpoint."))
    return out


def model_and_optimizer(det: Detection, fs: StateFiles, out: Found,
                        rng: Component | None = None) -> DcpCheckpoint | None:
    """Weights, optimizer and rank count; None (all seven filled) when the folder is unusable."""
    files = det.files("weights")
    d = fs.dcp("")
    bad = dcp_status("weights", files, d)
    if bad:
        rng = rng or missing("rng", "no RNG state.")
        every_kind(out, lambda kind: Component(kind, bad.status, bad.files, bad.detail)
                   if kind != "rng" else rng)
        return None
    # torchtitan, and dcp.save(model.state_dict()), keep model FQNs at top level, with no
    # "model." prefix; dcp.save({"model": ...}) adds it
    prefix = "model." if any(k.startswith("model.") for k in d.entries) else ""
    out.add(weights_component(fs, files, dcp="", dcp_prefix=prefix))
    out.add(optimizer_from_dcp(fs, files, "", "optimizer."))
    ranks = {m.group(1) for f in d.files if (m := DCP_DATA.match(f))}
    out.ranks = len(ranks) or None
    return d


def dcp_values(fs: StateFiles, d: DcpCheckpoint, prefix: str) -> dict:
    """Items under `prefix`: non-tensor ones decoded when small and plain, tensors as labels.
    At most the dcp_items limit are decoded (each is a small zip and a pickle): READ_FIRST,
    then the shallowest keys (dp_world_size before dp_rank_7.state); the others keep their
    key, valued NOT_DECODED, and a warning counts them. Items in the same bytes are decoded
    once."""
    most = limits.LIMITS.dcp_items
    keys = [k for k in d.entries if k.startswith(prefix)]
    chosen = set(sorted(keys, key=lambda k: (k[len(prefix):] not in READ_FIRST, k.count("."),
                                             natural_key(k)))[:most])
    decoded: dict[tuple, object] = {}
    values: dict = {}
    for key in keys:
        e = d.entries[key]
        if key not in chosen:
            values[key[len(prefix):]] = NOT_DECODED
            continue
        c = e.chunks[0] if e.kind != "tensor" and e.chunks else None
        where: tuple = (c.file, c.offset, c.length) if c is not None else (key,)
        if where not in decoded:
            decoded[where] = jsonable(fs.dcp_value("", e))
        values[key[len(prefix):]] = decoded[where]
    if len(keys) > most:
        fs.problems.append(Problem(WARNING, _metadata_name(d), f"{len(keys):,} items under "
                                   f"{prefix}*: only {most:,} were decoded (the shallowest "
                                   "keys); the others are listed by name only"))
    return values


NOT_DECODED = "(not decoded: too many items)"
READ_FIRST = ("step", "ntokens_seen", "last_epoch", "dp_world_size", "world_size")


def _metadata_name(d: DcpCheckpoint) -> str:
    return f"{d.folder}/.metadata" if d.folder else ".metadata"


def unsafe_items(kind: str, files, values: dict, prefix: str) -> Component | None:
    bad = [k for k, v in values.items() if isinstance(v, str) and v.startswith("unsafe call")]
    if not bad:
        return None
    return Component(kind, UNSAFE, tuple(files), f"DCP item {prefix}{bad[0]} holds "
                     f"{values[bad[0]]}; torch's default DCP load would execute it.",
                     {"unsafe_items": [prefix + k for k in bad]})


DCP = Producer("dcp", has_dcp, dcp_only, rank_names=DCP_DATA, build=build_dcp)
