"""A checkpoint in the Hugging Face hub cache: named as its repo and revision, read through the
snapshot's symlinks into blobs/ with the same findings as the folder it mirrors, and an
interrupted or pruned download said as such.

The cache is laid out as huggingface_hub writes it (its documented "Understand caching" layout:
blobs named by the file's sha256, relative snapshot links, refs/main holding the commit)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from ckpt_browser.cli import main
from ckpt_browser.readers.hf_cache import cache_entry
from tests.tui.conftest import SAMPLES

RUN = SAMPLES / "tiny-llama-run" / "checkpoint-6"
REVISION = "1f0c3a5d9e8b7c6a5f4e3d2c1b0a998877665540"  # a commit hash: 40 hex digits


def cache_of(folder, cache_root, sub: str = ""):
    """Mirror `folder` as the cached model repo org/tiny-llama at REVISION (under `sub` in
    the repo when given)."""
    repo = cache_root / "models--org--tiny-llama"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    snap = repo / "snapshots" / REVISION
    target = snap / sub if sub else snap
    target.mkdir(parents=True)
    up = [".."] * (2 + (len(sub.split("/")) if sub else 0))
    for f in sorted(folder.iterdir()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, repo / "blobs" / digest)
        os.symlink(os.path.join(*up, "blobs", digest), target / f.name)
    return repo, snap


def run(capsys, *args):
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def findings(doc):
    return [(f["severity"], f.get("component"), f["message"]) for f in doc["findings"]]


@pytest.fixture
def cached(tmp_path):
    return cache_of(RUN, tmp_path / "hub")


def test_the_cache_entry_is_named_by_repo_and_branch(cached):
    repo, snap = cached
    entry = cache_entry(str(snap / "config.json"))
    assert entry is not None and entry.repo_id == "org/tiny-llama" and entry.refs == ("main",)
    assert entry.shown() == f"hf cache: org/tiny-llama @ main ({REVISION[:8]})"
    assert cache_entry(str(RUN)) is None


def test_check_and_inspect_match_the_folder_it_mirrors(capsys, cached):
    _, snap = cached
    code_a, out_a, _ = run(capsys, "check", RUN, "--json")
    code_b, out_b, _ = run(capsys, "check", snap, "--json")
    a, b = json.loads(out_a), json.loads(out_b)
    assert code_a == code_b and a["verdict"] == b["verdict"]
    assert findings(a) == findings(b)
    _, text, _ = run(capsys, "inspect", snap)
    assert f"repo     hf cache: org/tiny-llama @ main ({REVISION[:8]})" in text
    assert "blobs" not in text and "symlinks" not in text  # no blob paths, no link note
    _, doc, _ = run(capsys, "inspect", snap, "--json")
    assert json.loads(doc)["shown_as"].startswith("hf cache: org/tiny-llama")


def test_an_interrupted_download_is_reported_as_such(capsys, cached):
    repo, snap = cached
    shard = snap / "model-00002-of-00003.safetensors"
    blob = repo / "blobs" / os.path.basename(os.readlink(shard))
    shard.unlink()  # huggingface_hub links a file only once it is complete
    blob.rename(blob.with_name(blob.name + ".incomplete"))
    _, out, _ = run(capsys, "inspect", snap, "--json")
    messages = " ".join(p["message"] for p in json.loads(out)["problems"])
    assert "unfinished download of org/tiny-llama: 1 .incomplete blob(s)" in messages
    code, out, _ = run(capsys, "check", snap, "--json")
    doc = json.loads(out)
    assert doc["verdict"] == "broken" and code == 5  # a shard of the index is missing
    assert "model-00002-of-00003.safetensors" in out


def test_a_link_to_a_pruned_blob_is_an_error_naming_the_file(capsys, cached):
    repo, snap = cached
    shard = snap / "model-00003-of-00003.safetensors"
    (repo / "blobs" / os.path.basename(os.readlink(shard))).unlink()
    code, out, _ = run(capsys, "inspect", snap, "--json")
    problems = json.loads(out)["problems"]
    assert any(p["severity"] == "error" and p["file"] == shard.name
               and "link to blobs that are gone" in p["message"] for p in problems)


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hub"


def without_path(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "path"}


@pytest.mark.parametrize("revision", ["", "@main", f"@{REVISION}"])
def test_hf_url_offline_opens_the_cached_snapshot(capsys, offline_hub, revision):
    _, snap = cache_of(RUN, offline_hub)
    _, local, _ = run(capsys, "inspect", snap, "--json")
    code, remote, err = run(capsys, "inspect", f"hf://org/tiny-llama{revision}", "--json")
    assert code == 0 and err == ""
    assert without_path(json.loads(remote)) == without_path(json.loads(local))


def test_hf_url_offline_with_a_subfolder(capsys, offline_hub):
    _, snap = cache_of(RUN, offline_hub, sub="runs/checkpoint-6")
    code, out, _ = run(capsys, "check", "hf://org/tiny-llama/runs/checkpoint-6", "--json")
    assert code == 0 and json.loads(out)["verdict"] == "exact"


@pytest.mark.parametrize(("url", "words"), [
    ("hf://org/absent", "org/absent is not in the Hugging Face cache"),
    ("hf://org/tiny-llama@v2", "revision 'v2' of org/tiny-llama is not in the Hugging Face cache"),
    ("hf://org/tiny-llama/nope", "nope is not in the cached org/tiny-llama @ main"),
])
def test_hf_url_offline_not_cached_is_one_line(capsys, offline_hub, url, words):
    cache_of(RUN, offline_hub)
    code, out, err = run(capsys, "inspect", url)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "HF_HUB_OFFLINE" in err
