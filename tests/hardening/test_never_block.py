"""Never block, never follow a loop (README "Safety").

- Every open of a path in the package goes through readers/regular.py (open_regular, and
  read_small for small files with a size cap), which refuses FIFOs, sockets and devices
  without blocking, and every folder listing through readers/walk.py (list_folder: bounded,
  links that loop back left out). The package's source is read (AST) for any other way to open
  or list a path, so a new one cannot slip in; the few exceptions are listed with a reason each.
- The small files read beside checkpoints (the Hugging Face cache's refs/, the quiz's own
  files, the remote mirror's manifest) are refused at once when they are FIFOs or devices.
- Run folders: a link back to the folder itself or above it is a warning naming the link and
  where it points, never a checkpoint; each real folder is listed once; walks are bounded and
  say so when the bound cuts them.

Each test runs under an alarm, or in a child process with a timeout: on the code before this
change the FIFO cases hung and the loops were read as checkpoints.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_browser.errors import CheckpointError
from ckpt_browser.model import WARNING

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ckpt_browser"
CORPUS = REPO / "tests" / "malicious" / "corpus"
CONTROL_HF = CORPUS / "control-hf" / "checkpoint-1"


class Hang(BaseException):
    """From the alarm: `except Exception` in the code under test cannot swallow it."""


@contextlib.contextmanager
def no_hang(seconds: int = 10):
    def alarm(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- no bare open ---------------------------------------------------------------------------------

# Calls that open or list a path, by the name they are called by.
OPENING = {"open", "io.open", "os.open", "os.fdopen", "codecs.open", "tarfile.open",
           "zipfile.ZipFile", "ZipFile", "mmap.mmap", "np.load", "numpy.load", "np.fromfile",
           "numpy.fromfile", "np.memmap", "numpy.memmap", "safe_open", "torch.load",
           "torch.jit.load", "pickle.load", "os.listdir", "os.scandir", "os.walk", "glob.glob",
           "glob.iglob"}
# Methods that do, whatever they are called on (Path.read_text, Path.iterdir, zf.open ...).
OPENING_METHODS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "iterdir",
                   "glob", "rglob"}
THE_ONE_WAY = {"ckpt_browser/readers/regular.py", "ckpt_browser/readers/walk.py"}

# (file, call) -> (how many, why it is safe)
ALLOWED = {
    ("ckpt_browser/diagnostics.py", "os.open"): (
        1, "os.devnull opened for writing, to silence stdout: no path from the user"),
    ("ckpt_browser/quiz/progress.py", "os.fdopen"): (
        1, "the fd of tempfile.mkstemp: a new file created with O_EXCL for the user's own "
           "progress, never an existing FIFO"),
    ("ckpt_browser/readers/torchfile.py", "zipfile.ZipFile"): (
        1, "on a file object from open_regular"),
    ("ckpt_browser/readers/zipentries.py", "zf.open"): (
        1, "a member of a zip already open: no path"),
    ("ckpt_browser/parts/files.py", "zipfile.ZipFile"): (
        1, "on io.BytesIO of bytes already read"),
    ("ckpt_browser/remote/mirror.py", "zipfile.ZipFile"): (
        1, "on a file object from open_regular"),
    ("ckpt_browser/remote/fs.py", "fs.open"): (
        1, "an fsspec object in a remote store, not a local path"),
    ("ckpt_browser/remote/mirror.py", "open"): (
        2, "writes the mirror's own files in its own cache folder (sparse copies it sizes, "
           "and its manifest through a temporary file): nothing there comes from a checkpoint"),
    ("ckpt_browser/remote/mirror.py", "os.open"): (
        1, "writes bytes fetched into the mirror's own sparse copy, made just before"),
    ("ckpt_browser/export/write.py", "os.open"): (
        2, "creates export's own new files in OUT's partial folder, O_CREAT | O_EXCL: an "
           "existing FIFO or link there fails instead of being opened"),
    ("ckpt_browser/export/write.py", "os.scandir"): (
        1, "whether OUT, the folder export is to write into, is empty: its first entry only, "
           "never the whole listing, never walked"),
    ("ckpt_browser/remote/mirror.py", "os.walk"): (
        1, "walks the mirror's own cache folder (links not followed), to remove files gone "
           "from the remote; it holds at most the 20,000 files one URL may list"),
}


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_called(func.value) or '<expr>'}.{func.attr}"
    return None


def bare_opens() -> collections.Counter:
    found: collections.Counter = collections.Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in THE_ONE_WAY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if not isinstance(node, ast.Call):
                continue
            name = _called(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in OPENING or method in OPENING_METHODS:
                found[(rel, name)] += 1
    return found


def test_every_open_and_listing_goes_through_the_one_way():
    found = bare_opens()
    new = {k: n for k, n in found.items() if n > ALLOWED.get(k, (0, ""))[0]}
    assert not new, ("open or list paths through readers.regular.open_regular / read_small "
                     "and readers.walk.list_folder (or add the call to ALLOWED with why it "
                     f"cannot block or loop): {sorted(new.items())}")
    gone = {k for k in ALLOWED if found[k] < ALLOWED[k][0]}
    assert not gone, f"ALLOWED lists calls that are gone; drop them: {sorted(gone)}"


# -- small files that must not block --------------------------------------------------------------

def _hf_cache(root: Path) -> tuple[Path, Path]:
    """control-hf-cache as huggingface_hub lays it out: <root>/models--org--tiny, refs/main
    naming the snapshot 0123abcd."""
    repo = root / "models--org--tiny"
    shutil.copytree(CORPUS / "control-hf-cache", repo, symlinks=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    return repo, repo / "snapshots" / "0123abcd"


def _special(path: Path, kind: str) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink(kind, path)


@pytest.mark.parametrize("kind,words", [("fifo", "FIFO"), ("/dev/zero", "character device")])
def test_hf_cache_refs_main_special_file_is_a_warning(tmp_path, kind, words):
    from ckpt_browser.producers.layout import open_layout

    repo, snap = _hf_cache(tmp_path / "hub")
    _special(repo / "refs" / "main", kind)
    with no_hang():
        layout = open_layout(str(snap))
    said = [p for p in layout.problems if "refs/main" in p.message]
    assert said and said[0].severity == WARNING and words in said[0].message, layout.problems
    assert layout.shown_as == "hf cache: org/tiny @ 0123abcd"  # no branch named: main unread


def test_offline_hf_url_whose_refs_main_is_a_fifo_says_one_line(tmp_path):
    repo, _ = _hf_cache(tmp_path / "hub")
    _special(repo / "refs" / "main", "fifo")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "ckpt_browser", "inspect", "hf://org/tiny"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, (run.returncode, run.stderr)
    assert "hf://org/tiny" in lines[0] and "refs/main" in lines[0] and "FIFO" in lines[0]


@pytest.mark.parametrize("target", [".", ".."])
def test_hf_snapshot_linked_back_into_the_cache_is_a_loop(tmp_path, target):
    """snapshots/loopy -> . (the snapshots folder) or .. (the repo folder): one line."""
    from ckpt_browser.analysis.opened import pick
    from ckpt_browser.producers.layout import open_layout

    repo, _ = _hf_cache(tmp_path / "hub")
    loopy = repo / "snapshots" / "loopy"
    os.symlink(target, loopy)
    for opens in (lambda: pick(str(loopy), None), lambda: open_layout(str(loopy))):
        with no_hang(), pytest.raises(CheckpointError) as e:
            opens()
        assert "a loop" in e.value.problem and str(loopy) in str(e.value)


def test_quiz_files_that_are_fifos_do_not_block(tmp_path):
    from ckpt_browser.quiz.bank import BankError, load_bank
    from ckpt_browser.quiz.progress import load_progress

    fifo = tmp_path / "quiz.json"
    os.mkfifo(fifo)
    with no_hang():
        progress = load_progress(fifo)
        with pytest.raises(BankError) as e:
            load_bank(fifo)
    assert "FIFO" in progress.note and "starting fresh" in progress.note
    assert "FIFO" in str(e.value)


def test_a_mirror_manifest_that_is_a_fifo_does_not_block(tmp_path):
    from ckpt_browser.remote.mirror import _load_manifest

    fifo = tmp_path / ".manifest.json"
    os.mkfifo(fifo)
    with no_hang():
        assert _load_manifest(str(fifo)) == {}  # as a missing manifest: fetched again


# -- run folders: loops are findings, never checkpoints -------------------------------------------

def _run(tmp_path: Path, links: dict[str, str]) -> Path:
    """A run folder holding control-hf's checkpoint-1 and the links given (name -> target)."""
    run = tmp_path / "run"
    shutil.copytree(CONTROL_HF, run / "checkpoint-1")
    for name, target in links.items():
        (run / name).parent.mkdir(exist_ok=True)
        os.symlink(target, run / name)
    return run


LOOPS = {  # links planted -> the link a warning must name, and words it must say
    "self": ({"checkpoint-9": "."}, "checkpoint-9", "leads back to the folder it is in"),
    "parent": ({"checkpoint-7": ".."}, "checkpoint-7", "a folder above it"),
    "nest": ({"checkpoints": "."}, "checkpoints", "leads back to the folder it is in"),
    "folder-chain": ({"b/checkpoint-6": "../checkpoint-5", "checkpoint-5": "b"},
                     "checkpoint-5", "holds only links back"),
    "link-chain": ({"checkpoint-2": "checkpoint-3", "checkpoint-3": "checkpoint-2"},
                   "checkpoint-2", "symlink loop"),
    "through-another-run": ({"checkpoint-5": "../side", "../side/checkpoint-6": "../run"},
                            "checkpoint-5", "holds only links back"),
}


@pytest.mark.parametrize("case", list(LOOPS))
def test_a_loop_in_a_run_folder_is_a_warning_never_a_checkpoint(tmp_path, case):
    """The CLI's way: pick the run's newest, open it. Before, checkpoint-9 -> . was the newest
    checkpoint, read 40 folders deep; checkpoint-7 -> .. an empty newer one."""
    from ckpt_browser.analysis.opened import pick
    from ckpt_browser.producers.layout import open_layout

    (tmp_path / "side").mkdir()
    links, link, words = LOOPS[case]
    run = _run(tmp_path, links)
    with no_hang():
        path, timeline = pick(str(run), None)
        layout = open_layout(path)
    assert [e.name for e in timeline] == ["checkpoint-1"]
    assert path == str(run / "checkpoint-1")
    said = [p for p in layout.problems if link in p.message and words in p.message]
    assert said and all(p.severity == WARNING for p in said), layout.problems
    assert not any(p.severity == "error" for p in layout.problems), layout.problems


def test_a_loop_beside_a_lightning_file_is_a_warning_never_a_checkpoint(tmp_path):
    """A run of .ckpt files: the newest is a file, opened by its path; the loop beside it is
    still said (epoch=9-step=90.ckpt -> . was a Lightning folder newer than any file)."""
    from ckpt_browser.analysis.opened import pick
    from ckpt_browser.producers.layout import open_layout

    run = tmp_path / "lightning"
    shutil.copytree(REPO / "sample_checkpoints" / "lightning", run)
    os.symlink(".", run / "epoch=9-step=90.ckpt")
    with no_hang():
        path, timeline = pick(str(run), None)
        layout = open_layout(path)
    assert "epoch=9-step=90.ckpt" not in [e.name for e in timeline]
    assert path == str(run / "epoch=0-step=4.ckpt")
    assert any("epoch=9-step=90.ckpt is a symlink to '.'" in p.message and "a loop" in p.message
               and p.severity == WARNING for p in layout.problems), layout.problems


def test_a_loop_inside_a_checkpoint_folder_is_a_warning_not_a_damaged_file(tmp_path):
    """checkpoint-1/up -> .. was listed as a file and read: 'up: is a folder', an error."""
    from ckpt_browser.analysis.opened import open_path

    run = _run(tmp_path, {"checkpoint-1/up": ".."})
    with no_hang():
        ckpt = open_path(str(run / "checkpoint-1")).checkpoint
    assert "up" not in ckpt.layout.files
    (said,) = [p for p in ckpt.problems if p.file == "up"]
    assert said.severity == WARNING and "a loop" in said.message
    assert not ckpt.damaged, ckpt.problems


def test_opening_the_loop_link_itself_shows_the_real_checkpoint_once(tmp_path):
    from ckpt_browser.producers.recognise import detect

    run = _run(tmp_path, {"checkpoint-9": "."})
    with no_hang():
        det = detect(str(run / "checkpoint-9"))
    assert det.path == str(run / "checkpoint-9" / "checkpoint-1")  # one level, not 40


@pytest.mark.parametrize("links,names", [
    ({"checkpoint-9": "checkpoint-1"}, ["checkpoint-1"]),  # the same real folder twice
    ({"checkpoint-8": "/", "checkpoint-9": "checkpoint-1"}, ["checkpoint-1"]),
])
def test_the_timeline_lists_each_real_folder_once(tmp_path, links, names):
    from ckpt_browser.producers.recognise import find_checkpoints

    run = _run(tmp_path, links)
    with no_hang():
        assert [e.name for e in find_checkpoints(str(run))] == names


def test_two_links_to_one_blob_stay_two_checkpoints(tmp_path):
    """The Hugging Face cache links identical files to one blob: those are not duplicates."""
    from ckpt_browser.producers.recognise import find_checkpoints

    (tmp_path / "blob").write_bytes(b"x")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("epoch=1-step=10.ckpt", "epoch=2-step=20.ckpt"):
        os.symlink("../blob", run / name)
    assert [e.step for e in find_checkpoints(str(run))] == [20, 10]


# -- every walk is bounded, and says so when the bound cuts it -----------------------------------

def test_a_folder_over_the_entry_bound_is_cut_and_said(tmp_path, monkeypatch):
    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.readers import walk

    monkeypatch.setattr(walk, "MAX_ENTRIES", 5)
    for i in range(8):
        (tmp_path / f"notes-{i}.txt").write_text("x")
    layout = open_layout(str(tmp_path))
    assert len(layout.files) == 5
    assert any("over 5 entries" in p.message and p.severity == WARNING
               for p in layout.problems), layout.problems


def test_run_folders_nested_past_the_bound_are_not_followed(tmp_path, monkeypatch):
    """checkpoint-1/checkpoint-1/... each a run folder of one: detection stops, and says so."""
    from ckpt_browser.producers import recognise

    monkeypatch.setattr(recognise, "MAX_DEPTH", 3)
    deep = tmp_path
    for _ in range(6):
        deep = deep / "checkpoint-1"
    deep.mkdir(parents=True)
    (deep / "notes.txt").write_text("x")
    with no_hang():
        det = recognise.detect(str(tmp_path))
    assert det.path == str(tmp_path / "checkpoint-1" / "checkpoint-1" / "checkpoint-1")
    assert any("nested over 3 deep" in p.message for p in det.problems), det.problems


def test_folders_nested_past_the_bound_are_refused_in_one_line(tmp_path):
    """A chain of single folders around a checkpoint (a work_dir around a run) is followed
    walk.MAX_DEPTH deep; past that the path is refused, naming it, not searched."""
    from ckpt_browser.analysis.opened import pick
    from ckpt_browser.readers.walk import MAX_DEPTH

    deep = tmp_path / "outer"
    for _ in range(MAX_DEPTH + 4):
        deep = deep / "d"
    shutil.copytree(CONTROL_HF, deep / "checkpoint-1")
    with no_hang(), pytest.raises(CheckpointError) as e:
        pick(str(tmp_path / "outer"), None)
    assert "nested" in e.value.problem and str(tmp_path / "outer") in str(e.value)
