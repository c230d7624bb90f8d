"""torch DCP folders (`.metadata` + `__R_N.distcp`), alone or nested by other frameworks.

Read by `build_dcp`: non-tensor items (steps, loader state) are small torch.save zips,
decoded with the safe reader.
"""

from __future__ import annotations

import os
import re

from ckpt_browser import limits
from ckpt_browser.model import ERROR, WARNING, Component, Part, Problem, natural_key
from ckpt_browser.parts.classify import kinds_of
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
from ckpt_browser.parts.tag import dcp_parts
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


NOT_SAVED = {
    "scheduler": ("LR scheduler state", "the schedule restarts from its first step unless the "
                  "script sets it again."),
    "data": ("data-loader state", "the data restarts from the beginning unless the script skips "
             "what was already seen."),
    "progress": ("step counter", "the resumed run counts from step 0 unless the script is told "
                 "where it was."),
}


def build_dcp(det: Detection, fs: StateFiles) -> Found:
    """Each part where its content puts it (FileInfo.parts of the .metadata), under any key;
    the prefixes torchtitan uses where the content says nothing."""
    out = Found()
    read = model_and_optimizer(det, fs, out)
    if read is None:
        return out
    d, parts = read
    files = det.files("weights")
    for kind, usual in (("scheduler", "lr_scheduler."), ("data", "dataloader."),
                        ("progress", "train_state.")):
        found = [p for p in parts if p.kind == kind]
        pre, vals = part_values(fs, d, [p.path for p in found], usual)
        label = f"{pre}* keys" if pre else "keys"
        out.add(unsafe_items(kind, files, vals, pre) or (
            Component(kind, OK, tuple(files), f"{label} in the DCP checkpoint: "
                      f"{name_list(sorted(vals), 5)}.", {"keys": vals}) if vals else
            missing(kind, f"no {NOT_SAVED[kind][0]} among this DCP checkpoint's keys (looked "
                    f"for by what they hold, under any name, and under {usual}*): "
                    f"{NOT_SAVED[kind][1]}")))
        if kind == "progress":
            out.step = _step(found, vals, pre)
    out.add(rng_in_dcp(files, parts) or missing(
        "rng", "DCP stores no RNG state unless the training script adds it."))
    scalers = [p.path for p in parts if p.kind == "scaler"]
    out.add(Component("scaler", OK, tuple(files), f"grad-scaler state in the DCP checkpoint: "
                      f"{name_list(scalers, 5)}.", {"keys": scalers}) if scalers else
            not_needed("scaler", "no grad-scaler keys in this DCP checkpoint."))
    return out


def metadata_parts(fs: StateFiles, d: DcpCheckpoint) -> list[Part]:
    """The parts classify found in the DCP metadata when it was read (FileInfo.parts); found
    again from the metadata when this folder is not the checkpoint's own."""
    ckpt = fs.ckpt
    if ckpt is not None and os.path.abspath(ckpt.layout.root) == os.path.abspath(fs.root):
        name = _metadata_name(d)
        for f in ckpt.files:
            if f.name == name and f.format == "dcp-metadata":
                return list(f.parts)
    return [Part(p.kind, p.path, p.what) for p in dcp_parts(d)]


def part_values(fs: StateFiles, d: DcpCheckpoint, roots: list[str], pre: str
                ) -> tuple[str, dict]:
    """(prefix, values) of the items in the parts at `roots`: under `pre` as before when they
    all are (or there are none), under one part's prefix, or by full key."""
    if not roots or all(r.startswith(pre) or r + "." == pre for r in roots):
        return pre, dcp_values(fs, d, pre)
    if len(roots) == 1 and roots[0] not in d.entries:
        return roots[0] + ".", dcp_values(fs, d, roots[0] + ".")
    inside = [k for k in d.entries if k in roots or k.startswith(tuple(r + "." for r in roots))]
    return "", dcp_values(fs, d, "", inside)


def _step(found: list[Part], values: dict, pre: str) -> int | None:
    """The step a step counter part holds, when it is a plain int."""
    for p in found:
        v = values.get(p.path[len(pre):] if p.path.startswith(pre) else p.path)
        if p.what.startswith("step") and type(v) is int:
            return v
    return None


def rng_in_dcp(files, parts: list[Part]) -> Component | None:
    """RNG state found by content (a torch.get_rng_state() tensor under any key), one entry
    per state when several (per rank, per device)."""
    rng = [p for p in parts if p.kind == "rng"]
    if not rng:
        return None
    keys = [p.path for p in rng]
    what = sorted({p.what for p in rng})
    many = f"{len(rng)} RNG states" if len(rng) > 1 else "RNG state"
    return Component("rng", OK, tuple(files), f"{many} in the DCP checkpoint: "
                     f"{name_list(keys, 5)} ({'; '.join(what)}).",
                     {"keys": keys, "states": len(rng), "what": what})


def model_and_optimizer(det: Detection, fs: StateFiles, out: Found,
                        rng: Component | None = None
                        ) -> tuple[DcpCheckpoint, list[Part]] | None:
    """Weights, optimizer and rank count, and (the checkpoint, the parts in its metadata) for
    the rest; None (all seven filled) when the folder is unusable."""
    files = det.files("weights")
    d = fs.dcp("")
    bad = dcp_status("weights", files, d)
    if bad:
        rng = rng or missing("rng", "no RNG state.")
        every_kind(out, lambda kind: Component(kind, bad.status, bad.files, bad.detail)
                   if kind != "rng" else rng)
        return None
    # the weights and the optimizer where the content puts them: dcp.save({"model": ...,
    # "optim": ...}), the DCP tutorial's {"app": {"model", "optim"}}, torchtitan's model FQNs
    # at the top level; keys classify finds nothing for go by prefix (tag.DCP_PREFIXES)
    parts = metadata_parts(fs, d)
    out.add(weights_component(fs, files, dcp="", dcp_kinds=kinds_of(parts)))
    opt = next((p.path for p in parts if p.kind == "optimizer"), "optimizer")
    out.add(optimizer_from_dcp(fs, files, "", f"{opt}." if opt else ""))
    ranks = {m.group(1) for f in d.files if (m := DCP_DATA.match(f))}
    out.ranks = len(ranks) or None
    return d, parts


def dcp_values(fs: StateFiles, d: DcpCheckpoint, prefix: str,
               keys: list[str] | None = None) -> dict:
    """Items under `prefix`: non-tensor ones decoded when small and plain, tensors as labels.
    At most the dcp_items limit are decoded (each is a small zip and a pickle): READ_FIRST,
    then the shallowest keys (dp_world_size before dp_rank_7.state); the others keep their
    key, valued NOT_DECODED, and a warning counts them. Items in the same bytes are decoded
    once."""
    most = limits.LIMITS.dcp_items
    keys = [k for k in d.entries if k.startswith(prefix)] if keys is None else keys
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
