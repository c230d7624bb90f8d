"""Work out which files make up the checkpoint at a path: one file, an index and its shards,
a framework's folder (sub-folders included), or any folder of files.

Only the directory listing, the index and tiny markers are read here, so the tree skeleton is
ready before any file is opened; what each file holds is read from its content later.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ckpt_browser.errors import NotACheckpoint, PathNotFound, ShardError
from ckpt_browser.model import ERROR, INFO, WARNING, Layout, Problem, natural_key
from ckpt_browser.producers import PRODUCERS
from ckpt_browser.producers.base import Detection
from ckpt_browser.producers.dcp import DCP_DATA
from ckpt_browser.producers.names import step_of
from ckpt_browser.producers.recognise import detect
from ckpt_browser.producers.timeline import MARKER_FILES, NESTING, run_problems
from ckpt_browser.readers.files import LFS, NOT_A_CHECKPOINT, head_of, sniff_named
from ckpt_browser.readers.hf_cache import CacheEntry, cache_entry, incomplete_blobs
from ckpt_browser.readers.index import read_index
from ckpt_browser.readers.walk import Listing, list_folder, loops_back

INDEX_SUFFIX = ".safetensors.index.json"
PREFERRED_INDEX = "model.safetensors.index.json"
RANK_NAMES = tuple(p.rank_names for p in PRODUCERS if p.rank_names is not None)


def open_layout(path: str) -> Layout:
    """Resolve a path; raise CheckpointError when nothing there is readable."""
    layout = replace(_open_layout(path), rank_names=RANK_NAMES)
    walked = _run_problems(path, layout)
    if walked:
        layout = replace(layout, problems=tuple(dict.fromkeys(layout.problems + walked)))
    entry = cache_entry(layout.root)
    if entry is not None:  # links into blobs/ are how the cache works: name the repo instead
        return replace(layout, shown_as=entry.shown(),
                       problems=layout.problems + _cache_problems(entry, layout))
    note = _links_outside(layout)
    return replace(layout, problems=layout.problems + (note,)) if note else layout


def _cache_problems(entry: CacheEntry, layout: Layout) -> tuple[Problem, ...]:
    """An interrupted download leaves `.incomplete` blobs and no snapshot links for them; a
    link whose blob was deleted (a pruned cache) dangles."""
    found = [Problem(WARNING, None, f"{why}: not read, so the branch it names is not shown")
             for why in entry.unread_refs]
    partial = incomplete_blobs(entry)
    if partial:
        found.append(Problem(WARNING, None, f"an unfinished download of {entry.repo_id}: "
                             f"{len(partial)} .incomplete blob(s) in "
                             f"{os.path.basename(entry.repo_folder)}/blobs, so files of this "
                             f"revision may be missing here; downloading it again resumes it"))
    dangling = [n for n in layout.files if os.path.islink(os.path.join(layout.root, n))
                and not os.path.exists(os.path.join(layout.root, n))]
    if dangling:
        more = f" and {len(dangling) - 1} more" if len(dangling) > 1 else ""
        found.append(Problem(ERROR, dangling[0], f"{len(dangling)} file(s) of the cached "
                             f"{entry.repo_id} link to blobs that are gone ({dangling[0]}{more}): "
                             f"the cache was pruned or the download broke"))
    return tuple(found)


def _run_problems(path: str, layout: Layout) -> tuple[Problem, ...]:
    """Loops and links to nothing in the run folders around the checkpoint shown: the ones
    gone through from `path` to it, and the one it sits in when it is named like a
    checkpoint (the CLI opens a run folder's newest checkpoint by its own path)."""
    shown, start = os.path.abspath(layout.path), os.path.abspath(path)
    folders, folder = [], os.path.dirname(shown)
    if step_of(os.path.basename(shown))[1] is not None:
        folders.append(folder)
        if os.path.basename(folder) in NESTING:
            folders.append(os.path.dirname(folder))
    while folder == start or folder.startswith(start.rstrip(os.sep) + os.sep):  # walked by
        folders.append(folder)  # detection on its way to the newest checkpoint
        if os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    return tuple(p for f in dict.fromkeys(folders) for p in run_problems(f))


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


def _open_layout(path: str, det: Detection | None = None) -> Layout:
    if not os.path.lexists(path):
        raise PathNotFound(path, "no such file or folder")
    loop = loops_back(path)
    if loop:
        raise NotACheckpoint(path, loop)
    if os.path.isdir(path):
        return _folder(path, det=det)
    root, name = os.path.split(path)
    if path.endswith(".index.json"):  # the folder around it, with this index
        return replace(_folder(root or ".", index=name), path=path)
    root = root or "."
    if name in MARKER_FILES or name == ".metadata" or DCP_DATA.match(name):
        # a marker or a DCP part: the user means the checkpoint around it
        return replace(_folder(root), path=path)
    if not name.endswith(".safetensors") and _kind(path) == "other":
        if any(os.path.isfile(os.path.join(root, m)) for m in MARKER_FILES if m != name):
            # a text part of a checkpoint whose folder a producer marks (speechbrain's
            # counter.ckpt beside CKPT.yaml): the user means that checkpoint
            return replace(_folder(root), path=path)
        if _lfs_pointer(path):
            raise NotACheckpoint(path, "not a checkpoint: a Git LFS pointer, not the file; its "
                                 "content was never downloaded (git lfs pull fetches it)")
        raise NotACheckpoint(path, f"not a checkpoint: its content is {NOT_A_CHECKPOINT}")
    shard = name.endswith(".safetensors") or _kind(path) == "safetensors"
    return Layout(path, root, "safetensors" if shard else "files", (name,),
                  shards=(name,) if shard else (), detection=det or detect(path))


def _lfs_pointer(path: str) -> bool:
    try:
        return head_of(path)[0].startswith(LFS.encode())
    except OSError:
        return False


def _kind(path: str) -> str:
    try:
        return sniff_named(head_of(path)[0], os.path.basename(path))
    except OSError:
        return "unreadable"


def _listdir(folder: str) -> Listing:
    try:
        return list_folder(folder)
    except PermissionError:
        raise NotACheckpoint(folder, "cannot list the folder: permission denied") from None
    except OSError as e:
        raise NotACheckpoint(folder, f"cannot list the folder: {e.strerror or e}") from None


def _folder(path: str, index: str | None = None, det: Detection | None = None) -> Layout:
    listing = _listdir(path)
    names = list(listing.names)
    if not names:
        raise NotACheckpoint(path, "the folder is empty" if not listing.loops else
                             f"the folder holds only links that loop back "
                             f"({listing.loops[0].name} {listing.loops[0].words()})")
    det = det or detect(path)
    if os.path.abspath(det.path) != os.path.abspath(path):
        # a run folder: the newest checkpoint in it (detection's choice, named in a note);
        # its detection is reused, so the bound on nested run folders holds
        inner = _open_layout(det.path, replace(det, problems=det.problems[1:]))
        return replace(inner, problems=det.problems[:1] + inner.problems)
    layout = _with_files(_weights(path, names, index), det, names)
    return replace(layout, problems=listing.problems() + layout.problems)


def _weights(path: str, names: list[str], index: str | None = None) -> Layout:
    """The safetensors weights of a folder: an index and its shards, or the shards."""
    indexes = [n for n in names if n.endswith(INDEX_SUFFIX)]
    if index is not None and index.endswith(".index.json"):
        return _from_index(path, path, index, names)
    if indexes:
        chosen = PREFERRED_INDEX if PREFERRED_INDEX in indexes else indexes[0]
        layout = _from_index(path, path, chosen, names)
        others = [n for n in indexes if n != chosen]
        if others:
            note = Problem(INFO, chosen, f"also found {', '.join(others)}; showing {chosen}")
            layout = replace(layout, problems=layout.problems + (note,))
        return layout
    shards = tuple(n for n in names if n.endswith(".safetensors")
                   and os.path.isfile(os.path.join(path, n)))
    if len(shards) == 1:
        return Layout(path, path, "safetensors", shards, shards=shards)
    if shards:
        return Layout(path, path, "safetensors-folder", shards, shards=shards)
    # No safetensors weights: torch files, DCP, a framework's own files ... or unknown files,
    # all read by content (an unknown layout is listed, not refused).
    return Layout(path, path, "files", ())


def _with_files(layout: Layout, det, names: list[str]) -> Layout:
    """Every file of the checkpoint: the shards, the files each framework role names (also in
    sub-folders: tag folders, FSDP DCP folders, adapters), and the rest of the folder."""
    root = layout.root
    files = dict.fromkeys(layout.files)
    dcp = list(det.dcp) if det is not None else []
    if det is not None:
        for role_files in det.roles.values():
            files.update(dict.fromkeys(f for f in role_files if not f.endswith("/")
                                       and _shown(os.path.basename(f))
                                       and not os.path.isdir(os.path.join(root, f))))
    for n in names:
        if not _shown(n):
            continue
        if n == ".metadata" and "" not in dcp:
            dcp.append("")
        p = os.path.join(root, n)
        if os.path.isfile(p) or (os.path.islink(p) and not os.path.isdir(p)):  # a link to
            files.setdefault(n)  # nothing or a loop of links is listed, and read as damaged
    ordered = tuple(sorted(files, key=natural_key))
    return replace(layout, files=ordered, shards=layout.shards or layout.files, dcp=tuple(dcp),
                   detection=det, apart=det.files("ema") if det is not None else ())


def _shown(name: str) -> bool:
    """Hidden files are no part of a checkpoint (.gitattributes, a mirror's manifest), except
    DCP's .metadata and the .metadata.tmp an unfinished save leaves."""
    return not name.startswith(".") or name in (".metadata", ".metadata.tmp")


def _from_index(path: str, root: str, index_name: str, names: list[str] | None = None) -> Layout:
    if names is None:
        names = list(_listdir(root).names)
    try:
        index = read_index(os.path.join(root, index_name), index_name)
    except ShardError as e:
        # Still show whatever shards sit beside the broken index.
        shards = tuple(n for n in names if n.endswith(".safetensors"))
        problem = Problem(ERROR, index_name, f"{e}; showing the {len(shards)} .safetensors files "
                          "in the folder instead")
        return Layout(path, root, "safetensors-index", shards, problems=(problem,),
                      shards=shards)
    files = index.files
    if files and not any(f.endswith(".safetensors") for f in files):
        # pytorch_model.bin.index.json: torch shards, read by content like any other file
        return Layout(path, root, "files", ())
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
    shards = tuple(sorted(safe, key=natural_key))
    return Layout(path, root, "safetensors-index", shards, index, unlisted, tuple(problems),
                  shards=shards)
