"""Shared helpers for the hardening tests: the sample list, damaged inputs built from the
samples, an isolated environment, a plain-text screen export and a walk through every screen."""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import random
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from tests.tui.conftest import loaded

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
SIZES = ((60, 20), (200, 60))


def single_files(root: Path = SAMPLES) -> list[str]:
    """Each single-file checkpoint (.ckpt, Lightning's), relative; not the .ckpt parts of a
    speechbrain checkpoint folder (beside its CKPT.yaml), which the folder covers: each
    opens that folder, and 14 of them made the suite a minute longer."""
    return [str(p.relative_to(root)) for p in root.rglob("*.ckpt")
            if not (p.parent / "CKPT.yaml").exists()]


def sample_paths(root: Path = SAMPLES) -> list[str]:
    """Every folder under the samples, and each single-file checkpoint (.ckpt), relative."""
    found = [os.path.relpath(d, root) for d, _, _ in os.walk(root) if Path(d) != root]
    return sorted(found + single_files(root))


def top_samples(root: Path = SAMPLES) -> list[str]:
    """One entry per sample: each folder right under sample_checkpoints/ (a folder of
    checkpoints opens its newest), and each single-file checkpoint."""
    return sorted([p.name for p in root.iterdir() if p.is_dir()] + single_files(root))


def elsewhere(events: list[tuple[str, str]], *allowed: Path) -> list[str]:
    """Changes outside the allowed folders, bytecode caches aside (a module imported for the
    first time since its source changed gets its .pyc rewritten: Python's doing, not ours)."""
    ok = [os.path.realpath(a) for a in allowed]
    return [f"{event} {path}" for event, path in events
            if "__pycache__" not in path and not path.endswith(".pyc")
            and not any(path == a or path.startswith(a + os.sep) for a in ok)]


# -- what is on disk, and every attempt to change it ------------------------------------------
def snapshot(root: Path, ctime: bool = True) -> dict[str, tuple]:
    """Every path under root (root included, folders too) -> kind, mode, size, mtime_ns,
    (ctime_ns,) and the sha256 of a file's content or a link's target. ctime catches a write
    whose mtime was put back."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in ["", *dirs, *files]:
            path = os.path.join(folder, name) if name else folder
            if name == "" and folder != str(root):
                continue  # each folder is listed once, as its parent's entry
            st = os.lstat(path)
            if os.path.islink(path):
                kind, digest = "link", os.readlink(path)
            elif os.path.isdir(path):
                kind, digest = "dir", None
            else:
                kind = "file"
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            key = os.path.relpath(path, root)
            out[key] = (kind, st.st_mode, st.st_size if kind != "dir" else None, st.st_mtime_ns,
                        *((st.st_ctime_ns,) if ctime else ()), digest)
    return out


def changes(before: dict, after: dict) -> list[str]:
    """What differs between two snapshots, one line each."""
    fields = ("kind", "mode", "size", "mtime_ns", "ctime_ns", "content")
    lines = [f"new: {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"gone: {p}" for p in sorted(before.keys() - after.keys())]
    for p in sorted(before.keys() & after.keys()):
        if before[p] != after[p]:
            diff = [f for f, x, y in zip(fields, before[p], after[p]) if x != y]
            lines.append(f"changed {', '.join(diff)}: {p}")
    return lines


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# audit event -> which of its arguments name a path it changes
_MUTATING = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,),
             "os.chown": (0,), "os.utime": (0,), "os.truncate": (0,), "os.mkfifo": (0,),
             "os.mknod": (0,), "shutil.rmtree": (0,), "os.rename": (0, 1), "shutil.move": (0, 1),
             "os.link": (1,), "os.symlink": (1,), "shutil.copyfile": (1,)}


def _writable(fd: int) -> bool:
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        return False


class WriteAudit:
    """A sys.addaudithook listener (installed once per process, active only inside `with`):
    every open for writing, creation, removal, rename, chmod, utime, truncate or writable
    mmap, from any thread, with its path. Catches an attempt even when it fails or when the
    content is put back."""

    _active: list[WriteAudit] = []
    _installed = False
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []  # (event, absolute path)

    def __enter__(self) -> WriteAudit:
        if not WriteAudit._installed:
            sys.addaudithook(WriteAudit._hook)
            WriteAudit._installed = True
        WriteAudit._active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        WriteAudit._active.remove(self)

    def under(self, *roots: Path) -> list[str]:
        real = [os.path.realpath(r) for r in roots]
        return [f"{event} {path}" for event, path in self.events
                if any(path == r or path.startswith(r + os.sep) for r in real)]

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        if not WriteAudit._active:
            return
        try:
            WriteAudit._record(event, args)
        except Exception:  # noqa: BLE001 - an exception here would abort the audited call
            pass

    @staticmethod
    def _record(event: str, args: tuple) -> None:
        paths: list = []
        if event == "open":
            path, _mode, flags = args
            if flags is not None and flags & _WRITE_FLAGS:
                paths = [path]
        elif event in _MUTATING:
            paths = [args[i] for i in _MUTATING[event] if i < len(args)]
        elif event == "mmap.__new__":
            fd, _length, access, _offset = args
            if fd != -1 and (access == mmap.ACCESS_WRITE or (
                    access == mmap.ACCESS_DEFAULT and _writable(fd))):
                paths = [fd]
        if not paths:
            return
        for path in paths:
            try:
                if isinstance(path, int):
                    path = os.readlink(f"/proc/self/fd/{path}")
                path = os.path.realpath(os.fsdecode(path))
            except (OSError, TypeError, ValueError):
                path = repr(path)
            with WriteAudit._lock:
                for audit in WriteAudit._active:
                    audit.events.append((event, path))


# -- the environment: every state, cache and home folder inside tmp --------------------------
@pytest.fixture(autouse=True)
def quick_pilot(monkeypatch):
    """Pilot waits after each key until the process looks idle, sampling every 20 ms (about
    0.1 s a key). Sampling every 4 ms makes a walk through every screen 2-3x faster. Tests
    never rely on that heuristic: `settle` waits for the workers and for every queued
    message (Pilot.pause), which is exact."""
    import textual._wait

    monkeypatch.setattr(textual._wait, "SLEEP_GRANULARITY", 0.004)
    monkeypatch.setattr(textual._wait, "SLEEP_IDLE", 0.0002)


@pytest.fixture
def isolated(tmp_path, monkeypatch) -> dict[str, Path]:
    """XDG_STATE_HOME, XDG_CACHE_HOME, CKPT_BROWSER_CACHE and HOME inside tmp, cwd an empty
    tmp folder; returns those folders (all created empty)."""
    dirs = {name: tmp_path / name for name in ("state", "cache", "remote-cache", "home", "cwd")}
    for d in dirs.values():
        d.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(dirs["state"]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(dirs["cache"]))
    monkeypatch.setenv("CKPT_BROWSER_CACHE", str(dirs["remote-cache"]))
    monkeypatch.setenv("HOME", str(dirs["home"]))
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(dirs["cwd"])
    return dirs


# -- the browser, opened the way `ckpt-browser PATH` opens it ----------------------------------
def open_browser(path: str):
    """cli.cmd_browse without the terminal: a folder of checkpoints opens its newest, with
    the timeline behind `c`."""
    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.producers.recognise import find_checkpoints
    from ckpt_browser.producers.timeline import is_timeline
    from ckpt_browser.tui.app import make_app

    timeline = None
    if is_timeline(path):
        entries = find_checkpoints(path)
        timeline, path = (path, entries), entries[0].path
    return recording_notes(make_app(open_layout(path), timeline))


def recording_notes(app):
    """Keep every notice the app shows: a notice leaves the screen after its timeout (8 s),
    which a walk on a loaded machine outlasts, so the test reads what was said, not what is
    still showing."""
    said: list[str] = []
    show = app.notify

    def notify(message, *, title="", **kw):
        said.append(f"{title or ''}: {message}")
        return show(message, title=title, **kw)

    app.notify = notify
    app.notes_said = said
    return app


def screen_text(app) -> str:
    """What the terminal shows, as plain text (the screen and the modal's background)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


class Watch:
    """Collects failed workers (message_hook) so a test can say which one failed and why."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def __call__(self, message) -> None:
        from textual.worker import Worker, WorkerState

        if isinstance(message, Worker.StateChanged) and message.state == WorkerState.ERROR:
            err = message.worker.error
            self.failed.append(f"worker {message.worker.name!r}: {type(err).__name__}: {err}")


async def settle(app, pilot, rounds: int = 30) -> None:
    """Wait until no worker runs (headers, then training state, then modules ...) and the
    screen has taken in what they read."""
    await loaded(app, pilot, rounds)


def alive(app) -> None:
    assert app.is_running, "the app stopped"
    assert app._exception is None, f"the app raised {app._exception!r}"


def notes(app) -> list[str]:
    """Every notice shown since the app opened (open_browser records them)."""
    return list(app.notes_said)


def cursor_key(app):
    from ckpt_browser.tui.browse.tree import CheckpointTree
    from ckpt_browser.tui.browse.values_session import tensor_key

    node = app.query_one(CheckpointTree).cursor_node
    return tensor_key(node.data if node is not None else None)


async def to_first_tensor(app, pilot, limit: int = 300) -> bool:
    """Highlight the first tensor found breadth-first (shallow ones first: a Megatron file
    has a long `args` before its model), expanding nodes on the way as Right would."""
    from ckpt_browser.tui.browse.tree import CheckpointTree
    from ckpt_browser.tui.browse.values_session import tensor_key

    tree = app.query_one(CheckpointTree)
    level = list(tree.root.children)
    for _ in range(12):  # levels deep
        for node in level:
            if tensor_key(node.data) is not None:
                tree.move_cursor(node)
                await pilot.pause()
                return cursor_key(app) == tensor_key(node.data)
        level = level[:limit]
        for node in level:
            if node.allow_expand and not node.is_expanded:
                node.expand()  # the tree fills it when it hears of it
        await pilot.pause()
        level = [child for node in level for child in node.children]
    return False


async def walk_browser(app, pilot, texts: dict[str, str], help_too: bool = True) -> None:
    """Every screen of the browser, back to the main one each time: t, m, r, p, ? (unless
    not `help_too`), z (one answer), c (when a timeline is there: open the next checkpoint),
    v on a tensor. `texts` gets each screen's text by key."""
    from ckpt_browser.tui.browse.timeline import TimelineScreen
    from ckpt_browser.tui.browse.tree import CheckpointTree
    from ckpt_browser.tui.common.quiz import QuizScreen

    await settle(app, pilot)
    if app.first.picker_first:  # a folder of checkpoints opens with the list of them on top
        assert isinstance(app.screen, TimelineScreen), app.screen_stack
        texts["c-first"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
    assert len(app.screen_stack) == 1, app.screen_stack
    texts["main"] = screen_text(app)
    tree = app.query_one(CheckpointTree)
    first_mode = tree.mode  # "file"
    walk = [("t", "t"), ("m", "m"), ("r", "escape"), ("p", "escape")]
    for key, back in walk + ([("question_mark", "escape")] if help_too else []):
        await pilot.press(key)
        await settle(app, pilot, rounds=3)
        alive(app)
        texts[key] = screen_text(app)
        await pilot.press(back)
        await pilot.pause()
        assert len(app.screen_stack) == 1, f"{key} then {back}: {app.screen_stack}"
    # m from the state view goes to shards, and m again to modules: back where it started
    for _ in range(2):
        if tree.mode != first_mode:
            await pilot.press("t" if first_mode == "state" else "m")
            await pilot.pause()
    assert tree.mode == first_mode
    await pilot.press("z")
    await pilot.pause()
    if isinstance(app.screen, QuizScreen):
        await pilot.press("1")
        await pilot.pause()
        texts["z"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
    assert len(app.screen_stack) == 1, app.screen_stack
    if app.first.timeline:
        await pilot.press("c")
        await pilot.pause()
        texts["c"] = screen_text(app)
        await pilot.press("down", "enter")  # the next older checkpoint
        await settle(app, pilot)
        alive(app)
        assert len(app.screen_stack) == 1, app.screen_stack
        texts["c-opened"] = screen_text(app)
    if await to_first_tensor(app, pilot):
        await pilot.press("v")
        await settle(app, pilot)
        alive(app)
        texts["v"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()


# -- damaged inputs, built from the samples into a tmp folder ---------------------------------
RELEASE = "tiny-llama-release"
HF = "hf-run3/checkpoint-2"


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(SAMPLES / name, dest, symlinks=True)
    return dest


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _garbage(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _break_central_directory(path: Path) -> None:
    """Every central-directory record signature overwritten: the end record still points at
    the directory, but what is there is not a directory."""
    data = path.read_bytes()
    assert b"PK\x01\x02" in data
    path.write_bytes(data.replace(b"PK\x01\x02", b"XX\x01\x02"))


def missing_shard(d: Path) -> Path:
    _copy(RELEASE, d)
    (d / "model-00002-of-00003.safetensors").unlink()
    return d


def truncated_shard(d: Path) -> Path:
    _copy(RELEASE, d)
    shard = d / "model-00001-of-00003.safetensors"
    _truncate(shard, shard.stat().st_size // 2)
    return d


def truncated_header(d: Path) -> Path:
    _copy(RELEASE, d)
    _truncate(d / "model-00003-of-00003.safetensors", 40)
    return d


def garbage_shard(d: Path) -> Path:
    _copy(RELEASE, d)
    (d / "model-00002-of-00003.safetensors").write_bytes(_garbage(4096))
    return d


def huge_header_shard(d: Path) -> Path:
    """A header length of 10**12 bytes in a 40 KB file."""
    _copy(RELEASE, d)
    shard = d / "model-00001-of-00003.safetensors"
    data = shard.read_bytes()
    shard.write_bytes((10**12).to_bytes(8, "little") + data[8:])
    return d


def unreadable_shard(d: Path) -> Path:
    _copy(RELEASE, d)
    os.chmod(d / "model-00002-of-00003.safetensors", 0)
    return d


def index_all_missing(d: Path) -> Path:
    """Only the index (and config): every file it names is gone."""
    _copy(RELEASE, d)
    for shard in d.glob("*.safetensors"):
        shard.unlink()
    return d


def index_extra_missing(d: Path) -> Path:
    """The index also names a tensor in a fourth file that is not there."""
    _copy(RELEASE, d)
    index = d / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"]["model.extra.weight"] = "model-00004-of-00004.safetensors"
    index.write_text(json.dumps(doc))
    return d


def garbage_index(d: Path) -> Path:
    _copy(RELEASE, d)
    index = d / "model.safetensors.index.json"
    index.write_text(index.read_text()[:200])  # cut in the middle of the JSON
    return d


def torch_zip_broken_cd(d: Path) -> Path:
    """An HF Trainer checkpoint whose optimizer.pt has a broken central directory."""
    _copy(HF, d)
    _break_central_directory(d / "optimizer.pt")
    return d


def torch_zip_truncated(d: Path) -> Path:
    """scheduler.pt cut in half: no end record, no central directory."""
    _copy(HF, d)
    pt = d / "scheduler.pt"
    _truncate(pt, pt.stat().st_size // 2)
    return d


def trainer_state_garbage(d: Path) -> Path:
    _copy(HF, d)
    (d / "trainer_state.json").write_text('{"global_step": 2, "log_history": [')
    return d


def ckpt_broken_cd(d: Path) -> Path:
    """A Lightning folder whose newest .ckpt has a broken central directory."""
    _copy("lightning", d)
    _break_central_directory(d / "last.ckpt")
    return d


def dcp_missing_rank(d: Path) -> Path:
    _copy("dcp-ranks/ranks-2", d)
    (d / "__1_0.distcp").unlink()
    return d


def dcp_garbage_metadata(d: Path) -> Path:
    _copy("dcp-ranks/ranks-2", d)
    (d / ".metadata").write_bytes(_garbage(512, seed=1))
    return d


def garbage_named_safetensors(d: Path) -> Path:
    """Random bytes in a file named .safetensors: opened as safetensors, reported damaged."""
    d.mkdir()
    f = d / "model.safetensors"
    f.write_bytes(_garbage(4096, seed=2))
    return f


# name -> builder(dest) -> the path to open. Each is damaged but openable: the UI must show it.
DAMAGED: dict[str, Callable[[Path], Path]] = {
    "missing-shard": missing_shard,
    "truncated-shard": truncated_shard,
    "truncated-header": truncated_header,
    "garbage-shard": garbage_shard,
    "huge-header-shard": huge_header_shard,
    "unreadable-shard": unreadable_shard,
    "index-all-missing": index_all_missing,
    "index-extra-missing": index_extra_missing,
    "garbage-index": garbage_index,
    "torch-zip-broken-cd": torch_zip_broken_cd,
    "torch-zip-truncated": torch_zip_truncated,
    "trainer-state-garbage": trainer_state_garbage,
    "ckpt-broken-cd": ckpt_broken_cd,
    "dcp-missing-rank": dcp_missing_rank,
    "dcp-garbage-metadata": dcp_garbage_metadata,
    "garbage-named-safetensors": garbage_named_safetensors,
}


def garbage_file(d: Path) -> Path:
    """Random bytes under a name no reader claims."""
    d.mkdir()
    f = d / "weights.dat"
    f.write_bytes(_garbage(4096, seed=3))
    return f


def empty_folder(d: Path) -> Path:
    d.mkdir()
    return d


def missing_path(d: Path) -> Path:
    return d / "no-such-checkpoint"


# Unusable: open_layout refuses them, so the CLI says so in one line before any screen.
UNOPENABLE: dict[str, Callable[[Path], Path]] = {
    "garbage-file": garbage_file,
    "empty-folder": empty_folder,
    "missing-path": missing_path,
}


def root_ignores_permissions() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# -- the diff app: `ckpt-browser A B` ----------------------------------------------------------
def open_diff(a: str, b: str):
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.tui.app import make_diff_app
    from ckpt_browser.values.diff import Options, side_of

    return make_diff_app(side_of(open_path(a)), side_of(open_path(b)), Options())


async def walk_diff(app, pilot, texts: dict[str, str]) -> None:
    """v (compare every value), f (filter), s (sort), t (state tensors and back), i, p and ?
    (each window closed again); `texts` gets each screen's text."""
    await settle(app, pilot)
    texts["main"] = screen_text(app)
    await pilot.press("v")
    await settle(app, pilot)
    alive(app)
    texts["v"] = screen_text(app)
    for key in ("f", "s", "t"):
        await pilot.press(key)
        await pilot.pause()
        texts[key] = screen_text(app)
    await pilot.press("t", "f", "s")  # back to the weights, every row, by name
    for key in ("i", "p", "question_mark"):
        await pilot.press(key)
        await pilot.pause()
        alive(app)
        texts[key] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1, f"{key} then escape: {app.screen_stack}"
