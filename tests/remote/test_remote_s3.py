"""Remote checkpoints on S3: moto's S3 API in server mode on loopback, bucket `ckpts`
filled from sample_checkpoints/; the real CLI in a subprocess with the standard AWS variables.
`inspect`, `check` and `diff` give the same JSON for s3://ckpts/SAMPLE as for the local copy;
local and remote diff equal; missing buckets and keys, denied access and a missing s3fs are one
line with exit 2; the secret key is never printed nor cached.
"""

from __future__ import annotations

import pytest

from .conftest import (
    BUCKET,
    SAMPLES,
    SECRET,
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


def s3(rel: str, folder: bool = True) -> str:
    return f"s3://{BUCKET}/{rel}" + ("/" if folder and not rel.endswith((".ckpt", ".pt")) else "")


def strip_timeline(doc):
    """The timeline's mtimes are the upload's on S3, the checkout's locally."""
    if isinstance(doc, dict) and "timeline" in doc:
        doc = dict(doc, timeline=[{k: v for k, v in e.items() if k != "mtime"}
                                  for e in doc["timeline"]])
    return doc


@pytest.mark.parametrize("sample", CHECKPOINTS)
def test_inspect_json_equals_local(s3_server, sample):
    local, _ = local_json("inspect", SAMPLES / sample, "--json", ok=(0, 5))
    url = s3(sample)
    remote, _ = run_json("inspect", url, "--json", ok=(0, 5))
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")


@pytest.mark.parametrize("sample", CHECKPOINTS)
def test_check_json_equals_local(s3_server, sample):
    local, lcode = local_json("check", SAMPLES / sample, "--json", ok=CHECK_CODES)
    url = s3(sample)
    remote, rp = run_json("check", url, "--json", ok=CHECK_CODES)
    assert rp.returncode == lcode
    assert remote["path"].rstrip("/") == url.rstrip("/")
    assert without(remote, "path") == without(local, "path")


def test_check_with_world_size_equals_local(s3_server):
    sample = "hf-multirank/checkpoint-4"
    local, lcode = local_json("check", SAMPLES / sample, "--json", "--world-size", "4",
                         ok=CHECK_CODES)
    remote, rp = run_json("check", s3(sample), "--json", "--world-size", "4", ok=CHECK_CODES)
    assert (rp.returncode, without(remote, "path")) == (lcode, without(local, "path"))


def test_inspect_of_a_folder_of_checkpoints_equals_local(s3_server):
    local, _ = local_json("inspect", SAMPLES / "tiny-llama-run", "--json")
    remote, _ = run_json("inspect", s3("tiny-llama-run"), "--json")
    assert strip_timeline(without(remote, "path")) == strip_timeline(without(local, "path"))
    assert [e["name"] for e in remote["timeline"]] == [e["name"] for e in local["timeline"]]


@pytest.mark.parametrize("a, b", [
    ("tiny-llama-run/checkpoint-3", "tiny-llama-run/checkpoint-6"),
    ("lightning/epoch=0-step=4.ckpt", "lightning/last.ckpt"),
])
def test_diff_json_equals_local(s3_server, a, b):
    local, lcode = local_json("diff", SAMPLES / a, SAMPLES / b, "--values", "--json", ok=(0, 1))
    remote, rp = run_json("diff", s3(a), s3(b), "--values", "--json", ok=(0, 1))
    assert rp.returncode == lcode
    assert [remote[k].rstrip("/") for k in "ab"] == [s3(a).rstrip("/"), s3(b).rstrip("/")]
    assert without(remote, "a", "b") == without(local, "a", "b")


@pytest.mark.parametrize("sample", ["tiny-llama-run/checkpoint-6",
                                    "torchtitan-run/checkpoint/step-10"])
def test_diff_values_of_local_and_remote_finds_no_difference(s3_server, sample):
    proc = run_cli("diff", SAMPLES / sample, s3(sample), "--values")
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr)
    assert "Traceback" not in proc.stderr


def test_stats_of_a_dcp_tensor_equals_local(s3_server):
    sample = "torchtitan-run/checkpoint/step-10"
    local, _ = local_json("stats", SAMPLES / sample, "--json")
    remote, _ = run_json("stats", s3(sample), "--json")
    assert remote["path"].rstrip("/") == s3(sample).rstrip("/")
    assert without(remote, "path") == without(local, "path")


def test_stats_of_an_optimizer_tensor_in_a_torch_zip_equals_local(s3_server):
    sample = "tiny-llama-run/checkpoint-6"
    local, _ = local_json("stats", SAMPLES / sample, "state.*.exp_avg", "--json")
    remote, _ = run_json("stats", s3(sample), "state.*.exp_avg", "--json")
    assert without(remote, "path") == without(local, "path")


def test_reopening_reads_no_object_again_and_no_cache_reads_again(s3_server):
    url = s3("tiny-llama-run/checkpoint-6")
    first, _ = run_json("inspect", url, "--json")
    read = set(s3_server.object_reads())
    shards = {f"tiny-llama-run/checkpoint-6/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)}
    assert shards <= read, read
    s3_server.reset_requests()
    second, _ = run_json("inspect", url, "--json")
    assert second == first
    assert s3_server.object_reads() == [], "reopening read objects again"
    s3_server.reset_requests()
    third, _ = run_json("inspect", url, "--json", "--no-cache")
    assert third == first
    assert shards <= set(s3_server.object_reads())


def test_a_changed_object_is_read_again(s3_server, tmp_path):
    """Overwriting an object changes its ETag: the cached copy must not be used."""
    client = s3_server.client()
    prefix = f"scratch/{tmp_path.name}/tiny-llama-release"
    local = tmp_path / "tiny-llama-release"
    local.mkdir()
    for f in sorted((SAMPLES / "tiny-llama-release").iterdir()):
        local.joinpath(f.name).write_bytes(f.read_bytes())
        client.upload_file(str(f), BUCKET, f"{prefix}/{f.name}")
    url = s3(prefix)
    run_json("inspect", url, "--json")
    shard = local / "model-00001-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])  # truncated, on both sides
    client.upload_file(str(shard), BUCKET, f"{prefix}/{shard.name}")
    after, _ = run_json("inspect", url, "--json", ok=(5,))
    expected, _ = local_json("inspect", local, "--json", ok=(5,))
    assert without(after, "path") == without(expected, "path")


def test_inspect_reads_each_shard_once(s3_server):
    run_json("inspect", s3("tiny-llama-release"), "--json")
    reads = s3_server.object_reads()
    for i in (1, 2, 3):
        key = f"tiny-llama-release/model-0000{i}-of-00003.safetensors"
        assert reads.count(key) == 1, (key, reads)  # the 128 KiB first read holds the header


# -- failures ----------------------------------------------------------------------------------

def test_a_missing_bucket(s3_server):
    url = "s3://no-such-bucket-ckpt/run/checkpoint-1/"
    assert_names(assert_one_line_error(run_cli("inspect", url), "no such file or folder"), url)


@pytest.mark.parametrize("url", [f"s3://{BUCKET}/tiny-llama-run/checkpoint-999/",
                                 f"s3://{BUCKET}/lightning/nope.ckpt"])
def test_a_missing_key(s3_server, url):
    for cmd in ("inspect", "check"):
        assert_names(assert_one_line_error(run_cli(cmd, url), "no such file or folder"), url)


def test_access_denied(s3_server, monkeypatch):
    iam = s3_server.client("iam")
    user = "ckpt-browser-denied"
    try:
        iam.create_user(UserName=user)
    except iam.exceptions.EntityAlreadyExistsException:
        pass
    key = iam.create_access_key(UserName=user)["AccessKey"]  # no policy: everything is denied
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    url = s3("tiny-llama-run/checkpoint-6")
    s3_server.enforce_auth(True)
    try:
        folder = run_cli("inspect", url)
        file = run_cli("inspect", s3("lightning/last.ckpt"))
    finally:
        s3_server.enforce_auth(False)
    for proc, where in ((folder, url), (file, s3("lightning/last.ckpt"))):
        assert_names(assert_one_line_error(proc, "access denied"), where)
        assert key["SecretAccessKey"] not in proc.stderr + proc.stdout


def test_the_secret_is_never_printed_nor_cached(s3_server, cache_dir):
    sample = "tiny-llama-run/checkpoint-6"
    outputs = [
        run_cli("inspect", s3(sample)),
        run_cli("inspect", s3(sample), "--json"),
        run_cli("check", s3(sample)),
        run_cli("diff", SAMPLES / sample, s3(sample), "--values"),
        run_cli("stats", s3(sample), "lm_head.weight"),
        run_cli("inspect", "s3://no-such-bucket-ckpt/x/"),
    ]
    for proc in outputs:
        assert SECRET not in proc.stdout and SECRET not in proc.stderr
        assert "Traceback" not in proc.stderr
    files = [p for p in cache_dir.rglob("*")]
    assert any(p.is_file() for p in files), "nothing was cached"
    for p in files:
        assert SECRET not in str(p)
        assert SECRET.split("/")[0] not in p.name
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("blocked, url", [
    ("s3fs", s3("tiny-llama-run/checkpoint-6")),
    ("gcsfs", "gs://some-bucket/run/checkpoint-1/"),
    ("fsspec", s3("tiny-llama-run/checkpoint-6")),
])
def test_without_the_backend_a_url_says_which_extra_to_install(s3_server, blocked, url):
    """The package made unimportable (sys.modules[name] = None) before main runs."""
    import subprocess
    import sys

    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from ckpt_browser.cli import main\n"
            f"raise SystemExit(main(['inspect', {url!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=SAMPLES.parent)
    line = assert_one_line_error(proc, "pip install 'ckpt-browser[remote]'")
    assert_names(line, url)
