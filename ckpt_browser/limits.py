"""Caps on what one file may make us read or build: one `Limits` object, read when used.

A legitimate checkpoint can outgrow a cap (a 300,000-tensor optimizer, a DCP metadata file of
tens of thousands of ranks); then `CKPT_BROWSER_MAX_<NAME>=<number>` raises it for that run.
Fixed caps (no variable) bound memory or work whatever the file says. Each field carries its
meaning, its variable and how the README shows it; the README's Limits table is
`readme_table()`, and a test keeps the two equal.

Code reads `limits.LIMITS.<field>` through this module when it needs the value, so a test can
lower one: `monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, pickle_bytes=1024))`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

MiB = 2**20


def _cap(default: int, help: str, *, env: str | None = None, unit: str = "", note: str = "",
         why: str = ""):
    """A field: its default, its meaning (`help`, the README's "what"), the variable that
    raises it (None: fixed), the unit and a note shown with the default, and why it is fixed."""
    return dataclasses.field(default=default, metadata={
        "help": help, "env": env, "unit": unit, "note": note, "why": why})


@dataclass(frozen=True)
class Limits:
    """Every cap, in the README's order."""

    safetensors_header: int = _cap(
        100_000_000, "safetensors header", unit="bytes",
        note="the format's own cap: safetensors refuses more")
    safetensors_values: int = _cap(
        6_000_000, "JSON keys and values in one safetensors header",
        env="CKPT_BROWSER_MAX_SAFETENSORS_VALUES",
        note="a tensor's entry holds about 12: some 500,000 tensors")
    index_bytes: int = _cap(
        512 * MiB, "index JSON (`*.index.json`)", env="CKPT_BROWSER_MAX_INDEX_BYTES",
        unit="bytes", note="a 94,000-tensor index is about 8 MB")
    json_bytes: int = _cap(
        64 * MiB, "JSON state files (`trainer_state.json` ...)",
        env="CKPT_BROWSER_MAX_JSON_BYTES", unit="bytes")
    pickle_bytes: int = _cap(
        64 * MiB, "a pickle (`data.pkl` of a torch zip, a plain pickle)",
        env="CKPT_BROWSER_MAX_PICKLE_BYTES", unit="bytes")
    pickle_ops: int = _cap(
        16_000_000, "opcodes run in one pickle", env="CKPT_BROWSER_MAX_PICKLE_OPS",
        note="a 280,000-tensor optimizer's `data.pkl` runs about 7,000,000")
    pickle_memo: int = _cap(
        8_000_000, "objects in a pickle's memo", env="CKPT_BROWSER_MAX_PICKLE_MEMO")
    depth: int = _cap(
        100, "nesting of the object graph", env="CKPT_BROWSER_MAX_DEPTH", unit="levels")
    paths: int = _cap(
        20_000_000, "paths the object graph expands to (tensors and values listed)",
        env="CKPT_BROWSER_MAX_PATHS", note="shared references followed")
    zip_directory_bytes: int = _cap(
        256 * MiB, "zip central directory", env="CKPT_BROWSER_MAX_ZIP_DIRECTORY_BYTES",
        unit="bytes")
    dcp_metadata_bytes: int = _cap(
        12 * MiB, "DCP `.metadata`", env="CKPT_BROWSER_MAX_DCP_METADATA_BYTES", unit="bytes",
        note="about 100,000 chunks with their storage records, a tensor sharded on 1,000 ranks "
        "being 1,000; each costs ~4 KB of memory and ~60 microseconds to read")
    dcp_metadata_ops: int = _cap(
        6_000_000, "opcodes run in a DCP `.metadata`", env="CKPT_BROWSER_MAX_DCP_METADATA_OPS",
        note="a chunk with its storage record runs about 64")
    dcp_items: int = _cap(
        1000, "non-tensor DCP items decoded under one prefix (`train_state.`, `dataloader.` ...)",
        note="step, last_epoch and world sizes first, then the shallowest keys; the others are "
        "listed by name, with a warning")
    dcp_item_bytes: int = _cap(
        1 * MiB, "a non-tensor DCP item decoded (steps, loader state)",
        env="CKPT_BROWSER_MAX_DCP_ITEM_BYTES", unit="bytes")
    rank_files: int = _cap(
        1024, "per-rank files read in full (RNG, ZeRO shards)", env="CKPT_BROWSER_MAX_RANK_FILES",
        note="more are only counted")
    other_files: int = _cap(
        16_384, "files read by content in one checkpoint, besides its safetensors shards",
        env="CKPT_BROWSER_MAX_OTHER_FILES",
        note="DCP rank files are only stat'ed; the rest are listed as not read, with a warning")
    pickle_globals: int = _cap(
        10_000, "different globals named by one pickle",
        note="real checkpoints name under 100")
    hash_keys: int = _cap(
        32, "dict or set keys sharing one hash value", unit="per value",
        note="the rest are shown under placeholder keys", why="keeps every read linear")
    int_digits: int = _cap(
        1000, "an integer read as a number", unit="digits",
        note='longer ones are "an integer of N digits"',
        why="Python cannot print past 4,300 digits")
    zip_pickles: int = _cap(
        1000, "further pickles checked inside one torch zip (`*.pkl` beside `data.pkl`)",
        note="within the pickle byte cap; a TorchScript archive holds one per source file")
    block_bytes: int = _cap(
        8 * MiB, "`stats`/`diff --values`: one block in memory", unit="bytes",
        why="memory stays bounded")
    block_elements: int = _cap(
        2**20, "`stats`/`diff --values`: elements in one block", unit="elements",
        note="their float64 copy stays at 8 MiB whatever the dtype", why="memory stays bounded")
    row_bytes: int = _cap(
        256 * MiB, "`stats`/`diff --values`: one row of a DCP tensor chunked along inner "
        "dimensions", unit="bytes", why="memory stays bounded")
    view_bytes: int = _cap(
        256 * MiB, "`stats`/`diff --values`: the storage behind a non-contiguous torch view",
        unit="bytes", why="memory stays bounded")
    dcp_wrapper_bytes: int = _cap(
        1 * MiB, "`stats`/`diff --values`: the archive around a DCP chunk, beyond its data",
        unit="bytes")
    values_bytes: int = _cap(
        64 * 1024 * MiB, "`stats`, `diff --values`, the `v` key: tensor bytes one run reads, "
        "all tensors together", env="CKPT_BROWSER_MAX_VALUES_BYTES", unit="bytes",
        note="over it none is read, and each is listed as not read; `stats --max-bytes` "
        "raises it for one run")
    values_tensors: int = _cap(
        50_000, "`stats`, `diff --values`, the `v` key: tensors one run reads",
        env="CKPT_BROWSER_MAX_VALUES_TENSORS",
        note="over it none is read; each costs ~0.1 ms, even an empty one")
    file_extra_bytes: int = _cap(
        64 * MiB, "`stats`, `diff --values`, the `v` key: values read from one file beyond "
        "twice the bytes it holds on disk", unit="bytes",
        why="tensors sharing storage, views repeating elements and sparse files cannot turn a "
        "small file into a long read")
    remote_files: int = _cap(
        20_000, "remote: files listed under one URL", why="point at one checkpoint")
    remote_depth: int = _cap(
        6, "remote: folder levels listed under one URL", unit="levels",
        why="point at one checkpoint")
    remote_zip_entries: int = _cap(100_000, "remote: entries of one torch zip fetched")
    remote_zip_bytes: int = _cap(
        256 * MiB, "remote: `data.pkl` and the other small records of one torch zip, together",
        unit="bytes")
    remote_dcp_bytes: int = _cap(
        64 * MiB, "remote: the non-tensor DCP items fetched, together", unit="bytes")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        """The defaults, each raisable cap replaced by its variable when that is a positive
        whole number in ASCII digits (`_` allowed); anything else leaves the default."""
        raised = {}
        for f in dataclasses.fields(cls):
            name = f.metadata["env"]
            text = environ.get(name, "").replace("_", "").strip() if name else ""
            if text.isascii() and text.isdigit() and int(text) > 0:  # "²".isdigit() too
                raised[f.name] = int(text)
        return cls(**raised)


def env(field: str) -> str:
    """The variable that raises the cap `field`, for messages: "CKPT_BROWSER_MAX_PICKLE_OPS"."""
    name = _FIELDS[field].metadata["env"]
    if name is None:
        raise ValueError(f"the {field} cap is fixed: no variable raises it")
    return name


def readme_table() -> str:
    """The README's Limits table: one row per cap, from the fields and their defaults."""
    rows = ["| what | default | raised by |", "|---|---|---|"]
    defaults = Limits()
    for f in dataclasses.fields(Limits):
        m = f.metadata
        shown = _amount(getattr(defaults, f.name), m["unit"])
        shown += f" ({m['note']})" if m["note"] else ""
        raised = f"`{m['env']}`" if m["env"] else "fixed" + (f" ({m['why']})" if m["why"] else "")
        rows.append(f"| {m['help']} | {shown} | {raised} |")
    return "\n".join(rows) + "\n"


def _amount(value: int, unit: str) -> str:
    if unit == "bytes" and value % MiB == 0:
        return f"{value // MiB:,} MiB"
    return f"{value:,} {unit}".rstrip()


_FIELDS = {f.name: f for f in dataclasses.fields(Limits)}
LIMITS = Limits.from_env()
