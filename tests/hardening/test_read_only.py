"""Read-only guarantee: every subcommand and both terminal apps run on every sample
change nothing on disk.

The samples are copied into tmp first (a write must not dirty the repository); each sample path
(every folder under sample_checkpoints/, and each .ckpt file) gets `inspect`, `inspect --json`,
`check`, `check --json`, `check --world-size 3`, `stats` (default tensors, a glob, --json),
`diff` against itself and against another sample (`--values`, `--json`), `quiz --from`, a
browser session through every screen and a diff-app session. Before and after: the sha256,
size, mode, mtime and ctime of every path in the copied tree (folders too, and the folder that
holds the samples, i.e. "beside the checkpoint"), the cwd (an empty tmp folder), HOME, and the
real sample_checkpoints/. An audit hook also records every attempt to open for writing, create,
remove, rename, chmod, utime or truncate, from any thread, so a failed or undone write counts.
State and caches go to tmp through XDG_STATE_HOME, XDG_CACHE_HOME and CKPT_BROWSER_CACHE.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.hardening.conftest import (
    SAMPLES,
    Watch,
    WriteAudit,
    alive,
    changes,
    elsewhere,
    open_browser,
    open_diff,
    sample_paths,
    settle,
    snapshot,
    to_first_tensor,
    top_samples,
)

OTHER, OTHER_FOR_OTHER = "tiny-llama-release", "tiny-llama-run/checkpoint-6"
ANSWERS = "1\n" * 40  # more than enough for two questions and the prompts between them

# exit codes each subcommand may give on a sample (70 means a bug)
ALLOWED = {"inspect": {0, 5}, "check": {0, 3, 4, 5}, "stats": {0, 2, 5}, "diff": {0, 1, 2},
           "quiz": {0}}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """tmp/.../tree/sample_checkpoints: a copy of the samples, mtimes kept."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(SAMPLES, root / "sample_checkpoints", symlinks=True)
    return root


@pytest.fixture(scope="module")
def real_before() -> dict:
    return snapshot(SAMPLES, ctime=False)  # a checkout or merge may touch ctimes legitimately


def run_cli(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    from ckpt_browser.cli import main

    out, err = io.StringIO(), io.StringIO()
    real_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        sys.stdin = real_stdin
    return code, out.getvalue(), err.getvalue()


def newest(path: str) -> str:
    """The checkpoint a folder of checkpoints stands for (diff refuses the folder itself)."""
    from ckpt_browser.producers.recognise import find_checkpoints
    from ckpt_browser.producers.timeline import is_timeline

    return find_checkpoints(path)[0].path if is_timeline(path) else path


def browsed() -> set[str]:
    """The paths the browser session runs on: each sample, and each project's folder (each a
    different producer's layout)."""
    return {*top_samples(), *(f"projects/{p.name}" for p in (SAMPLES / "projects").iterdir()
                              if p.is_dir())}


def commands(path: str, other: str) -> list[tuple[list[str], str]]:
    one = newest(path)
    runs = [["inspect", path], ["inspect", path, "--json"],
            ["check", path], ["check", path, "--json"], ["check", path, "--world-size", "3"],
            ["stats", path], ["stats", path, "*"], ["stats", path, "--json", "*"],
            ["diff", path, path, "--values"], ["diff", path, other, "--values"],
            ["diff", path, other, "--json"]]
    if one != path:  # a folder of checkpoints: diff its newest too
        runs += [["diff", one, one, "--values"], ["diff", one, other, "--values"]]
    runs = [(argv, "") for argv in runs]
    runs.append((["quiz", "--from", path, "--count", "2", "--seed", "1", "--no-save"], ANSWERS))
    return runs


def check_outcome(argv: list[str], code: int, out: str, err: str) -> list[str]:
    """Why this run looks like a bug (empty when it does not)."""
    command, bad = argv[0], []
    if code not in ALLOWED[command]:
        bad.append(f"exit {code}")
    if "internal error" in err or "Traceback" in err:
        bad.append(f"stderr: {err.strip()}")
    if "--json" in argv and code in (0, 1, 3, 4, 5) and out.strip():
        try:
            json.loads(out)
        except ValueError as e:
            bad.append(f"--json output is not JSON: {e}")
    return [f"ckpt-browser {' '.join(argv)}: {b}" for b in bad]


async def browser_session(path: str) -> list[str]:
    """The list of checkpoints (a folder of them: open the second newest), v on a tensor, m,
    t, v on a training-state tensor, r, p, z (one answer, saved on Esc), ?, c, q."""
    from ckpt_browser.tui.browse.tree import CheckpointTree

    watch = Watch()
    app = open_browser(path)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await settle(app, pilot)
        if app.first.picker_first:  # the list of checkpoints is on top: take the next one
            await pilot.press("down", "enter")
            await settle(app, pilot)
        tree = app.query_one(CheckpointTree)
        first_mode = tree.mode
        if await to_first_tensor(app, pilot):
            await pilot.press("v")
            await settle(app, pilot)
        await pilot.press("m", "t")  # from either view: modules (or shards), then state
        await settle(app, pilot)
        if first_mode != "state" and await to_first_tensor(app, pilot):
            await pilot.press("v")
            await settle(app, pilot)
        await pilot.press("r", "escape", "p", "escape", "z", "1", "escape",
                          "question_mark", "escape",
                          *(("c", "escape") if app.first.timeline else ()))
        await settle(app, pilot)  # nothing may still be reading when q is pressed
        alive(app)
        assert len(app.screen_stack) == 1, app.screen_stack
        await pilot.press("q")
        await pilot.pause()
    return watch.failed


async def diff_session(a: str, b: str) -> list[str]:
    """v (read and compare every value), f, s, t, i, p, q."""
    watch = Watch()
    app = open_diff(a, b)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        await pilot.press("f", "s", "t", "i", "escape", "p", "escape")
        await settle(app, pilot)
        alive(app)
        assert len(app.screen_stack) == 1, app.screen_stack
        await pilot.press("q")
        await pilot.pause()
    return watch.failed


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", sample_paths())
async def test_nothing_changes_on_disk(name, tree, real_before, isolated):
    """Every subcommand on each sample path; the browser on each sample and each project
    (a run's own checkpoints are browsed from the run: its list opens one of them), the diff
    app on each sample. A browser session walks every screen and costs ~4 s; one per nested
    folder of the same run read the same files again."""
    samples = tree / "sample_checkpoints"
    path = str(samples / name)
    other = str(samples / (OTHER if name != OTHER else OTHER_FOR_OTHER))
    before = snapshot(tree)

    bugs: list[str] = []
    with WriteAudit() as audit:
        for argv, stdin in commands(path, other):
            bugs += check_outcome(argv, *run_cli(argv, stdin))
        if name in browsed():
            bugs += await browser_session(path)
        if name in top_samples():
            bugs += await diff_session(newest(path), other)

    assert changes(before, snapshot(tree)) == []
    assert audit.under(tree, SAMPLES, isolated["cwd"], isolated["home"]) == []
    assert elsewhere(audit.events, isolated["state"]) == []
    assert listing(isolated["cwd"]) == [], "files created in the working directory"
    assert listing(isolated["home"]) == [], "files created in HOME"
    assert listing(isolated["cache"]) == [] and listing(isolated["remote-cache"]) == []
    # the browser's quiz (z, one answer, Esc) saved its progress where XDG_STATE_HOME says
    saved = ["ckpt-browser", "ckpt-browser/quiz.json"] if name in browsed() else []
    assert listing(isolated["state"]) == saved
    assert changes(real_before, snapshot(SAMPLES, ctime=False)) == []
    assert bugs == []


async def test_default_sample_and_saved_quiz_progress(isolated, real_before):
    """No PATH: the bundled sample (in the repository, or inside the installed package) is
    read where it is; the CLI quiz, allowed to save, writes only under XDG_STATE_HOME."""
    import ckpt_browser

    package = Path(ckpt_browser.__file__).parent
    roots = [SAMPLES, package / "_samples"]
    before = [snapshot(r, ctime=False) if r.exists() else {} for r in roots]
    with WriteAudit() as audit:
        code, out, err = run_cli(["inspect"])
        assert code == 0 and out and not err
        code, out, err = run_cli(["quiz", "--count", "2", "--seed", "3"], ANSWERS)
        assert code == 0, err
        from ckpt_browser.samples import default_sample

        assert await browser_session(default_sample()) == []
    assert [snapshot(r, ctime=False) if r.exists() else {} for r in roots] == before
    assert audit.under(*roots, isolated["cwd"], isolated["home"]) == []
    assert listing(isolated["cwd"]) == [] and listing(isolated["home"]) == []
    assert listing(isolated["state"]) == ["ckpt-browser", "ckpt-browser/quiz.json"]
    assert elsewhere(audit.events, isolated["state"]) == []
    assert changes(real_before, snapshot(SAMPLES, ctime=False)) == []


def test_the_guard_sees_writes(tmp_path):
    """The snapshot and the audit hook catch a file created beside a checkpoint, a write whose
    mtime is put back, a chmod, and a write through a writable mmap in another thread."""
    import mmap
    import threading

    folder = tmp_path / "ckpt"
    shutil.copytree(SAMPLES / "tiny-llama-release", folder)
    shard = folder / "model-00001-of-00003.safetensors"
    before = snapshot(tmp_path)

    def sneaky() -> None:
        (folder / "config.json.lock").write_text("")
        st = shard.stat()
        with open(shard, "r+b") as f:
            f.write(f.read(8))  # the same bytes again, after them
        os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.chmod(folder / "config.json", 0o600)
        with open(folder / "generation_config.json", "r+b") as f, \
                mmap.mmap(f.fileno(), 0) as m:
            m[0:1] = m[0:1]

    with WriteAudit() as audit:
        worker = threading.Thread(target=sneaky)
        worker.start()
        worker.join()
    found = changes(before, snapshot(tmp_path))
    assert "new: ckpt/config.json.lock" in found
    assert any(line.endswith("ckpt/" + shard.name) and "ctime" in line for line in found)
    assert any(line.endswith("ckpt/config.json") and "mode" in line for line in found)
    seen = audit.under(folder)
    for event in ("open", "os.utime", "os.chmod", "mmap.__new__"):
        assert any(e.startswith(event + " ") for e in seen), (event, seen)
    assert elsewhere(audit.events, tmp_path) == []
