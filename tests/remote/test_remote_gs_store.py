"""The gs:// store of gcs.py proven on its own (gcsfs against fake-gcs-server through the
counting proxy: listing, ranged reads counted once, a new generation on put, 403 when denied,
the fake credential really sent), before the shared suite (test_remote_stores.py) runs the S3
checks on it; and the service-account key never reaching output or cache.
"""

from __future__ import annotations

import pytest

from .conftest import (
    SAMPLES,
    run_cli,
)
from .gcs import ACCESS_TOKEN

SAMPLE = "tiny-llama-run/checkpoint-6"
SHARD = f"{SAMPLE}/model-00001-of-00003.safetensors"
CHECK_CODES = (0, 3, 4, 5)


@pytest.fixture
def gcs_fs(gs_store):
    """A fresh gcsfs filesystem in this process, with the environment gs_store set."""
    from gcsfs.core import GCSFileSystem

    fs = GCSFileSystem(skip_instance_cache=True)
    yield fs
    fs.invalidate_cache()


# -- the store itself ------------------------------------------------------------------------

def test_it_lists_with_sizes_and_versions(gs_store, gcs_fs):
    found = gcs_fs.find(f"ckpts/{SAMPLE}", detail=True)
    local = {p.relative_to(SAMPLES / SAMPLE).as_posix(): p.stat().st_size
             for p in (SAMPLES / SAMPLE).rglob("*") if p.is_file()}
    remote = {k[len(f"ckpts/{SAMPLE}/"):]: v["size"] for k, v in found.items()}
    assert remote == local
    assert all(v.get("etag") and v.get("generation") for v in found.values())
    assert gcs_fs.info(f"ckpts/{SAMPLE}")["type"] == "directory"
    assert gs_store.object_reads() == []


def test_a_range_returns_those_bytes_and_counts_one_read(gs_store, gcs_fs):
    data = (SAMPLES / SHARD).read_bytes()
    got = gcs_fs.cat_file(f"ckpts/{SHARD}", start=8, end=4096)
    assert got == data[8:4096]
    assert gs_store.object_reads() == [SHARD]
    gs_store.reset_requests()
    assert gs_store.object_reads() == []


def test_the_fake_credential_is_what_gcsfs_sends(gs_store, gcs_fs):
    gcs_fs.info(f"ckpts/{SHARD}")
    proxy = gs_store._gcs.proxy
    grant = "urn:ietf:params:oauth:grant-type:jwt-bearer"  # a service account's signed JWT
    assert [r["grant_type"] for r in proxy.token_requests] == [grant]
    assert proxy.auth and set(proxy.auth) == {f"Bearer {ACCESS_TOKEN}"}


def test_put_changes_generation_and_etag(gs_store, gcs_fs, tmp_path):
    rel = f"scratch/{tmp_path.name}/a.bin"
    gs_store.put(rel, b"one")
    before = gcs_fs.info(f"ckpts/{rel}")
    gs_store.put(rel, b"second")
    gcs_fs.invalidate_cache()
    after = gcs_fs.info(f"ckpts/{rel}")
    assert after["size"] == 6
    assert after["generation"] != before["generation"]
    assert after["etag"] != before["etag"]
    assert gcs_fs.cat_file(f"ckpts/{rel}") == b"second"


def test_denied_makes_gcsfs_raise_and_ends_with_the_block(gs_store, gcs_fs):
    with gs_store.denied() as refused:
        assert refused == gs_store.secret
        with pytest.raises(OSError, match="Forbidden") as e:
            gcs_fs.info(f"ckpts/{SHARD}")
        with pytest.raises(OSError, match="storage.objects.get"):
            gcs_fs.cat_file(f"ckpts/{SHARD}", start=0, end=10)
    assert not isinstance(e.value, FileNotFoundError)
    assert gs_store.object_reads() == []
    assert gcs_fs.cat_file(f"ckpts/{SHARD}", start=0, end=8) == (SAMPLES / SHARD).read_bytes()[:8]


def test_urls(gs_store):
    assert gs_store.url(SAMPLE) == f"gs://ckpts/{SAMPLE}/"
    assert gs_store.url("lightning/last.ckpt") == "gs://ckpts/lightning/last.ckpt"
    assert gs_store.url(SAMPLE, folder=False) == f"gs://ckpts/{SAMPLE}"
    assert gs_store.missing_container_url() == "gs://no-such-bucket-ckpt/run/checkpoint-1/"


# -- the CLI over it (the shared checks are in test_remote_stores.py) ---------------------------

def test_the_key_file_never_leaks(gs_store, cache_dir):
    """Beyond the access token (the shared suite's secret): no line of the service-account key
    gcsfs signs with reaches the output or the cache."""
    proc = run_cli("inspect", gs_store.url(SAMPLE), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    key_line = gs_store._gcs.private_key.splitlines()[1]  # a line of the key file's RSA key
    for text in (proc.stdout + proc.stderr, *(p.read_text(errors="replace") for p in
                                             cache_dir.rglob("*") if p.is_file())):
        assert gs_store.secret not in text and key_line not in text
