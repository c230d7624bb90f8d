"""hf:// against the fake Hub (fake_hub.py, fixtures in hub.py): what only the Hub has.

Revisions (`@v1`, `@<commit>`, none = main) and subfolders give the JSON of the local folder they
hold; the shards' bytes read are their headers (ranged GETs through the CDN redirect, at most two
per shard, none into the data) and the Hub's API is asked a bounded number of times; a private repo
opens with HF_TOKEN and is "no such repo, or private" without it; a token the Hub refuses, a gated
repo, a missing revision and a missing repo are each one line with exit 2. The shared suite
(test_remote_stores.py) runs the S3 checks on hf:// too.
"""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import (
    SAMPLES,
    SPECULATIVE,
    assert_names,
    assert_one_line_error,
    header_len,
    local_json,
    run_cli,
    run_json,
    without,
)
from .hub import TOKEN, UNKNOWN_TOKEN

RELEASE = SAMPLES / "tiny-llama-release"


def shard_reads(hub, repo: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for rel, r in hub.byte_reads(repo):
        out.setdefault(rel, []).append(r)
    return out


def assert_headers_only(hub, repo: str, rel: str, local) -> None:
    """One shard read for its header: at most two ranged GETs of its bytes, the first from 0 and
    within 128 KiB, none reaching into the data section past max(128 KiB, the header's end)."""
    reads = shard_reads(hub, repo).get(rel, [])
    data_start = 8 + header_len(local)
    assert 1 <= len(reads) <= 2, (rel, reads)
    assert all(r.range is not None for r in reads), f"{rel}: a GET without Range: {reads}"
    if data_start <= SPECULATIVE:
        assert len(reads) == 1, (rel, reads)
    assert reads[0].range[0] == 0 and reads[0].range[1] <= SPECULATIVE, reads
    for r in reads:
        assert r.range[0] < data_start and r.range[1] <= max(SPECULATIVE, data_start), (rel, r)
    assert sum(r.sent for r in reads) <= min(local.stat().st_size, SPECULATIVE) + data_start


def local_copy(tmp_path, sample: str, name: str):
    """sample_checkpoints/<sample> copied to tmp_path/<name> (the name the repo gives it)."""
    dest = tmp_path / "local" / name
    shutil.copytree(SAMPLES / sample, dest)
    return dest


# -- what is read ------------------------------------------------------------------------------

@pytest.mark.parametrize("folder", ["big", "wide", "tiny-llama-release"])
def test_inspect_reads_only_the_headers_of_each_shard(hf_store, served_root, folder):
    hub = hf_store.hub
    local, _ = local_json("inspect", served_root / folder, "--json")
    remote, _ = run_json("inspect", f"hf://org/served/{folder}/", "--json")
    assert without(remote, "path") == without(local, "path")
    shards = sorted((served_root / folder).glob("*.safetensors"))
    assert shards
    for shard in shards:
        assert_headers_only(hub, "org/served", f"{folder}/{shard.name}", shard)
    # the API: the repo's info, then the tree of the parent (is it a folder?) and of the folder
    api = hub.api_requests()
    assert len(api) <= 4, api
    assert all(r.method == "GET" for r in api), api


def test_a_large_torch_zip_is_read_for_its_structure_only(hf_store, served_root):
    run_json("inspect", "hf://org/served/bigpt/", "--json")
    reads = shard_reads(hf_store.hub, "org/served")["bigpt/pytorch_model.bin"]
    size = (served_root / "bigpt" / "pytorch_model.bin").stat().st_size
    assert all(r.range is not None for r in reads), reads
    assert sum(r.sent for r in reads) < size // 20, (sum(r.sent for r in reads), size)


# -- revisions and subfolders ------------------------------------------------------------------

@pytest.mark.parametrize("rev, sample", [("@v1", "tiny-llama-run/checkpoint-3"),
                                         ("@COMMIT", "tiny-llama-run/checkpoint-3"),
                                         ("@main", "tiny-llama-run/checkpoint-6"),
                                         ("", "tiny-llama-run/checkpoint-6")])
@pytest.mark.parametrize("cmd", ["inspect", "check"])
def test_a_revision_gives_the_folder_it_holds(hf_store, _hub, tmp_path, rev, sample, cmd):
    rev = rev.replace("COMMIT", _hub.v1)
    local = local_copy(tmp_path, sample, "checkpoint")
    expected, code = local_json(cmd, local, "--json", ok=(0, 3, 4, 5))
    url = f"hf://org/revs{rev}/checkpoint"
    remote, proc = run_json(cmd, url, "--json", ok=(0, 3, 4, 5))
    assert proc.returncode == code
    assert remote["path"] == url
    assert without(remote, "path") == without(expected, "path")


def test_diff_of_two_revisions_equals_the_local_diff(hf_store, tmp_path):
    a = local_copy(tmp_path / "a", "tiny-llama-run/checkpoint-3", "checkpoint")
    b = local_copy(tmp_path / "b", "tiny-llama-run/checkpoint-6", "checkpoint")
    expected, code = local_json("diff", a, b, "--values", "--json", ok=(0, 1))
    remote, proc = run_json("diff", "hf://org/revs@v1/checkpoint", "hf://org/revs/checkpoint",
                            "--values", "--json", ok=(0, 1))
    assert proc.returncode == code
    assert without(remote, "a", "b") == without(expected, "a", "b")


def test_a_repo_root_is_a_checkpoint(hf_store, tmp_path):
    local = local_copy(tmp_path, "tiny-llama-release", "private")
    expected, _ = local_json("inspect", local, "--json")
    remote, _ = run_json("inspect", "hf://org/private", "--json")
    assert without(remote, "path") == without(expected, "path")


# -- tokens and refusals -----------------------------------------------------------------------

def test_a_private_repo_needs_the_token(hf_store, monkeypatch, cache_dir):
    ok = run_cli("inspect", "hf://org/private", "--json")
    assert ok.returncode == 0, ok.stderr
    monkeypatch.delenv("HF_TOKEN")
    proc = run_cli("inspect", "hf://org/private")
    line = assert_one_line_error(proc, "no such repo", "private", "HF_TOKEN")
    assert_names(line, "hf://org/private")
    for p in cache_dir.rglob("*"):
        assert TOKEN not in str(p)
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p
    assert TOKEN not in ok.stdout + ok.stderr


def test_a_token_the_hub_refuses_is_access_denied(hf_store, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", UNKNOWN_TOKEN)
    for cmd in ("inspect", "check"):
        proc = run_cli(cmd, "hf://org/private")
        line = assert_one_line_error(proc, "access denied", "HF_TOKEN")
        assert_names(line, "hf://org/private")
        assert UNKNOWN_TOKEN not in proc.stderr


def test_a_gated_repo_says_so(hf_store):
    url = "hf://org/gated/"
    line = assert_one_line_error(run_cli("inspect", url), "access denied", "gated", "HF_TOKEN")
    assert_names(line, url)


@pytest.mark.parametrize("url, words", [
    ("hf://org/revs@v9/checkpoint", ("no such file or folder", "revision")),
    ("hf://org/no-such-repo", ("no such file or folder", "no such repo")),
    ("hf://org/revs/no-such-folder/", ("no such file or folder",)),
    ("hf://datasets/org/samples", ("no such file or folder", "no such repo")),
])
def test_missing_things_are_one_line(hf_store, url, words):
    for cmd in ("inspect", "check"):
        assert_names(assert_one_line_error(run_cli(cmd, url), *words), url)


def test_the_hub_is_asked_nothing_when_offline(hf_store, monkeypatch, tmp_path):
    """HF_HUB_OFFLINE=1 answers hf:// from the local cache alone, as huggingface_hub does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf_store.hub.reset()
    proc = run_cli("inspect", "hf://org/samples")
    assert_one_line_error(proc, "not in the Hugging Face cache", "HF_HUB_OFFLINE")
    assert hf_store.hub.requests() == []


def test_json_of_the_fake_hub_is_what_huggingface_hub_parses(hf_store):
    """The fake's listing is read by HfFileSystem itself: sizes and blob ids as served."""
    from huggingface_hub import HfFileSystem

    fs = HfFileSystem(endpoint=hf_store.hub.endpoint, token=TOKEN)
    found = fs.find("org/samples/tiny-llama-release", detail=True)
    names = sorted(p.name for p in RELEASE.iterdir())
    assert [k.rsplit("/", 1)[1] for k in found] == names
    for k, v in found.items():
        assert v["size"] == (RELEASE / k.rsplit("/", 1)[1]).stat().st_size
    data = fs.cat_file("org/samples/tiny-llama-release/config.json")
    assert json.loads(data) == json.loads((RELEASE / "config.json").read_text())


def test_a_run_folders_timeline_has_the_hubs_times(hf_store):
    """Each checkpoint's time is its last commit's, from one paths-info request; the order is
    by step. Files named like checkpoints (Lightning's) get their commit's time too."""
    from .fake_hub import EPOCH

    doc, _ = run_json("inspect", "hf://org/run", "--json")
    times = {e["name"]: (e["step"], e["mtime"]) for e in doc["timeline"]}
    assert [e["name"] for e in doc["timeline"]][:2] == ["checkpoint-6", "checkpoint-3"]
    # commits: the empty initial one, then one per checkpoint, a minute apart
    assert times["checkpoint-3"] == (3, EPOCH + 60)
    assert times["checkpoint-6"] == (6, EPOCH + 120)
    posts = [r for r in hf_store.hub.api_requests() if r.method == "POST"]
    assert len(posts) == 1 and "paths-info" in posts[0].path, posts
    lightning, _ = run_json("inspect", hf_store.url("lightning"), "--json")
    assert {e["name"]: e["mtime"] for e in lightning["timeline"]} == {
        "epoch=0-step=4.ckpt": EPOCH, "last.ckpt": EPOCH}  # org/samples: one commit
