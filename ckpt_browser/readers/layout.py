"""Work out what a path holds: one file, an index and its shards, or a folder of shards.

Only the directory listing and the index are read here, so the tree skeleton
is ready before any shard header is opened.
"""

from __future__ import annotations

import os
import struct
from dataclasses import replace

from ckpt_browser.errors import NotACheckpoint, PathNotFound, ShardError
from ckpt_browser.model import ERROR, INFO, WARNING, Layout, Problem, natural_key
from ckpt_browser.readers.index import read_index
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.safetensors import MAX_HEADER

INDEX_SUFFIX = ".safetensors.index.json"
PREFERRED_INDEX = "model.safetensors.index.json"


def open_layout(path: str) -> Layout:
    """Resolve a path; raise CheckpointError when nothing there is readable."""
    layout = _open_layout(path)
    note = _links_outside(layout)
    return replace(layout, problems=layout.problems + (note,)) if note else layout


def _links_outside(layout: Layout) -> Problem | None:
    """Shards that are symlinks to files outside the folder: normal in the Hugging Face cache
    (snapshots point into blobs/), worth saying anywhere else; a loop is an error later."""
    root = os.path.realpath(layout.root)
    outside = []
    for name in layout.files:
        path = os.path.join(layout.root, name)
        if os.path.islink(path):
            target = os.path.realpath(path)
            if os.path.commonpath([root, target]) != root:
                outside.append(f"{name} -> {target}")
    if not outside:
        return None
    more = f" and {len(outside) - 1} more" if len(outside) > 1 else ""
    return Problem(INFO, None, f"{len(outside)} shard(s) are symlinks to files outside this "
                   f"folder ({outside[0]}{more}); they are read where they point")


def _open_layout(path: str) -> Layout:
    if not os.path.lexists(path):
        raise PathNotFound(path, "no such file or folder")
    if os.path.isdir(path):
        return _folder(path)
    if path.endswith(".index.json"):
        return _from_index(path, os.path.dirname(path) or ".", os.path.basename(path))
    root, name = os.path.split(path)
    if name in MARKER_FILES:  # a text marker: the user means the checkpoint around it
        return replace(_folder(root or "."), path=path)
    if path.endswith(".safetensors") or _sniff_safetensors(path):
        return Layout(path, root or ".", "safetensors", (name,))
    if path.endswith(TORCH_SUFFIXES) or _sniff_pickle(path):
        # a torch file or pickle: its contents come from the training-state readers
        return Layout(path, root or ".", "torch", ())
    raise NotACheckpoint(path, "not a safetensors file, an index, or a torch file/pickle")


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder), key=natural_key)
    except PermissionError:
        raise NotACheckpoint(folder, "cannot list the folder: permission denied") from None
    except OSError as e:
        raise NotACheckpoint(folder, f"cannot list the folder: {e.strerror or e}") from None


def _folder(path: str) -> Layout:
    names = _listdir(path)
    indexes = [n for n in names if n.endswith(INDEX_SUFFIX)]
    if indexes:
        chosen = PREFERRED_INDEX if PREFERRED_INDEX in indexes else indexes[0]
        layout = _from_index(path, path, chosen, names)
        others = [n for n in indexes if n != chosen]
        if others:
            note = Problem(INFO, chosen, f"also found {', '.join(others)}; showing {chosen}")
            layout = replace(layout, problems=layout.problems + (note,))
        return layout
    shards = tuple(n for n in names if n.endswith(".safetensors"))
    if len(shards) == 1:
        return Layout(path, path, "safetensors", shards)
    if shards:
        return Layout(path, path, "safetensors-folder", shards)
    if not names:
        raise NotACheckpoint(path, "the folder is empty")
    # No safetensors weights: torch files, DCP, DeepSpeed, Megatron ... or unknown files,
    # all shown by the training-state readers (an unknown layout is listed, not refused).
    return Layout(path, path, "no-safetensors", ())


def _from_index(path: str, root: str, index_name: str, names: list[str] | None = None) -> Layout:
    if names is None:
        names = _listdir(root)
    try:
        index = read_index(os.path.join(root, index_name), index_name)
    except ShardError as e:
        # Still show whatever shards sit beside the broken index.
        shards = tuple(n for n in names if n.endswith(".safetensors"))
        problem = Problem(ERROR, index_name, f"{e}; showing the {len(shards)} .safetensors files "
                          "in the folder instead")
        return Layout(path, root, "safetensors-index", shards, problems=(problem,))
    files = index.files
    if files and not any(f.endswith(".safetensors") for f in files):
        # pytorch_model.bin.index.json: torch shards, read as training-state files
        return Layout(path, root, "no-safetensors", ())
    problems = []
    safe = []
    for f in files:
        if not f.strip():
            problems.append(Problem(ERROR, index_name, "maps tensors to an empty file name; "
                                    "not read"))
        elif os.path.isabs(f) or ".." in f.replace("\\", "/").split("/"):
            problems.append(Problem(ERROR, index_name, f"names {f!r}, a path outside the "
                                    "checkpoint folder; not read"))
        else:
            safe.append(f)
    listed = set(safe)
    stem = index_name[: -len(INDEX_SUFFIX)]
    if f"{stem}.safetensors" in names:
        problems.append(Problem(WARNING, f"{stem}.safetensors", f"a single-file {stem}.safetensors "
                                f"sits beside {index_name}: transformers loads it and ignores "
                                "the index and its shards"))
    unlisted = tuple(n for n in names if n.endswith(".safetensors") and n not in listed
                     and n.startswith(stem + "-"))
    return Layout(path, root, "safetensors-index", tuple(sorted(safe, key=natural_key)), index,
                  unlisted, tuple(problems))


TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl")
MARKER_FILES = ("trainer_state.json", "latest", "latest_checkpointed_iteration.txt")


def _head(path: str, n: int) -> bytes:
    try:
        with open_regular(path) as f:
            return f.read(n)
    except OSError:
        return b""


def _sniff_pickle(path: str) -> bool:
    """A torch zip (PK) or a pickle (protocol 2+ starts with 0x80)."""
    head = _head(path, 4)
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def _sniff_safetensors(path: str) -> bool:
    """A file without the extension is accepted if it starts like a safetensors file."""
    head = _head(path, 16)
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= MAX_HEADER and head[8:].lstrip(b" ")[:1] == b"{"

