"""Remote checkpoints over HTTP: the real CLI in a subprocess against the counting range
server on loopback. The same checkpoint read locally and by URL gives the same answers; the server's
counters show what was fetched: at most two range reads per safetensors shard, never a whole shard,
never tensor bytes for `inspect`, only the tensor's own range for `stats`, nothing again from the
cache; and each failure (missing path, 403, a server ignoring Range, a dropped connection, a stall)
is one line on stderr with exit 2.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.tmux import TMUX, Terminal

from .conftest import (
    SAMPLES,
    SPECULATIVE,
    assert_names,
    assert_one_line_error,
    header_len,
    local_json,
    named_url,
    run_cli,
    run_json,
    without,
)

RELEASE = "tiny-llama-release"
SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def tensor_span(path: Path, name: str) -> tuple[int, int]:
    """[first, end) file offsets of a tensor's bytes, from the raw header."""
    n = header_len(path)
    with open(path, "rb") as f:
        f.seek(8)
        header = json.loads(f.read(n))
    begin, end = header[name]["data_offsets"]
    return 8 + n + begin, 8 + n + end


def assert_header_reads_only(srv, rel: str, local: Path) -> None:
    """The contract for one safetensors shard read for its header: at most two GETs, each with a
    Range starting inside the header, the first no longer than the speculative 128 KiB, none
    reaching past max(128 KiB, the header's end); at most one HEAD."""
    c = srv.counter(rel)
    data_start = 8 + header_len(local)
    assert 1 <= c.gets <= 2, (rel, c)
    assert c.heads <= 1, (rel, c)
    assert c.full_gets == 0, f"{rel}: a GET without Range asks for the whole shard: {c}"
    if data_start <= SPECULATIVE:
        assert c.gets == 1, f"{rel}: the header fits the first read, yet {c.gets} GETs: {c}"
    (a, b), *_ = c.get_ranges
    assert a == 0 and b is not None and b < SPECULATIVE, f"{rel}: first read {a}-{b}: {c}"
    for first, last in c.get_ranges:
        assert first is not None and first < data_start, (rel, first, last, data_start)
        assert last is not None, f"{rel}: open-ended range bytes={first}-: {c}"
        assert last < max(SPECULATIVE, data_start), (
            f"{rel}: range {first}-{last} reaches past max(128 KiB, data start {data_start})")
    size = local.stat().st_size
    assert c.bytes <= min(size, SPECULATIVE) + data_start, (rel, c.bytes, data_start)


# -- same answers as on the local copy, headers only -------------------------------------------

def test_inspect_folder_url_matches_local_and_reads_only_headers(range_server, served_root):
    local, _ = local_json("inspect", served_root / RELEASE, "--json")
    url = range_server.url_for(RELEASE + "/")
    remote, _ = run_json("inspect", url, "--json")
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")
    for shard in SHARDS:
        assert_header_reads_only(range_server, f"{RELEASE}/{shard}", served_root / RELEASE / shard)
    # the small JSON files are fetched whole, once at most
    for small in ("model.safetensors.index.json", "config.json"):
        assert range_server.counter(f"{RELEASE}/{small}").gets <= 1


def test_inspect_file_url_matches_local(range_server, served_root):
    rel = f"{RELEASE}/{SHARDS[1]}"
    local, _ = local_json("inspect", served_root / rel, "--json")
    url = range_server.url_for(rel)
    remote, _ = run_json("inspect", url, "--json")
    assert remote["path"] == url
    assert without(remote, "path") == without(local, "path")
    assert_header_reads_only(range_server, rel, served_root / rel)
    touched = {k for k, c in range_server.counters().items() if c.gets}
    assert touched <= {rel, f"{RELEASE}/"}, touched


def test_a_header_longer_than_the_first_read_takes_two_requests_and_no_tensor_bytes(
        range_server, served_root):
    rel = "wide/wide.safetensors"
    local_file = served_root / rel
    data_start = 8 + header_len(local_file)
    assert data_start > SPECULATIVE
    local, _ = local_json("inspect", local_file, "--json")
    remote, _ = run_json("inspect", range_server.url_for(rel), "--json")
    assert without(remote, "path") == without(local, "path")
    assert remote["totals"]["tensors"] == 2000
    c = range_server.counter(rel)
    assert c.gets == 2, c
    for first, last in c.get_ranges:
        assert last is not None and last < data_start, (
            f"range {first}-{last} reaches into the data section at {data_start}")
    assert c.bytes <= SPECULATIVE + data_start, (c.bytes, data_start)


def test_inspect_of_a_1_mib_shard_reads_128_kib_at_most(range_server, served_root):
    rel = "big/one.safetensors"
    local, _ = local_json("inspect", served_root / rel, "--json")
    remote, _ = run_json("inspect", range_server.url_for(rel), "--json")
    assert without(remote, "path") == without(local, "path")
    assert_header_reads_only(range_server, rel, served_root / rel)
    assert range_server.counter(rel).bytes <= SPECULATIVE


ZIP_SLACK = 200 * 1024  # a 64 KiB head read, a 64 KiB + 113 B tail read, local headers


def overlap(ranges, first: int, end: int) -> int:
    """Bytes of [first, end) the GET ranges asked for."""
    return sum(max(0, min(b + 1, end) - max(a, first)) for a, b in ranges)


@pytest.mark.parametrize("given", ["bigpt/", "bigpt/pytorch_model.bin"])
def test_a_large_torch_zip_is_read_for_its_structure_only(range_server, served_root, given):
    rel = "bigpt/pytorch_model.bin"
    local, _ = local_json("inspect", served_root / given, "--json")
    url = range_server.url_for(given)
    remote, _ = run_json("inspect", url, "--json")
    assert without(remote, "path") == without(local, "path")
    w = next(t for t in local["tensors"] if t["name"] == "w")
    b = next(t for t in local["tensors"] if t["name"] == "b")
    c = range_server.counter(rel)
    assert c.full_gets == 0, c
    assert all(r[0] is not None and r[1] is not None for r in c.get_ranges), c
    # the zip's head (data.pkl), tail (end record, central directory) and local headers: of
    # w's 18 MB at most what a 64 KiB head read and a 64 KiB tail read take
    assert overlap(c.get_ranges, *w["offsets"]) <= ZIP_SLACK, c
    assert c.bytes <= 512 * 1024, c

    range_server.reset_counters()
    local, _ = local_json("stats", served_root / given, "b", "--json")
    remote, _ = run_json("stats", url, "b", "--json")
    assert without(remote, "path") == without(local, "path")
    c = range_server.counter(rel)
    assert overlap(c.get_ranges, *b["offsets"]) == 40, c
    assert overlap(c.get_ranges, *w["offsets"]) <= ZIP_SLACK, c
    assert c.bytes <= 512 * 1024, c


def test_a_torch_zip_with_several_large_records_reads_clean_remotely(range_server, served_root):
    # the zip checks read each record's data descriptor: the mirror must hold them, or every
    # remote torch zip with two large tensors would look like a zip differential
    rel = "bigpt2/model.pt"
    local, _ = local_json("inspect", served_root / rel, "--json")
    remote, _ = run_json("inspect", range_server.url_for(rel), "--json")
    assert local["problems"] == [] and without(remote, "path") == without(local, "path")
    c = range_server.counter(rel)
    assert c.full_gets == 0 and c.bytes <= 512 * 1024, c


def test_check_of_a_url_matches_local(range_server, served_root):
    local, lcode = local_json("check", served_root / RELEASE, "--json", ok=(0, 3, 4, 5))
    url = range_server.url_for(RELEASE + "/")
    remote, rp = run_json("check", url, "--json", ok=(0, 3, 4, 5))
    assert rp.returncode == lcode
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")
    for shard in SHARDS:
        assert_header_reads_only(range_server, f"{RELEASE}/{shard}", served_root / RELEASE / shard)


@pytest.mark.parametrize("cmd, rel", [("inspect", RELEASE + "/"), ("inspect", RELEASE),
                                      ("check", RELEASE + "/"), ("stats", RELEASE + "/")])
def test_paths_show_the_url_exactly_as_given(range_server, served_root, cmd, rel):
    """Like a local PATH ("folder/" stays "folder/"), the URL is shown as typed; a folder URL
    without its trailing slash is a folder all the same."""
    url = range_server.url_for(rel)
    doc, _ = run_json(cmd, url, "--json", ok=(0, 3, 4, 5))
    assert doc["path"] == url
    if cmd == "inspect":
        local, _ = local_json("inspect", served_root / RELEASE, "--json")
        assert without(doc, "path") == without(local, "path")


# -- values: only that tensor's range -----------------------------------------------------------

def test_stats_of_a_sample_tensor_matches_local(range_server, served_root):
    name = "model.layers.0.mlp.down_proj.weight"
    local, _ = local_json("stats", served_root / RELEASE, name, "--json")
    url = range_server.url_for(RELEASE + "/")
    remote, _ = run_json("stats", url, name, "--json")
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")
    # the other shards were read for their headers only
    for shard in (SHARDS[0], SHARDS[2]):
        assert_header_reads_only(range_server, f"{RELEASE}/{shard}", served_root / RELEASE / shard)


def test_stats_of_a_small_tensor_past_a_big_one_fetches_only_its_range(range_server,
                                                                        served_root):
    rel = "big/one.safetensors"
    local_file = served_root / rel
    first, end = tensor_span(local_file, "small.bias")
    assert first > SPECULATIVE
    local, _ = local_json("stats", local_file, "small.bias", "--json")
    remote, _ = run_json("stats", range_server.url_for(rel), "small.bias", "--json")
    assert without(remote, "path") == without(local, "path")
    c = range_server.counter(rel)
    assert c.full_gets == 0, c
    for a, b in c.get_ranges:
        assert a is not None and b is not None, c
        if a < SPECULATIVE:  # the header read
            assert a == 0 and b < SPECULATIVE, c
        else:  # the values: inside small.bias's bytes
            assert first <= a and b < end, ((a, b), (first, end))
    assert c.bytes <= SPECULATIVE + (end - first), c


def test_stats_of_a_1_mib_tensor_fetches_about_its_size(range_server, served_root):
    rel = "big/one.safetensors"
    local_file = served_root / rel
    first, end = tensor_span(local_file, "big.weight")
    local, _ = local_json("stats", local_file, "big.weight", "--json")
    remote, _ = run_json("stats", range_server.url_for(rel), "big.weight", "--json")
    assert without(remote, "path") == without(local, "path")
    c = range_server.counter(rel)
    assert c.full_gets == 0, c
    for a, b in c.get_ranges:
        assert b is not None and b < end, ((a, b), end)  # never small.bias's bytes
    assert end - first - SPECULATIVE <= c.bytes <= SPECULATIVE + (end - first), (c.bytes, c)


def test_diff_values_of_local_and_url_finds_no_difference(range_server, served_root):
    url = range_server.url_for(RELEASE + "/")
    proc = run_cli("diff", served_root / RELEASE, url, "--values")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr)
    doc, _ = run_json("diff", url, served_root / RELEASE, "--values", "--json")
    assert doc["a"].rstrip("/") == url.rstrip("/")
    assert doc["differs"] is False
    assert doc["summary"]["unchanged"] == 21 and doc["summary"]["values_changed"] == 0


def test_diff_of_two_urls_matches_local(range_server, served_root):
    a, b = "tiny-llama-run/checkpoint-3", "tiny-llama-run/checkpoint-6"
    local, lcode = local_json("diff", served_root / a, served_root / b, "--values", "--json",
                              ok=(1,))
    remote, rp = run_json("diff", range_server.url_for(a + "/"), range_server.url_for(b + "/"),
                          "--values", "--json", ok=(1,))
    assert rp.returncode == lcode
    assert without(remote, "a", "b") == without(local, "a", "b")


# -- the cache ---------------------------------------------------------------------------------

def file_gets(srv) -> dict[str, int]:
    """GET requests per served file that were answered with a body (folders' listings and
    304 Not Modified answers left out)."""
    return {k: sum(1 for st in c.statuses if st in (200, 206)) for k, c in srv.counters().items()
            if c.gets and not k.endswith("/") and k != "" and c.bytes}


@pytest.mark.parametrize("rel", [RELEASE + "/", f"{RELEASE}/{SHARDS[0]}"])
def test_reopening_fetches_no_file_again_and_no_cache_fetches_again(range_server, served_root,
                                                                    cache_dir, rel):
    url = range_server.url_for(rel)
    wanted = {f"{RELEASE}/{s}" for s in SHARDS} if rel.endswith("/") else {rel}
    first, _ = run_json("inspect", url, "--json")
    assert set(file_gets(range_server)) >= wanted
    assert any(cache_dir.rglob("*")), "nothing was written to CKPT_BROWSER_CACHE"

    range_server.reset_counters()
    second, _ = run_json("inspect", url, "--json")
    assert second == first
    assert file_gets(range_server) == {}, "reopening fetched file bodies again"

    range_server.reset_counters()
    third, _ = run_json("inspect", url, "--json", "--no-cache")
    assert third == first
    assert set(file_gets(range_server)) >= wanted


def truncate(shard: Path) -> None:
    """100 bytes cut off the end: a truncated shard (another size)."""
    shard.write_bytes(shard.read_bytes()[:-100])


def retype(shard: Path) -> None:
    """Every F32 in the header becomes I32: the same size, another header (and ETag/mtime)."""
    raw = shard.read_bytes()
    n = 8 + header_len(shard)
    shard.write_bytes(raw[:n].replace(b'"F32"', b'"I32"') + raw[n:])
    assert shard.stat().st_size == len(raw)


@pytest.mark.parametrize("change, code", [(truncate, 5), (retype, 0)])
def test_a_changed_file_is_fetched_again(make_range_server, tmp_path, change, code):
    folder = tmp_path / "srv" / RELEASE
    shutil.copytree(SAMPLES / RELEASE, folder)
    srv = make_range_server(tmp_path / "srv")
    url = srv.url_for(RELEASE + "/")
    before, _ = run_json("inspect", url, "--json")

    time.sleep(0.01)  # another mtime, whatever the file system's resolution
    change(folder / SHARDS[0])
    srv.reset_counters()
    after, proc = run_json("inspect", url, "--json", ok=(code,))
    local, _ = local_json("inspect", folder, "--json", ok=(code,))
    assert without(after, "path") == without(local, "path")
    assert after != before
    assert srv.counter(f"{RELEASE}/{SHARDS[0]}").gets >= 1


def test_cache_location_comes_from_ckpt_browser_cache(range_server, served_root, tmp_path,
                                                      monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("CKPT_BROWSER_CACHE", str(elsewhere))
    run_json("inspect", range_server.url_for(RELEASE + "/"), "--json")
    assert any(p.is_file() for p in elsewhere.rglob("*"))


def test_the_default_cache_is_under_xdg_cache_home(range_server, served_root, tmp_path,
                                                   monkeypatch):
    monkeypatch.delenv("CKPT_BROWSER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    run_json("inspect", range_server.url_for(RELEASE + "/"), "--json")
    assert any(p.is_file() for p in (tmp_path / "xdg" / "ckpt-browser" / "remote").rglob("*"))


def test_no_cache_leaves_the_cache_folder_empty(range_server, served_root, cache_dir):
    run_json("inspect", range_server.url_for(RELEASE + "/"), "--json", "--no-cache")
    assert not cache_dir.exists() or not any(p.is_file() for p in cache_dir.rglob("*"))


@pytest.mark.parametrize("mode", [{}, {"drop_after": 100, "only": "*.safetensors"},
                                  {"ignore_range": True}])
def test_no_cache_leaves_no_temporary_folder_behind(range_server, served_root, tmp_path,
                                                    monkeypatch, mode):
    """--no-cache fetches into a throwaway folder: gone after the run, failed or not."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    range_server.configure(**mode)
    proc = run_cli("inspect", range_server.url_for("big/"), "--json", "--no-cache")
    assert proc.returncode == (0 if not mode else 2), proc.stderr
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("mode", [{"drop_after": 100, "only": "*-00002-of-00003.safetensors"},
                                  {"drop_after": 20_000, "only": "*.safetensors"},
                                  {"forbidden": ("*.index.json",)}])
def test_a_failed_run_leaves_nothing_wrong_in_the_cache(range_server, served_root, mode):
    url = range_server.url_for(RELEASE + "/")
    range_server.configure(**mode)
    assert run_cli("inspect", url, "--json").returncode == 2
    range_server.reset_modes()
    local, _ = local_json("inspect", served_root / RELEASE, "--json")
    remote, _ = run_json("inspect", url, "--json")
    assert without(remote, "path") == without(local, "path")


# -- concurrency -------------------------------------------------------------------------------

def test_shards_are_fetched_concurrently_within_the_bound(range_server, served_root):
    url = range_server.url_for(RELEASE + "/")
    range_server.configure(latency=0.15)
    run_json("inspect", url, "--json", "--no-cache")
    wide = max_in_flight(range_server.log, 0.15)
    range_server.reset_counters()
    run_json("inspect", url, "--json", "--no-cache", "--concurrency", "1")
    one = max_in_flight(range_server.log, 0.15)
    assert wide >= 2, "no two requests overlapped with --concurrency 16 (latency 0.15 s)"
    assert one == 1, f"{one} requests overlapped with --concurrency 1"


def max_in_flight(log: list[dict], latency: float) -> int:
    """Requests whose arrival lies within `latency` of another's: they were in flight together
    (each waits `latency` before its answer)."""
    times = sorted(e["t"] for e in log)
    best = 1
    for i, t in enumerate(times):
        best = max(best, sum(1 for u in times[i:] if u - t < latency * 0.8))
    return best


# -- failures: one line, exit 2 ----------------------------------------------------------------

def test_a_missing_folder_url(range_server):
    url = range_server.url_for("no-such-dir/")
    assert_names(assert_one_line_error(run_cli("inspect", url), "no such file or folder"), url)


def test_a_missing_file_url(range_server):
    url = range_server.url_for(f"{RELEASE}/nope.safetensors")
    for cmd in (("inspect", url), ("check", url), ("stats", url), ("diff", url, url)):
        assert_names(assert_one_line_error(run_cli(*cmd), "no such file or folder"), url)


def test_a_server_that_ignores_range_is_refused_without_sending_a_whole_shard(range_server,
                                                                              served_root):
    rel = "big/one.safetensors"
    size = (served_root / rel).stat().st_size
    assert size > 1024 * 1024
    range_server.configure(ignore_range=True)
    url = range_server.url_for(rel)
    line = assert_one_line_error(run_cli("inspect", url), "does not honour range requests", url)
    assert named_url(line) == url
    time.sleep(0.2)  # let the server notice the hang-up
    sent = range_server.counter(rel).bytes
    assert sent < size // 2, f"{sent:,} of {size:,} bytes sent to a client that should hang up"


def test_a_folder_on_a_server_that_ignores_range(range_server, served_root):
    range_server.configure(ignore_range=True)
    url = range_server.url_for("big/")
    line = assert_one_line_error(run_cli("inspect", url), "does not honour range requests",
                                 url.rstrip("/"))
    assert named_url(line) in (url, url.rstrip("/"), range_server.url_for("big/one.safetensors"))


def test_a_connection_dropped_mid_header(range_server):
    range_server.configure(drop_after=100, only="*.safetensors")
    url = range_server.url_for(RELEASE + "/")
    assert_names(assert_one_line_error(run_cli("inspect", url)), url)


def test_a_connection_dropped_while_reading_values(range_server, served_root):
    rel = "big/one.safetensors"
    url = range_server.url_for(rel)
    run_json("inspect", url, "--json")  # headers cached; now the values' read drops
    range_server.configure(drop_after=4096, only=rel)
    proc = run_cli("stats", url, "big.weight", "--json")
    assert "Traceback" not in proc.stderr
    # a tensor whose bytes cannot be read: the README says exit 5 with an "error" row, the
    # contract for remote failures says exit 2 with one line; either, never a traceback or 0
    assert proc.returncode in (2, 5), (proc.returncode, proc.stderr, proc.stdout[-1000:])
    if proc.returncode == 2:
        assert_names(assert_one_line_error(proc), url)
    else:
        doc = json.loads(proc.stdout)
        assert "error" in doc["tensors"][0]


def test_a_stalled_server_times_out(range_server):
    range_server.configure(stall=20)
    url = range_server.url_for(RELEASE + "/")
    t0 = time.monotonic()
    proc = run_cli("inspect", url, "--timeout", "1", timeout=30)
    elapsed = time.monotonic() - t0
    line = assert_one_line_error(proc, "timed out")
    assert_names(line, url)
    assert re.search(r"timed out after 1(\.0)? ?s", line), line
    assert elapsed < 10, f"took {elapsed:.1f} s with --timeout 1"


def test_a_stall_on_a_shard_times_out(range_server):
    range_server.configure(stall=20, only="*.safetensors")
    url = range_server.url_for(RELEASE + "/")
    t0 = time.monotonic()
    proc = run_cli("inspect", url, "--timeout", "1", timeout=30)
    assert_names(assert_one_line_error(proc, "timed out"), url)
    assert time.monotonic() - t0 < 10


def test_a_stall_while_reading_values_times_out(range_server):
    rel = "big/one.safetensors"
    url = range_server.url_for(rel)
    run_json("inspect", url, "--json")  # headers cached; now the values' read stalls
    range_server.configure(stall=20, only=rel)
    t0 = time.monotonic()
    proc = run_cli("stats", url, "big.weight", "--json", "--timeout", "1", timeout=30)
    assert time.monotonic() - t0 < 10
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (2, 5), (proc.returncode, proc.stderr, proc.stdout[-1000:])
    if proc.returncode == 2:
        assert_names(assert_one_line_error(proc, "timed out"), url)
    else:
        assert "timed out" in json.loads(proc.stdout)["tensors"][0]["error"]


def test_a_slow_server_within_the_timeout_is_fine(range_server, served_root):
    range_server.configure(latency=0.4)
    local, _ = local_json("inspect", served_root / RELEASE, "--json")
    remote, _ = run_json("inspect", range_server.url_for(RELEASE + "/"), "--json", "--timeout",
                         "2")
    assert without(remote, "path") == without(local, "path")


def test_forbidden_is_access_denied(range_server):
    range_server.configure(forbidden=("*.safetensors",))
    url = range_server.url_for(RELEASE + "/")
    assert_names(assert_one_line_error(run_cli("inspect", url), "access denied"), url)
    range_server.configure(forbidden=(f"{RELEASE}/",))
    assert_names(assert_one_line_error(run_cli("inspect", url), "access denied"), url)


@pytest.mark.parametrize("cmd", ["inspect", "check", "stats"])
def test_connection_refused(cmd, make_range_server, tmp_path):
    srv = make_range_server(tmp_path)
    url = srv.url_for(RELEASE + "/")
    srv.stop()  # nothing listens on the port any more
    proc = run_cli(cmd, url, "--timeout", "5")
    assert_names(assert_one_line_error(proc), url)


# -- credentials in a URL ------------------------------------------------------------------

def cache_leaks(cache: Path, secret: str) -> list[str]:
    """Cache paths whose name or content holds the secret."""
    out = []
    for p in cache.rglob("*"):
        if secret in str(p.relative_to(cache)):
            out.append(f"name: {p.relative_to(cache)}")
        elif p.is_file() and secret.encode() in p.read_bytes():
            out.append(f"content: {p.relative_to(cache)}")
    return out


def test_a_password_in_a_url_is_never_printed_nor_cached(range_server, served_root, cache_dir):
    password = "Pw0rdInUrl7"
    url = range_server.url.replace("http://", f"http://alice:{password}@") + RELEASE + "/"
    local, _ = local_json("inspect", served_root / RELEASE, "--json")
    remote, proc = run_json("inspect", url, "--json")
    assert without(remote, "path") == without(local, "path")
    missing = run_cli("inspect", url + "no-such-dir/")
    assert_one_line_error(missing, "no such file or folder")
    for out in (proc.stdout, proc.stderr, missing.stdout, missing.stderr):
        assert password not in out
    assert cache_leaks(cache_dir, password) == []


def test_a_presigned_url_token_is_never_printed_nor_cached(range_server, served_root,
                                                           cache_dir):
    """A pre-signed URL (S3, GCS) carries its credential in the query string."""
    token = "SiGnAtUrE0123456789abcdef"
    rel = "big/one.safetensors"
    url = range_server.url_for(rel) + f"?X-Amz-Credential=AKIAX&X-Amz-Signature={token}"
    local, _ = local_json("inspect", served_root / rel, "--json")
    remote, proc = run_json("inspect", url, "--json")
    assert without(remote, "path") == without(local, "path")  # files[].path is the file's name
    stats, sp = run_json("stats", url, "small.bias", "--json")
    for out in (proc.stdout, proc.stderr, sp.stdout, sp.stderr):
        assert token not in out
    assert cache_leaks(cache_dir, token) == []


# -- the terminal UI on a URL ------------------------------------------------------------------

@pytest.fixture
def tmux(tmp_path):
    term = Terminal(tmp_path / "rc", width=120, height=30)
    yield term
    term.close()


@pytest.mark.skipif(TMUX is None and not os.environ.get("CI"),
                    reason="tmux not installed (CI installs it)")
def test_browse_a_url_shows_the_url_and_reads_values_on_v(tmux, range_server, served_root,
                                                         cache_dir):
    url = range_server.url_for(RELEASE + "/")
    tmux.start(["browse", url], env={"CKPT_BROWSER_CACHE": str(cache_dir),
                                     "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    screen = tmux.wait_for("read 6/6")  # the shards, the index and the two configs
    assert url.rstrip("/").removeprefix("http://") in screen
    assert cache_dir.name not in screen and str(cache_dir) not in screen
    for shard in SHARDS:
        assert_header_reads_only(range_server, f"{RELEASE}/{shard}", served_root / RELEASE / shard)

    range_server.reset_counters()
    tmux.keys("Down", "Down", "Right")  # expand the first shard, after the two configs
    tmux.wait_for("lm_head.weight")
    tmux.keys("Down", "v")  # lm_head.weight, its values
    tmux.wait_for("abs max")
    rel = f"{RELEASE}/{SHARDS[0]}"
    first, end = tensor_span(served_root / rel, "lm_head.weight")
    c = range_server.counter(rel)
    assert c.gets >= 1 and c.full_gets == 0, c
    for a, b in c.get_ranges:
        assert first <= a and b < end, ((a, b), (first, end))
    tmux.keys("q")
    assert tmux.exit_code() == 0


def test_browse_a_missing_url_fails_before_taking_the_screen(range_server):
    url = range_server.url_for("no-such-dir/")
    assert_names(assert_one_line_error(run_cli("browse", url), "no such file or folder"), url)
    assert_names(assert_one_line_error(run_cli(url), "no such file or folder"), url)


def test_quiz_from_a_url_asks_about_that_checkpoint(range_server, served_root):
    """quiz --from URL: the same questions about the checkpoint as its local copy gives
    (answers computed from the headers and state files read over HTTP), beyond the bank's."""
    rel = "tiny-llama-run/checkpoint-6"
    bank, _ = local_json("quiz", "--export", "json")
    local, _ = local_json("quiz", "--from", served_root / rel, "--export", "json", "--seed", "3")
    remote, _ = run_json("quiz", "--from", range_server.url_for(rel + "/"), "--export", "json",
                         "--seed", "3")
    assert remote == local
    assert len(remote["questions"]) > len(bank["questions"])
