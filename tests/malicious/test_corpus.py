"""The malicious corpus: every case is reported in words, nothing in it runs, and
every command stays bounded in time and memory.

For each case (tests/malicious/README.md lists them) from an empty working folder:
- `inspect --json`, `check --json`, `stats --json '*'` and a TUI pilot session in the case's
  probe process (probe.py: forked from a warm parent, RLIMIT_AS 2 GiB, 20 s a step);
- `inspect`, `check` and `stats` again through `ckpt_browser.cli.main` in this process (SIGALRM
  and a temporary RLIMIT_AS), unless the probe showed that the case kills a process;
and after each: the exit code is a documented one (never 1), stderr is at most one line and
names the path, the problems say what is wrong in words, no PWNED-* file exists anywhere we
can look, the working folder is still empty and the corpus is byte-for-byte unchanged.

A separate test proves the corpus is live: the stock loaders (torch.load(weights_only=False),
pickle.load, DCP's reader, torch.jit.load, torch.export.load) do run each payload, in a
throwaway folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.malicious.conftest import (
    MAX_RSS_MB,
    REPO,
    STEP_SECONDS,
    Run,
    all_ids,
    child_env,
    corpus_stat,
    fresh_cwd,
    markers_in,
    probe,
    run_inline,
    target,
)
from tests.malicious.make_corpus import CASES, CORPUS, TEST_TIME_CASES, snapshot, write

IDS = all_ids()
GOOD_EXITS = {0, 2, 3, 4, 5}


# -- what the outputs say ------------------------------------------------------------------------

def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def inspect_text(run: Run) -> str:
    """Problems and component details of `inspect --json`, one per line, plus stderr."""
    lines = [run.err]
    doc = _json(run.out)
    if isinstance(doc, dict):
        for p in doc.get("problems") or []:
            lines.append(f"{p.get('severity')} {p.get('file')}: {p.get('message')}")
        for f in doc.get("files") or []:
            if f.get("error"):
                lines.append(f"error {f.get('path')}: {f.get('error')}")
        for kind, c in (doc.get("components") or {}).items():
            lines.append(f"{kind} {c.get('status')} {' '.join(c.get('files') or [])}: "
                         f"{c.get('detail')}")
    return "\n".join(lines)


def check_text(run: Run) -> str:
    lines = [run.err]
    doc = _json(run.out)
    for d in doc if isinstance(doc, list) else [doc] if isinstance(doc, dict) else []:
        lines.append(f"verdict {d.get('verdict')}")
        for f in d.get("findings") or []:
            lines.append(f"{f.get('severity')} {f.get('component')} {f.get('file')}: "
                         f"{f.get('message')}")
        for kind, c in (d.get("components") or {}).items():
            lines.append(f"{kind} {c.get('status')}: {c.get('detail')}")
    return "\n".join(lines)


def _said(run: Run) -> str:
    tail = (run.err or "").strip()[-600:]
    return f"exit {run.rc} after {run.seconds} s{', ' + run.error if run.error else ''}; " \
           f"stderr: {tail!r}"


def assert_cli(t, command: str, run: Run) -> None:
    """Exit code, stderr, time and forbidden output of one command."""
    assert run.rc != 70, f"{command}: exit 70 (a bug): {_said(run)}"
    assert run.rc in GOOD_EXITS, f"{command}: {_said(run)}"
    assert run.rc in t.exits[command], \
        f"{command}: exit {run.rc}, expected one of {sorted(t.exits[command])}: {_said(run)}"
    lines = run.err.strip().splitlines()
    assert len(lines) <= 1, f"{command}: stderr is {len(lines)} lines: {run.err[:600]!r}"
    if run.rc == 2 or (run.rc == 5 and command in ("inspect", "stats")):
        assert lines and lines[0].startswith("ckpt-browser: ") and str(t.path) in lines[0], \
            f"{command}: stderr should be one line naming {t.path}: {run.err[:600]!r}"
    assert run.seconds < STEP_SECONDS, f"{command} took {run.seconds} s"
    if t.forbid:
        hit = re.search(t.forbid, run.out)
        assert not hit, f"{command} shows {hit.group(0)!r}: it read a file outside the checkpoint"


def assert_reported(t, text: str, command: str) -> None:
    # the checkpoint's own path is in most outputs; its folder names must not count as words
    text = " ".join(text.split())  # a screen wraps long lines
    text = text.replace(str(t.path), "<path>").replace(f"/{t.id}/", "/<case>/")
    if t.control:
        assert not re.search(r"\bunsafe\b", text, re.I), f"control case called unsafe: {text[:800]}"
        return
    if t.words.startswith("unsafe.*"):  # the word and the global, in any order
        name = t.words[len("unsafe.*"):]
        assert re.search(name, text) and re.search(r"unsafe|asks to run", text, re.I), \
            f"{command}: the problems do not call {name} unsafe:\n{text[:1500]}"
    else:
        assert re.search(t.words, text, re.I | re.S), \
            f"{command}: the problems do not say /{t.words}/:\n{text[:1500]}"
    if t.words != ".":
        bad = t.bad.name
        assert bad in text, f"{command}: no problem names {bad}:\n{text[:1500]}"


def assert_harmless(t, cwd: Path, sandbox: Path, before: dict) -> None:
    found = markers_in(cwd, cwd.parent, cwd.parent.parent, Path("/tmp"), REPO, Path.home(),
                       recursive=(CORPUS, sandbox))
    assert not found, f"a payload ran: {found}"
    left = sorted(os.listdir(cwd))
    assert not left, f"files appeared in the working folder: {left}"
    assert_corpus_untouched(before)


def assert_corpus_untouched(before: dict) -> None:
    """No entry of the corpus added, removed, retyped, resized, relinked or written (its
    mtime); the bytes themselves are compared at the end of the session."""
    now = corpus_stat(CORPUS)
    changed = sorted(set(now.items()) ^ set(before["stat"].items()))
    assert not changed, f"the corpus changed: {changed[:6]}"


# -- the corpus itself ---------------------------------------------------------------------------

def test_corpus_is_what_make_corpus_writes(tmp_path):
    write(tmp_path / "corpus")
    assert snapshot(tmp_path / "corpus") == snapshot(CORPUS), \
        "run python tests/malicious/make_corpus.py and commit tests/malicious/corpus"
    big = [(str(p.relative_to(CORPUS)), p.stat().st_size) for p in CORPUS.rglob("*")
           if p.is_file() and not p.is_symlink() and p.stat().st_size > 101_000]
    assert not big, big


def test_readme_lists_every_case():
    readme = (Path(__file__).parent / "README.md").read_text()
    missing = [c.name for c in (*CASES, *TEST_TIME_CASES) if f"`{c.name}`" not in readme]
    assert not missing, f"README.md does not list {missing}"


LIVE = r"""
import io, json, os, pickle, sys, warnings
warnings.simplefilter("ignore")
import torch
for name, how, path, where in json.loads(sys.argv[1]):
    os.chdir(where)
    try:
        if how == "torch":
            torch.load(path, weights_only=False)
        elif how == "torch-file":  # an open file: torch.load never looks at the name
            with open(path, "rb") as f:
                torch.load(f, weights_only=False)
        elif how == "pickle":
            with open(path, "rb") as f:
                pickle.load(f)
        elif how == "jit":  # TorchScript: its scripted code
            torch.jit.load(path)
        elif how == "export":  # a .pt2: its pickled constants and sample inputs
            torch.export.load(path)
        elif how == "st-differs":  # no code runs: the marker says Python's json lists the
            import struct  # header and the Rust loader (safe_open) refuses the file
            from safetensors import SafetensorError, safe_open
            with open(path, "rb") as f:
                listed = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
            try:
                with safe_open(path, "np") as st:
                    st.keys()
            except SafetensorError:
                if listed:
                    open(f"PWNED-{name}", "w").close()
        elif how == "dcp-item":
            from torch.distributed.checkpoint import FileSystemReader
            md = FileSystemReader(os.path.dirname(path)).read_metadata()
            data = open(path, "rb").read()
            for info in md.storage_data.values():
                torch.load(io.BytesIO(data[info.offset:info.offset + info.length]),
                           weights_only=False)
    except BaseException as e:
        print(f"{name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
"""


def test_payloads_are_live(tmp_path):
    """The stock loaders run every payload: the corpus tests something real."""
    pytest.importorskip("torch")
    live = [c for c in CASES if c.live]
    jobs = []
    for c in live:
        where = tmp_path / c.name
        where.mkdir()
        jobs.append((c.name, c.live, str(CORPUS / (c.live_file or c.bad)), str(where)))
    run = subprocess.run([sys.executable, "-c", LIVE, json.dumps(jobs)], capture_output=True,
                         text=True, timeout=300, env=child_env(), cwd=tmp_path)
    dead = []
    for c in live:
        for _ in range(100):  # Popen payloads run `touch` in the background
            if list((tmp_path / c.name).glob(c.marker + "*")):
                break
            time.sleep(0.05)
        else:
            dead.append(c.name)
    assert not dead, f"payloads that did not run under the stock loaders: {dead}\n{run.stderr}"


# -- every case ----------------------------------------------------------------------------------

def _step(t, sandbox, name: str) -> tuple[dict, Path]:
    run, steps, cwd = probe(t, sandbox)
    step = steps.get(name)
    if step is None:
        last = [k for k in ("check", "stats", "export", "tui") if k in steps]
        why = f"the probe process ended with {run.rc} after {run.seconds} s"
        raise AssertionError(f"{name} never finished: {why}, during the step after "
                             f"{last[-1] if last else 'start-up'}; peak {run.maxrss_mb} MB; "
                             f"stderr: {run.err[-1500:]}")
    assert run.maxrss_mb < MAX_RSS_MB, f"the probe peaked at {run.maxrss_mb} MB"
    return step, cwd


def _as_run(step: dict) -> Run:
    return Run(step["rc"], step.get("out", ""), step.get("err", ""), step.get("seconds", 0.0),
               step.get("maxrss_mb", 0.0), step.get("error", "") + "\n" + step.get("where", ""))


@pytest.mark.parametrize("case_id", IDS)
def test_inspect(case_id, sandbox, corpus_before):
    """`inspect --json PATH` in the case's own process (forked from a warm parent, capped at
    MEMORY_LIMIT, killed past its time), the first thing that process does."""
    t = target(case_id, sandbox)
    step, cwd = _step(t, sandbox, "inspect")
    run = _as_run(step)
    assert run.rc != "hang", f"inspect hangs: {run.error}"
    assert run.rc != "raised", f"inspect raised out of main(): {run.error}"
    assert_cli(t, "inspect", run)
    if run.rc != 2:
        assert isinstance(_json(run.out), dict), f"stdout is not one JSON object: {run.out[:300]}"
    assert_reported(t, inspect_text(run), "inspect")
    assert_harmless(t, cwd, sandbox, corpus_before)


@pytest.mark.parametrize("case_id", IDS)
def test_check(case_id, sandbox, corpus_before):
    t = target(case_id, sandbox)
    step, cwd = _step(t, sandbox, "check")
    run = _as_run(step)
    assert_cli(t, "check", run)
    if run.rc != 2:
        assert _json(run.out) is not None, f"check stdout is not JSON: {run.out[:300]}"
    text = check_text(run)
    if t.unsafe:
        assert re.search(r"\bunsafe\b", text, re.I), f"check does not say unsafe:\n{text[:1500]}"
    if t.control:
        assert_reported(t, text, "check")
    assert_harmless(t, cwd, sandbox, corpus_before)


@pytest.mark.parametrize("case_id", IDS)
def test_stats(case_id, sandbox, corpus_before):
    t = target(case_id, sandbox)
    step, cwd = _step(t, sandbox, "stats")
    run = _as_run(step)
    assert_cli(t, "stats", run)
    assert step["maxrss_mb"] < MAX_RSS_MB, f"stats peaked at {step['maxrss_mb']} MB"
    assert_harmless(t, cwd, sandbox, corpus_before)


@pytest.mark.parametrize("case_id", IDS)
def test_export(case_id, sandbox, corpus_before):
    """`export PATH OUT --partial`: what can be read is written, nothing runs, no bug, one line
    on stderr at most, within the step's time and the probe's memory."""
    t = target(case_id, sandbox)
    step, cwd = _step(t, sandbox, "export")
    run = _as_run(step)
    assert run.rc not in ("hang", "raised"), f"export: {run.rc}: {run.error}"
    assert run.rc in {0, 2, 5, 7}, f"export: {_said(run)}"
    assert len(run.err.strip().splitlines()) <= 1, f"export stderr: {run.err[:600]!r}"
    assert run.seconds < STEP_SECONDS, f"export took {run.seconds} s"
    assert_harmless(t, cwd, sandbox, corpus_before)


@pytest.mark.parametrize("case_id", IDS)
def test_tui(case_id, sandbox, corpus_before):
    """A pilot session: load, problems screen, training view, resume check, quit."""
    t = target(case_id, sandbox)
    step, cwd = _step(t, sandbox, "tui")
    assert step["rc"] == "ok", f"TUI: {step['rc']}: {step.get('error')}\n{step.get('where', '')}"
    assert step["seconds"] < STEP_SECONDS, f"TUI session took {step['seconds']} s"
    if "refused" in step:  # open_layout refused the path: what the CLI says in one line
        text = step["refused"]
        assert t.exits["inspect"] & {2}, f"the TUI refused a path inspect reads: {text}"
    else:
        assert step["running_after_load"] and step["running_at_end"], "the app stopped"
        text = step["problems"] + "\n" + step["state"] + "\n" + step["resume"]
    assert_reported(t, text, "TUI")
    assert_harmless(t, cwd, sandbox, corpus_before)


@pytest.mark.parametrize("case_id", IDS)
def test_in_process(case_id, sandbox, corpus_before):
    """The same commands through ckpt_browser.cli.main in this process."""
    t = target(case_id, sandbox)
    run, steps, _ = probe(t, sandbox)
    if str(run.rc).startswith("killed"):
        pytest.skip(f"the case kills a process ({run.rc}); not run inside pytest")
    for command, argv in (("inspect", ["inspect", "--json", str(t.path)]),
                          ("check", ["check", "--json", str(t.path)]),
                          ("stats", ["stats", str(t.path), "--json", *t.stats_names])):
        cwd = fresh_cwd(sandbox, f"inline-{command}-{case_id}")
        got = run_inline(argv, cwd)
        assert got.rc != "hang", f"{command} hangs in process: {got.error}"
        assert got.rc != "raised", f"{command} raised out of main(): {got.error}"
        assert_cli(t, command, got)
        if command == "inspect":
            assert_reported(t, inspect_text(got), "inspect (in process)")
        assert_harmless(t, cwd, sandbox, corpus_before)


def test_corpus_untouched_at_the_end(corpus_before):
    """Byte for byte, after every other test here (this module's last test)."""
    assert_corpus_untouched(corpus_before)
    now = snapshot(CORPUS)
    changed = sorted(set(now.items()) ^ set(corpus_before["content"].items()))
    assert not changed, f"the corpus changed: {changed[:6]}"
