"""Remote checkpoints on object stores, every test once per store of `conftest.STORES` (the
`store` fixture; see `stores.Store`): a server on loopback holding sample_checkpoints/, the
real CLI in a subprocess with the environment a user of that store would have.

For each store: `inspect`, `check`, `diff` and `stats` give the same JSON for a URL of a sample
as for the local copy; local and remote diff --values find no difference; reopening a URL reads
no object again (and --no-cache reads again), an overwritten object is read again, each
safetensors shard is read once; a missing container (bucket, repo) or a missing object, denied
access and a missing backend package are one line with exit 2 naming the URL; the store's
secret is never printed nor cached.

Stores today: s3 (moto's S3 API in server mode, bucket `ckpts`, the standard AWS variables).
Without a store: a missing fsspec, or gcsfs for a gs:// URL, asks for the `remote` extra.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import (
    SAMPLES,
    assert_names,
    assert_one_line_error,
    local_json,
    run_cli,
    run_json,
    without,
)

# (sample, what it is)
CHECKPOINTS = [
    "tiny-llama-run/checkpoint-6",          # HF Trainer: shards + index, optimizer.pt, rng ...
    "torchtitan-run/checkpoint/step-10",    # DCP .metadata + rank files
    "lightning/last.ckpt",                  # a single torch zip
    "deepspeed-run",                        # latest + global_step4/ ZeRO shards
    "hf-multirank/checkpoint-4",            # per-rank RNG files
]
CHECK_CODES = (0, 3, 4, 5)


def strip_timeline(doc):
    """The timeline's mtimes are the upload's on the store, the checkout's locally."""
    if isinstance(doc, dict) and "timeline" in doc:
        doc = dict(doc, timeline=[{k: v for k, v in e.items() if k != "mtime"}
                                  for e in doc["timeline"]])
    return doc


@pytest.mark.parametrize("sample", CHECKPOINTS)
def test_inspect_json_equals_local(store, sample):
    local, _ = local_json("inspect", SAMPLES / sample, "--json", ok=(0, 5))
    url = store.url(sample)
    remote, _ = run_json("inspect", url, "--json", ok=(0, 5))
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")


@pytest.mark.parametrize("sample", CHECKPOINTS)
def test_check_json_equals_local(store, sample):
    local, lcode = local_json("check", SAMPLES / sample, "--json", ok=CHECK_CODES)
    url = store.url(sample)
    remote, rp = run_json("check", url, "--json", ok=CHECK_CODES)
    assert rp.returncode == lcode
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")


def test_check_with_world_size_equals_local(store):
    sample = "hf-multirank/checkpoint-4"
    local, lcode = local_json("check", SAMPLES / sample, "--json", "--world-size", "4",
                              ok=CHECK_CODES)
    remote, rp = run_json("check", store.url(sample), "--json", "--world-size", "4",
                          ok=CHECK_CODES)
    assert (rp.returncode, without(remote, "path")) == (lcode, without(local, "path"))


def test_inspect_of_a_folder_of_checkpoints_equals_local(store):
    local, _ = local_json("inspect", SAMPLES / "tiny-llama-run", "--json")
    remote, _ = run_json("inspect", store.url("tiny-llama-run"), "--json")
    assert strip_timeline(without(remote, "path")) == strip_timeline(without(local, "path"))
    assert [e["name"] for e in remote["timeline"]] == [e["name"] for e in local["timeline"]]


@pytest.mark.parametrize("run", ["tiny-llama-run", "lightning"])
def test_a_run_folders_timeline_shows_the_stores_times(store, run):
    """Each checkpoint's time is when the store last wrote it (asked of the store's own API),
    not when it was mirrored; folders (checkpoint-N) and files (Lightning's .ckpt) alike."""
    remote, _ = run_json("inspect", store.url(run), "--json")
    assert remote["timeline"]
    for e in remote["timeline"]:
        assert e["mtime"] == pytest.approx(store.newest_time(f"{run}/{e['name']}"), abs=1e-3), e


@pytest.mark.parametrize("a, b", [
    ("tiny-llama-run/checkpoint-3", "tiny-llama-run/checkpoint-6"),
    ("lightning/epoch=0-step=4.ckpt", "lightning/last.ckpt"),
])
def test_diff_json_equals_local(store, a, b):
    local, lcode = local_json("diff", SAMPLES / a, SAMPLES / b, "--values", "--json", ok=(0, 1))
    url_a, url_b = store.url(a), store.url(b)
    remote, rp = run_json("diff", url_a, url_b, "--values", "--json", ok=(0, 1))
    assert rp.returncode == lcode
    assert [remote[k].rstrip("/") for k in "ab"] == [url_a.rstrip("/"), url_b.rstrip("/")]
    assert without(remote, "a", "b") == without(local, "a", "b")


@pytest.mark.parametrize("sample", ["tiny-llama-run/checkpoint-6",
                                    "torchtitan-run/checkpoint/step-10"])
def test_diff_values_of_local_and_remote_finds_no_difference(store, sample):
    proc = run_cli("diff", SAMPLES / sample, store.url(sample), "--values")
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr)
    assert "Traceback" not in proc.stderr


def test_stats_of_a_dcp_tensor_equals_local(store):
    sample = "torchtitan-run/checkpoint/step-10"
    local, _ = local_json("stats", SAMPLES / sample, "--json")
    remote, _ = run_json("stats", store.url(sample), "--json")
    assert remote["path"].rstrip("/") == store.url(sample).rstrip("/")
    assert without(remote, "path") == without(local, "path")


def test_stats_of_an_optimizer_tensor_in_a_torch_zip_equals_local(store):
    sample = "tiny-llama-run/checkpoint-6"
    local, _ = local_json("stats", SAMPLES / sample, "state.*.exp_avg", "--json")
    remote, _ = run_json("stats", store.url(sample), "state.*.exp_avg", "--json")
    assert without(remote, "path") == without(local, "path")


def test_reopening_reads_no_object_again_and_no_cache_reads_again(store):
    url = store.url("tiny-llama-run/checkpoint-6")
    first, _ = run_json("inspect", url, "--json")
    read = set(store.object_reads())
    shards = {f"tiny-llama-run/checkpoint-6/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)}
    assert shards <= read, read
    store.reset_requests()
    second, _ = run_json("inspect", url, "--json")
    assert second == first
    assert store.object_reads() == [], "reopening read objects again"
    store.reset_requests()
    third, _ = run_json("inspect", url, "--json", "--no-cache")
    assert third == first
    assert shards <= set(store.object_reads())


def test_a_changed_object_is_read_again(store, tmp_path):
    """Overwriting an object gives it a new version (ETag, generation, commit): the cached copy
    must not be used."""
    prefix = f"scratch/{tmp_path.name}/tiny-llama-release"
    local = tmp_path / "tiny-llama-release"
    local.mkdir()
    for f in sorted((SAMPLES / "tiny-llama-release").iterdir()):
        data = f.read_bytes()
        local.joinpath(f.name).write_bytes(data)
        store.put(f"{prefix}/{f.name}", data)
    url = store.url(prefix)
    run_json("inspect", url, "--json")
    shard = local / "model-00001-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])  # truncated, on both sides
    store.put(f"{prefix}/{shard.name}", shard.read_bytes())
    after, _ = run_json("inspect", url, "--json", ok=(5,))
    expected, _ = local_json("inspect", local, "--json", ok=(5,))
    assert without(after, "path") == without(expected, "path")


def test_inspect_reads_each_shard_once(store):
    run_json("inspect", store.url("tiny-llama-release"), "--json")
    reads = store.object_reads()
    for i in (1, 2, 3):
        key = f"tiny-llama-release/model-0000{i}-of-00003.safetensors"
        assert reads.count(key) == 1, (key, reads)  # the 128 KiB first read holds the header


# -- failures ----------------------------------------------------------------------------------

def test_a_missing_container(store):
    url = store.missing_container_url()
    assert_names(assert_one_line_error(run_cli("inspect", url), "no such file or folder"), url)


@pytest.mark.parametrize("rel", ["tiny-llama-run/checkpoint-999", "lightning/nope.ckpt"])
def test_a_missing_key(store, rel):
    url = store.url(rel)
    for cmd in ("inspect", "check"):
        assert_names(assert_one_line_error(run_cli(cmd, url), "no such file or folder"), url)


def test_access_denied(store):
    folder_url = store.url("tiny-llama-run/checkpoint-6")
    file_url = store.url("lightning/last.ckpt")
    with store.denied() as refused:
        folder = run_cli("inspect", folder_url)
        file = run_cli("inspect", file_url)
    for proc, where in ((folder, folder_url), (file, file_url)):
        assert_names(assert_one_line_error(proc, "access denied"), where)
        assert refused not in proc.stderr + proc.stdout


def test_the_secret_is_never_printed_nor_cached(store, cache_dir):
    sample = "tiny-llama-run/checkpoint-6"
    url = store.url(sample)
    outputs = [
        run_cli("inspect", url),
        run_cli("inspect", url, "--json"),
        run_cli("check", url),
        run_cli("diff", SAMPLES / sample, url, "--values"),
        run_cli("stats", url, "lm_head.weight"),
        run_cli("inspect", store.missing_container_url()),
    ]
    secret = store.secret
    for proc in outputs:
        assert secret not in proc.stdout and secret not in proc.stderr
        assert "Traceback" not in proc.stderr
    files = [p for p in cache_dir.rglob("*")]
    assert any(p.is_file() for p in files), "nothing was cached"
    for p in files:
        assert secret not in str(p)
        assert secret.split("/")[0] not in p.name
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


def assert_asks_for_the_remote_extra(blocked: str, url: str) -> None:
    """The package `blocked` made unimportable (sys.modules[name] = None) before main runs:
    inspect URL is one line naming the URL and the extra to install."""
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from ckpt_browser.cli import main\n"
            f"raise SystemExit(main(['inspect', {url!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=SAMPLES.parent)
    line = assert_one_line_error(proc, "pip install 'ckpt-browser[remote]'")
    assert_names(line, url)


def test_without_the_backend_a_url_says_which_extra_to_install(store):
    assert_asks_for_the_remote_extra(store.backend_module,
                                     store.url("tiny-llama-run/checkpoint-6"))


@pytest.mark.parametrize("blocked, url", [
    ("gcsfs", "gs://some-bucket/run/checkpoint-1/"),
    ("fsspec", "s3://some-bucket/run/checkpoint-1/"),
])
def test_without_fsspec_or_gcsfs_a_url_says_which_extra_to_install(blocked, url):
    """No server needed: the URL is refused before anything is asked of one."""
    assert_asks_for_the_remote_extra(blocked, url)


@pytest.mark.parametrize("sample", ["tiny-llama-run/checkpoint-6",
                                    "torchtitan-run/checkpoint/step-10"])
def test_export_of_a_remote_checkpoint_is_the_local_export(store, sample, tmp_path):
    """The values fetched by range through the same readers: the same files, byte for byte
    (the config too, fetched whole)."""
    local = run_cli("export", SAMPLES / sample, tmp_path / "local")
    remote = run_cli("export", store.url(sample), tmp_path / "remote")
    assert (local.returncode, remote.returncode) == (0, 0), (local.stderr, remote.stderr)
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "remote").iterdir())
    for name in names:
        assert (tmp_path / "local" / name).read_bytes() == \
            (tmp_path / "remote" / name).read_bytes(), name
