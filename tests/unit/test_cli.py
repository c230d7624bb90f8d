"""`python -m ckpt_browser inspect`: exit codes, one-line errors, and the --json contract.

Every run is a real subprocess, as a user or a script would call it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ckpt_browser.model import FORMATS, TENSOR_KINDS
from ckpt_browser.samples import DEFAULT_SAMPLE

from .helpers import (
    DAMAGED,
    INDEX,
    RUN6,
    SHARDS,
    copy_sample,
    craft,
    header_len,
    locked_file,
    reference_map,
    reference_totals,
    run_cli,
    save,
    sharded,
    sparse,
    three_shards,
    unprivileged,
    write_index,
)
from .test_safetensors_header import BAD

EXIT_OK, EXIT_USAGE, EXIT_DAMAGED = 0, 2, 5


def assert_one_line(result, *words: str) -> str:
    err = result.stderr
    assert "Traceback" not in err + result.stdout
    assert err.endswith("\n") and err.count("\n") == 1, f"stderr is not one line: {err!r}"
    for w in words:
        assert w in err, f"{w!r} not in {err!r}"
    return err


# --- exit codes ---------------------------------------------------------------------------------

def test_clean_sample_exits_0_with_nothing_on_stderr():
    r = run_cli("inspect", str(RUN6))
    assert r.returncode == EXIT_OK, r.stderr
    assert r.stderr == ""
    totals = reference_totals(RUN6 / s for s in SHARDS)
    assert f"{totals['params']:,}" in r.stdout and f"{totals['tensors']:,}" in r.stdout


def test_damaged_sample_exits_5_and_names_a_damaged_shard():
    r = run_cli("inspect", str(DAMAGED))
    assert r.returncode == EXIT_DAMAGED
    assert_one_line(r, str(DAMAGED), "model-00001-of-00003.safetensors", "truncated")
    # the report on stdout still lists both damaged shards
    assert "model-00002-of-00003.safetensors" in r.stdout and "does not exist" in r.stdout


# --- each bad header, as a single file ---------------------------------------------------------

@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_header_file_exits_5_with_one_line(tmp_path, case):
    header, data, words = BAD[case]
    path = craft(tmp_path / "bad.safetensors", header, data)
    r = run_cli("inspect", str(path))
    assert r.returncode == EXIT_DAMAGED
    assert_one_line(r, str(path), words[0])


def _short(tmp):
    p = tmp / "short.safetensors"
    p.write_bytes(b"\x01\x02\x03")
    return p, "too small"


def _cap(tmp):
    return sparse(tmp / "cap.safetensors", 100_000_001, 100_000_100), "limit"


def _past_end(tmp):
    return craft(tmp / "cut.safetensors", b"{}", n=4096), "truncated"


def _truncated_real(tmp):
    p = save(tmp / "t.safetensors", {"a": torch.randn(64)})
    os.truncate(p, p.stat().st_size - 100)
    return p, "100 missing"


def _trailing_real(tmp):
    p = save(tmp / "t.safetensors", {"a": torch.randn(4)})
    with open(p, "ab") as f:
        f.write(b"\0" * 5)
    return p, "5 unexpected bytes"


def _duplicate(tmp):
    raw = (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
           b'"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}')
    return craft(tmp / "dup.safetensors", raw, bytes(4)), "twice"


SINGLE_FILE = {"shorter than 8 bytes": _short, "header over the cap": _cap,
               "header past the end": _past_end, "truncated real file": _truncated_real,
               "bytes after the data": _trailing_real, "duplicate names": _duplicate}


@pytest.mark.parametrize("case", SINGLE_FILE, ids=list(SINGLE_FILE))
def test_damaged_single_file_exits_5_with_one_line(tmp_path, case):
    path, word = SINGLE_FILE[case](tmp_path)
    r = run_cli("inspect", str(path))
    assert r.returncode == EXIT_DAMAGED
    assert_one_line(r, str(path), word)


def _inspect_in_process(path):
    import contextlib
    import io

    from ckpt_browser.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["inspect", str(path)])
    return {"rc": rc, "out": out.getvalue(), "err": err.getvalue()}


def test_unreadable_shard_exits_5_with_one_line():
    # import now: as `nobody` the child cannot reach site-packages under /root
    import ckpt_browser.cli  # noqa: F401
    import ckpt_browser.report.text  # noqa: F401

    path = locked_file({"a": torch.ones(1)})
    try:
        got = unprivileged(lambda: _inspect_in_process(path))
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    assert got["rc"] == EXIT_DAMAGED, got
    result = subprocess.CompletedProcess([], got["rc"], got["out"], got["err"])
    assert_one_line(result, "locked.safetensors", "permission denied")


# --- paths that are not checkpoints: exit 2 -----------------------------------------------------

def _missing(tmp):
    return tmp / "no-such-checkpoint", "no such file"


def _empty(tmp):
    (tmp / "empty").mkdir()
    return tmp / "empty", "empty"


def _text(tmp):
    p = tmp / "readme.txt"
    p.write_text("hello, this is not a checkpoint at all\n")
    return p, "not a checkpoint"


NOT_A_CHECKPOINT = {"missing path": _missing, "empty folder": _empty, "text file": _text}


@pytest.mark.parametrize("case", NOT_A_CHECKPOINT, ids=list(NOT_A_CHECKPOINT))
def test_not_a_checkpoint_exits_2_with_one_line(tmp_path, case):
    path, word = NOT_A_CHECKPOINT[case](tmp_path)
    for args in (["inspect", str(path)], ["inspect", "--json", str(path)]):
        r = run_cli(*args)
        assert r.returncode == EXIT_USAGE
        assert_one_line(r, str(path), word)
        assert r.stdout == ""


# --- damaged folders: exit 5 ----------------------------------------------------------------------

def _index_names_missing_file(tmp):
    folder = three_shards(tmp / "c")
    (folder / "model-00002-of-00003.safetensors").unlink()
    return folder, "model-00002-of-00003.safetensors", "does not exist"


def _tensor_missing_from_shard(tmp):
    folder = three_shards(tmp / "c")
    wm = json.loads((folder / INDEX).read_text())["weight_map"]
    write_index(folder, wm | {"a.ghost": "model-00001-of-00003.safetensors"})
    return folder, "model-00001-of-00003.safetensors", "a.ghost"


def _two_shards_one_name(tmp):
    folder = sharded(tmp / "c", {"part-1.safetensors": {"shared": torch.ones(2)},
                                 "part-2.safetensors": {"shared": torch.ones(2)}}, index=False)
    return folder, "part-2.safetensors", "shared"


def _outside(tmp):
    folder = three_shards(tmp / "c")
    wm = json.loads((folder / INDEX).read_text())["weight_map"]
    write_index(folder, wm | {"evil": "../x.safetensors"})
    return folder, INDEX, "outside"


def _broken_index(tmp):
    folder = copy_sample(RUN6, tmp / "c")
    (folder / INDEX).write_text("{not json")
    return folder, INDEX, "not valid JSON"


def _one_bad_shard(tmp):
    folder = copy_sample(RUN6, tmp / "c")
    (folder / SHARDS[2]).write_bytes(b"garbage")
    return folder, SHARDS[2], "too small"


def _newline_in_a_name(tmp):
    # tensor names come from the files; one with a newline must not break the one-line error
    folder = three_shards(tmp / "c")
    wm = json.loads((folder / INDEX).read_text())["weight_map"]
    write_index(folder, wm | {"ghost\nckpt-browser: all fine": "model-00001-of-00003.safetensors"})
    return folder, "model-00001-of-00003.safetensors", "ghost"


DAMAGED_FOLDERS = {"index names a missing file": _index_names_missing_file,
                   "tensor missing from its shard": _tensor_missing_from_shard,
                   "a name in two shards": _two_shards_one_name,
                   "index names ../x.safetensors": _outside,
                   "broken index JSON": _broken_index, "one bad shard": _one_bad_shard,
                   "a tensor name with a newline": _newline_in_a_name}


@pytest.mark.parametrize("case", DAMAGED_FOLDERS, ids=list(DAMAGED_FOLDERS))
def test_damaged_folder_exits_5_with_one_line(tmp_path, case):
    folder, file, word = DAMAGED_FOLDERS[case](tmp_path)
    r = run_cli("inspect", str(folder))
    assert r.returncode == EXIT_DAMAGED
    assert_one_line(r, str(folder), file, word)


def _orphan(tmp):
    folder = three_shards(tmp / "c")
    save(folder / "model-00009-of-00009.safetensors", {"stray": torch.ones(1)})
    return folder, "model-00009-of-00009.safetensors"


def _total_size(tmp):
    folder = three_shards(tmp / "c")
    wm = json.loads((folder / INDEX).read_text())["weight_map"]
    write_index(folder, wm, total_size=1)
    return folder, "total_size"


def _unmapped(tmp):
    folder = three_shards(tmp / "c")
    wm = json.loads((folder / INDEX).read_text())["weight_map"]
    del wm["c.mask"]
    write_index(folder, wm)
    return folder, "c.mask"


WARNINGS = {"orphan shard": _orphan, "total_size mismatch": _total_size,
            "tensor not in the index": _unmapped}


@pytest.mark.parametrize("case", WARNINGS, ids=list(WARNINGS))
def test_warning_only_checkpoint_exits_0_and_reports_the_warning(tmp_path, case):
    folder, word = WARNINGS[case](tmp_path)
    r = run_cli("inspect", str(folder))
    assert r.returncode == EXIT_OK
    assert r.stderr == ""
    assert any(line.strip().startswith("warning:") and word in line
               for line in r.stdout.splitlines()), r.stdout


# --- --json contract ------------------------------------------------------------------------------

FILE_KEYS = {"path", "format", "size", "header_bytes", "tensors", "error"}
TENSOR_KEYS = {"name", "dtype", "shape", "nbytes", "file", "offsets", "component"}
TOTAL_KEYS = {"tensors", "params", "bytes", "by_dtype", "by_component"}
PROBLEM_KEYS = {"severity", "file", "message"}


STATE_KEYS = {"framework", "step", "epoch", "ranks", "components"}
COMPONENT_KEYS = {"status", "files", "detail", "facts"}


def check_contract(doc: dict) -> None:
    assert set(doc) - {"timeline", "project"} == {"path", "format", "files", "tensors", "totals",
                                                  "problems"} | STATE_KEYS
    assert isinstance(doc["path"], str) and isinstance(doc["format"], str)
    formats = {}
    for f in doc["files"]:
        assert set(f) == FILE_KEYS and f["format"] in FORMATS
        assert f["error"] is None or isinstance(f["error"], str)
        formats[f["path"]] = f["format"]
    for t in doc["tensors"]:
        assert t["component"] in TENSOR_KINDS
        if formats.get(t["file"]) == "safetensors":
            assert set(t) == TENSOR_KEYS
            assert t["nbytes"] == t["offsets"][1] - t["offsets"][0]
        else:  # a DCP tensor also gives its global shape and where the chunk sits in it
            assert set(t) >= TENSOR_KEYS
        assert isinstance(t["shape"], list)
        assert t["offsets"] is None or len(t["offsets"]) == 2
    assert set(doc["totals"]) == TOTAL_KEYS
    for row in doc["totals"]["by_dtype"].values():
        assert set(row) == {"tensors", "params", "bytes"}
    assert set(doc["totals"]["by_component"]) <= set(TENSOR_KINDS)
    weights = doc["totals"]["by_component"]["weights"]
    assert (weights["tensors"], weights["params"], weights["bytes"]) == (
        doc["totals"]["tensors"], doc["totals"]["params"], doc["totals"]["bytes"])
    for p in doc["problems"]:
        assert set(p) == PROBLEM_KEYS and p["severity"] in {"error", "warning", "info"}
    for c in doc["components"].values():
        assert set(c) == COMPONENT_KEYS


def weights_of(doc: dict) -> dict:
    return {t["name"]: (t["dtype"], tuple(t["shape"]), t["file"]) for t in doc["tensors"]
            if t["file"].endswith(".safetensors") and t["component"] == "weights"}


def weight_totals(doc: dict) -> dict:
    return {k: v for k, v in doc["totals"].items() if k != "by_component"}


def test_json_of_the_sample_follows_the_contract_and_matches_safe_open():
    r = run_cli("inspect", "--json", str(RUN6))
    assert r.returncode == EXIT_OK and r.stderr == ""
    doc = json.loads(r.stdout)
    check_contract(doc)

    assert doc["path"] == str(RUN6) and doc["format"] == "safetensors-index"
    assert weights_of(doc) == reference_map(RUN6, SHARDS)
    # optimizer.pt's tensors are listed too, as the optimizer's
    assert {t["component"] for t in doc["tensors"] if t["file"] == "optimizer.pt"} == {"optimizer"}
    assert weight_totals(doc) == reference_totals(RUN6 / s for s in SHARDS)
    assert [f["path"] for f in doc["files"]] == sorted(p.name for p in RUN6.iterdir())
    assert [f["path"] for f in doc["files"] if f["format"] == "safetensors"] == list(SHARDS)
    assert {f["path"]: f["format"] for f in doc["files"] if f["format"] != "safetensors"} == {
        "config.json": "json", "generation_config.json": "json", "optimizer.pt": "torch-zip",
        "model.safetensors.index.json": "json", "rng_state.pth": "torch-zip",
        "scheduler.pt": "torch-zip", "trainer_state.json": "json",
        "training_args.bin": "torch-zip"}
    for f in doc["files"]:
        if f["format"] != "safetensors":
            continue
        shard = RUN6 / f["path"]
        assert f["size"] == shard.stat().st_size
        assert f["header_bytes"] == header_len(shard)
        assert f["error"] is None
    assert doc["problems"] == []


def test_json_lists_files_in_natural_order_and_tensors_by_file_then_offset(tmp_path):
    shards = {f"w-{i}.safetensors": {f"t{i}.{k}": torch.randn(k + 1) for k in (3, 1, 2)}
              for i in (10, 2, 1)}
    folder = sharded(tmp_path / "c", shards, index=False)
    doc = json.loads(run_cli("inspect", "--json", str(folder)).stdout)
    order = ["w-1.safetensors", "w-2.safetensors", "w-10.safetensors"]
    assert [f["path"] for f in doc["files"]] == order
    rows = [(order.index(t["file"]), t["offsets"]) for t in doc["tensors"]]
    assert rows == sorted(rows) and len(rows) == 9


def test_json_offsets_point_at_the_tensor_bytes(tmp_path):
    tensors = {"a": torch.randn(3, 5), "b": torch.arange(7, dtype=torch.int16),
               "c": torch.randn(2).to(torch.bfloat16)}
    path = save(tmp_path / "m.safetensors", tensors)
    doc = json.loads(run_cli("inspect", "--json", str(path)).stdout)
    data = path.read_bytes()[8 + doc["files"][0]["header_bytes"]:]
    for t in doc["tensors"]:
        begin, end = t["offsets"]
        want = tensors[t["name"]].contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        assert data[begin:end] == want


def test_json_of_the_damaged_sample_is_valid_and_lists_the_damage():
    r = run_cli("inspect", "--json", str(DAMAGED))
    assert r.returncode == EXIT_DAMAGED
    assert_one_line(r, str(DAMAGED))
    doc = json.loads(r.stdout)
    check_contract(doc)
    files = {f["path"]: f for f in doc["files"]}
    assert files[SHARDS[1]]["size"] is None and "does not exist" in files[SHARDS[1]]["error"]
    assert "truncated" in files[SHARDS[0]]["error"]
    assert files[SHARDS[2]]["error"] is None
    assert {p["file"] for p in doc["problems"] if p["severity"] == "error"} == set(SHARDS[:2])


def test_inspect_without_a_path_inspects_the_bundled_sample(tmp_path):
    r = run_cli("inspect", "--json", cwd=tmp_path)
    assert r.returncode == EXIT_OK, r.stderr
    doc = json.loads(r.stdout)
    # run from another folder, this may be the installed copy rather than the source tree
    sample = Path(doc["path"])
    assert sample.is_dir() and doc["path"].endswith(DEFAULT_SAMPLE)
    shards = sorted(p.name for p in sample.glob("*.safetensors"))
    assert set(weights_of(doc)) == set(reference_map(sample, shards))


# --- argparse -------------------------------------------------------------------------------------

def test_console_script_help_exits_0():
    script = Path(sys.executable).parent / "ckpt-browser"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ckpt_browser"]
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert "inspect" in r.stdout and "exit codes" in r.stdout


def test_inspect_help_exits_0():
    r = run_cli("inspect", "--help")
    assert r.returncode == 0 and "--json" in r.stdout


@pytest.mark.parametrize("args", [["inspect", "--bogus", str(RUN6)], ["--bogus"],
                                  ["inspect", str(RUN6), str(RUN6)]])
def test_usage_errors_exit_2(args):
    r = run_cli(*args)
    assert r.returncode == EXIT_USAGE
    assert "Traceback" not in r.stderr and "usage" in r.stderr


def test_output_cut_short_by_a_closed_pipe_is_not_an_error(tmp_path):
    """`ckpt-browser inspect --json big | head -c 10` must not print a traceback."""
    header = {f"t.{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
              for i in range(20_000)}  # about 2 MB of JSON: more than a pipe buffer holds
    path = craft(tmp_path / "many.safetensors", header)
    p = subprocess.Popen([sys.executable, "-m", "ckpt_browser", "inspect", "--json", str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(10) == b'{"path": "'
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == EXIT_OK
    assert err == ""


def _into_closed_pipe(*argv: str) -> subprocess.CompletedProcess:
    """`ckpt-browser ARGV | true`: the reader is gone before the first write."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "ckpt_browser", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)


def test_pipefail_head_fails_every_time_on_a_damaged_checkpoint():
    """`set -o pipefail; ckpt-browser inspect damaged | head -1`, as a script writes it, five
    times: head exits after one line while ckpt-browser may still be writing, and every run
    must fail (it passed in half of them once)."""
    damaged = Path(__file__).parents[2] / "sample_checkpoints" / "tiny-llama-damaged"
    cmd = (f"set -o pipefail; {shlex.quote(sys.executable)} -m ckpt_browser inspect --files "
           f"{shlex.quote(str(damaged))} | head -1 > /dev/null")
    codes = [subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=60).returncode
             for _ in range(5)]
    assert codes == [5] * 5


@pytest.mark.parametrize("json_out", [False, True])
def test_a_closed_pipe_keeps_the_exit_code_of_a_half_written_checkpoint(tmp_path, json_out):
    """`set -o pipefail; ckpt-browser inspect cut.pt | true` exited 0: print() raised
    BrokenPipeError and that was the exit code. A closed pipe ends the output, not the
    command: damaged is still 5, and a good file still 0, with no 'Exception ignored'."""
    whole = Path(__file__).parents[2] / "sample_checkpoints" / "projects" / "nanogpt" / "ckpt.pt"
    cut = tmp_path / "cut.pt"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    extra = ["--json"] if json_out else []
    got = _into_closed_pipe("inspect", str(cut), *extra)
    assert got.returncode == 5, got.stderr
    assert "cut.pt" in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    good = _into_closed_pipe("inspect", str(whole), *extra)
    assert good.returncode == 0 and good.stderr == "", good.stderr
