"""A folder of several checkpoints of one run, found by names or by content, newest first.

By names: the frameworks' step folders and files (producers.names: checkpoint-N, step-N,
epoch=E-step=S.ckpt ...). By content: a folder of single-file checkpoints of one run
(`ckpt_epoch1.pt`, `checkpoint-3.pth.tar`, torchvision's `model_5.pth` beside `checkpoint.pth`),
files whose weights have the same names, ordered by the steps and epochs their contents
record; or a folder whose sub-folders are checkpoints (DCP saves, weights folders) under any
names. Reading the pickles to decide costs no tensor bytes, and the one opened next is not
read again (readers.torchfile remembers the last few).
"""

from __future__ import annotations

import os
from dataclasses import replace

from ckpt_browser.errors import NotACheckpoint
from ckpt_browser.parts.classify import classify
from ckpt_browser.parts.projects import fingerprint
from ckpt_browser.parts.signatures import counter_kind
from ckpt_browser.parts.tag import param_name, wrapper_prefix
from ckpt_browser.producers import reads_by_names
from ckpt_browser.producers.names import TimelineEntry, newest_first
from ckpt_browser.producers.recognise import detect, find_checkpoints, with_formats
from ckpt_browser.producers.timeline import is_timeline
from ckpt_browser.readers.files import head_of, sniff
from ckpt_browser.readers.walk import MAX_DEPTH, list_folder, loops_back
from ckpt_browser.standins import TensorRef

MAX_FILES = 256  # files looked into in one folder; a run folder holds a few dozen


def is_run(path: str) -> bool:
    return bool(run_entries(path))


def run_entries(path: str, depth: int = 0) -> list[TimelineEntry]:
    """The checkpoints in a folder of checkpoints, newest first; [] when `path` is one
    checkpoint (or not a folder). `depth`: folders gone down through to get here, each the
    only thing in the one above; NotACheckpoint past walk.MAX_DEPTH of them."""
    if not os.path.isdir(path):
        return []
    loop = loops_back(path)
    if loop:
        raise NotACheckpoint(path, loop)
    if is_timeline(path):
        return find_checkpoints(path)
    return _by_content(path, depth)


def _by_content(folder: str, depth: int) -> list[TimelineEntry]:
    try:
        names = list(list_folder(folder).names)  # bounded, loops left out
    except OSError:
        return []
    if reads_by_names(detect(folder).framework):
        return []  # a producer's own layout (a DCP folder, a tag folder ...): one checkpoint
    files = [n for n in names if not n.startswith(".") and not n.endswith(".distcp")
             and os.path.isfile(os.path.join(folder, n))]
    kinds = {n: _kind(os.path.join(folder, n)) for n in files[:MAX_FILES]}  # 100,000 files
    torch = _once_each(folder, [n for n, k in kinds.items() if k in ("zip", "torch-legacy",
                                                                       "pickle")])
    if len(torch) >= 2:
        return _single_files(folder, torch)
    if "safetensors" in kinds.values() or torch:
        return []  # the folder is one checkpoint
    dirs = [n for n in names if not n.startswith(".") and os.path.isdir(os.path.join(folder, n))
            and not os.path.islink(os.path.join(folder, n))]
    if not files and len(dirs) == 1:  # a folder around one run or checkpoint (a work_dir)
        if depth >= MAX_DEPTH:
            raise NotACheckpoint(folder, f"over {MAX_DEPTH} folders nested one in another, "
                                 "each the only thing in the one above: not looked into further")
        inner = run_entries(os.path.join(folder, dirs[0]), depth + 1)
        if inner:
            return [replace(e, name=f"{dirs[0]}/{e.name}") for e in inner]
        if _checkpoint_folder(folder, dirs[0]):
            e = _entry(os.path.join(folder, dirs[0]), dirs[0], None, "folder")
            return [e] if e is not None else []
        return []
    subs = [n for n in names if not n.startswith(".") and _checkpoint_folder(folder, n)]
    if len(subs) < 2:
        return []
    entries = [_entry(os.path.join(folder, n), n, None, "folder") for n in subs]
    return with_formats([e for e in entries if e is not None])


def _kind(path: str) -> str:
    try:
        return sniff(head_of(path)[0])
    except OSError:
        return "unreadable"


def _checkpoint_folder(folder: str, name: str) -> bool:
    path = os.path.join(folder, name)
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        inner = list_folder(path).names
    except OSError:
        return False
    if ".metadata" in inner or any(n.endswith((".safetensors", ".index.json", ".distcp"))
                                   for n in inner):
        return True
    return any(_kind(os.path.join(path, n)) in ("zip", "torch-legacy") for n in inner[:64]
               if os.path.isfile(os.path.join(path, n)))


def _once_each(folder: str, names: list[str]) -> list[str]:
    """A link to a file beside it is that checkpoint again (Composer's latest-rank0.pt ->
    ep2-ba8-rank0.pt): listed once, under the file's own name."""
    real = {os.path.realpath(os.path.join(folder, n)): n for n in names
            if not os.path.islink(os.path.join(folder, n))}
    return [n for n in names if not os.path.islink(os.path.join(folder, n))
            or os.path.realpath(os.path.join(folder, n)) not in real]


def _single_files(folder: str, names: list[str]) -> list[TimelineEntry]:
    """The files whose weights have the same names: the checkpoints of one run (a sharded
    model's files hold different names, one component per file holds no weights)."""
    from ckpt_browser.readers.torchfile import read_pickle_file

    groups: dict[frozenset, list[tuple[str, int | None, int | None, str]]] = {}
    for name in names:
        pf = read_pickle_file(os.path.join(folder, name), name)
        if pf.obj is None or pf.unsafe:
            continue
        parts = classify(pf.obj)
        weights = [p for p in parts if p.kind in ("weights", "ema")]
        if not any(p.kind == "weights" for p in weights):
            continue
        root = next(p for p in weights if p.kind == "weights")
        keys = [param_name(path, root.path) for path, t in pf.tensors
                if not root.path or path.startswith(root.path + ".")]
        prefix = wrapper_prefix(keys)
        step, epoch = _counters(pf, parts)
        project = fingerprint(pf.obj)
        groups.setdefault(frozenset(k[len(prefix):] for k in keys), []).append(
            (name, step, epoch, project.name if project else "torch"))
    best = max(groups.values(), key=len, default=[])
    if len(best) < 2:
        return []
    entries = []
    for name, step, epoch, fmt in best:
        counter = step if step is not None else epoch
        kind = "file" if step is not None or epoch is None else "epoch_N"
        e = _entry(os.path.join(folder, name), name, counter, kind)
        if e is not None:
            entries.append(replace(e, format=fmt))
    return newest_first(entries)


def _counters(pf, parts) -> tuple[int | None, int | None]:
    step = epoch = None
    for p in parts:
        if p.kind != "progress":
            continue
        v = p.node
        if type(v) is TensorRef:
            continue  # a 0-d tensor counter: its value is in the tensor bytes
        kind = counter_kind(p.key, v)
        if kind == "step" and step is None:
            step = v
        elif kind == "epoch" and epoch is None:
            epoch = v
    return step, epoch


def _entry(path: str, name: str, step: int | None, kind: str) -> TimelineEntry | None:
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return TimelineEntry(path, name, step, mtime, kind, "")
