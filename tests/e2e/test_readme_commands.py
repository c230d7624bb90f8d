"""The READMEs' commands, run as a script runs them: no terminal (stdin from /dev/null, output to
pipes), in a fresh copy of the repository, each within a timeout. Each must return by itself,
with the exit code the README gives for it, and without a traceback.

A command that cannot run as written (it installs, needs the network, runs for minutes, or is
an example with placeholders) is either made runnable by a substitution below, or listed in
NOT_RUNNABLE with the reason. A command the READMEs gain that is in neither fails the test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.readme_shell import commands, program

ROOT = Path(__file__).resolve().parents[2]
READMES = ["README.md", "sample_checkpoints/README.md"]
TIMEOUT = 60  # seconds per command; the slowest (the golden tests) takes about 5
REVISION = "0123abcd" * 5  # the commit of the Hugging Face cache built for the hf:// examples

RUN3 = "sample_checkpoints/tiny-llama-run/checkpoint-3"
RUN6 = "sample_checkpoints/tiny-llama-run/checkpoint-6"
RELEASE = "sample_checkpoints/tiny-llama-release"

# Examples with placeholders, and what they run here: the placeholder filled with a sample.
SUBSTITUTE = {
    "ckpt-browser [PATH]": ["ckpt-browser", f"ckpt-browser {RUN6}"],
    "ckpt-browser browse [PATH]": [f"ckpt-browser browse {RUN6}"],
    "ckpt-browser inspect [PATH] [--json] [--files] [--checkpoint NAME]":
        ["ckpt-browser inspect sample_checkpoints/hf-run3 --json --files --checkpoint "
         "checkpoint-4"],
    "ckpt-browser check PATH [--json] [--world-size N]":
        [f"ckpt-browser check {RUN6} --json --world-size 1"],
    "ckpt-browser stats PATH [NAME_OR_GLOB ...] [--json]":
        [f"ckpt-browser stats {RELEASE} 'model.layers.0.*' --json"],
    "ckpt-browser diff A B [--values] [--json] [--rtol R] [--atol T] [--strip-prefix-a P] "
    "[--strip-prefix-b P] [--include GLOB] [--exclude GLOB] [--weights-only]":
        [f"ckpt-browser diff {RUN3} {RUN6} --values --json --rtol 1e-3 --atol 1e-6 "
         "--strip-prefix-a model. --strip-prefix-b model. --include '*.weight' "
         "--exclude 'lm_head*' --weights-only"],
    "ckpt-browser A B": [f"ckpt-browser {RUN3} {RUN6}"],
    "ckpt-browser quiz [--lang en|vi] [--from PATH] [--count N] [--seed S] [--no-save] "
    "[--export json]":
        [f"ckpt-browser quiz --lang vi --from {RUN6} --count 2 --seed 1 --no-save",
         "ckpt-browser quiz --export json"],
    "python -m ckpt_browser ...": [f"python -m ckpt_browser inspect {RELEASE}"],
    "ckpt-browser export SRC OUT [--dtype fp32|fp16|bf16] [--max-shard-size N] "
    "[--include GLOB] [--exclude GLOB] [--strip-prefix P] [--ema] [--checkpoint NAME] "
    "[--partial] [--no-config] [--json]":
        ["ckpt-browser export sample_checkpoints/hf-run3 out-usage --dtype bf16 "
         "--max-shard-size 40K --include 'layers.*' --exclude '*norm*' --strip-prefix model. "
         "--checkpoint checkpoint-4 --partial --no-config --json",
         "ckpt-browser export sample_checkpoints/lightning out-ema --ema"],
    "ckpt-browser export SRC OUT": [f"ckpt-browser export {RUN6} out-src"],
    "ckpt-browser ~/.cache/huggingface/hub/models--org--name/snapshots/<commit>/":
        [f"ckpt-browser ~/.cache/huggingface/hub/models--org--name/snapshots/{REVISION}/"],
    "CKPT_BROWSER_MAX_PICKLE_BYTES=200_000_000 ckpt-browser inspect PATH":
        [f"CKPT_BROWSER_MAX_PICKLE_BYTES=200_000_000 ckpt-browser inspect {RUN6}"],
}

# The exit code the README gives, where it is not 0.
EXIT_CODES = {
    "ckpt-browser inspect sample_checkpoints/tiny-llama-damaged": 5,  # damaged
    "ckpt-browser check sample_checkpoints/hf-multirank/checkpoint-4 --world-size 4": 3,  # INEXACT
    f"ckpt-browser diff {RUN3} {RUN6} --values": 1,  # diff: they differ
    SUBSTITUTE["ckpt-browser diff A B [--values] [--json] [--rtol R] [--atol T] "
               "[--strip-prefix-a P] [--strip-prefix-b P] [--include GLOB] [--exclude GLOB] "
               "[--weights-only]"][0]: 1,
    f"ckpt-browser {RUN3} {RUN6}": 1,  # no terminal: diff's report and codes
    "ckpt-browser export sample_checkpoints/lightning out-ema --ema": 2,  # no EMA in it
}

INSTALLS = "installs packages (network, minutes); the test runs in the environment it makes"
VENV = "makes or enters a virtualenv; the test runs each command with its own venv's programs"
REMOTE = "a real bucket, repo or server (tests/remote covers URLs against local servers)"
LOGIN = "logs in to a cloud account (a browser, the network)"
NAME = "a name in the text, not a command to run"
SAMPLES = ("rebuilds samples with libraries that are not project dependencies (transformers, "
           "lightning, deepspeed ...), in a venv of their own; minutes")
BENCH = "a benchmark: builds large files and times repeated runs (minutes)"

NOT_RUNNABLE = {
    "python3 -m venv .venv": VENV,
    ". .venv/bin/activate": VENV,
    "pip install torch==2.13.0 .": INSTALLS,
    "pip install '.[test]'": INSTALLS,
    "python -m pytest -n 3": "the whole suite (6-8 minutes on 2 cores), this test included",
    "ckpt-browser inspect s3://bucket/run/checkpoint-1500/": REMOTE,
    "ckpt-browser check gs://bucket/run/step-1000/": REMOTE,
    "ckpt-browser hf://org/model@main/": REMOTE,
    "ckpt-browser inspect hf://datasets/org/name/run/": REMOTE,
    "ckpt-browser diff ./checkpoint-1500 s3://bucket/run/checkpoint-1500/ --values": REMOTE,
    "ckpt-browser inspect https://example.com/run/checkpoint-1500/": REMOTE,
    ".ci/run": "CI itself: a new .venv, the installs, then the whole suite",
    "tmux": "names the program the terminal tests need; alone it opens a session on a terminal",
    "apt-get install tmux": "installs a system package (root, the network)",
    "pip install 'ckpt-browser[remote]'": INSTALLS,
    "gcloud auth application-default login": LOGIN,
    "hf auth login": LOGIN,
    "touch ckpt-browser-PWNED": "what the malicious sample's pickle would run if unpickled",
    "pip install .": INSTALLS,
    "python benchmarks/bench_browse.py": BENCH,
    "python benchmarks/bench_torch_listing.py": BENCH,
    "python benchmarks/bench_diff.py": BENCH,
    "python benchmarks/bench_export.py": BENCH,
    "python benchmarks/bench_stats_sparse.py": BENCH,
    "python benchmarks/bench_remote.py": BENCH,
    "python benchmarks/compare_scanners.py": "needs picklescan, modelscan and fickling "
                                             "installed in a venv of their own",
    "python benchmarks/bench_dcp_keys.py": BENCH,
    "python benchmarks/bench_pickle_keys.py --baseline DIR": BENCH + "; DIR is another checkout",
    "python tests/fuzz/run_fuzz.py --seconds 600": "fuzzes for 10 minutes, as it says",
    # sample_checkpoints/README.md: how the samples were made
    'pip install "torch==2.13.0" transformers accelerate': INSTALLS,
    "python sample_checkpoints/make_samples.py": SAMPLES,
    'pip install "torch==2.13.0" transformers accelerate lightning deepspeed grain': INSTALLS,
    "python sample_checkpoints/make_training_samples.py": SAMPLES,
    "python sample_checkpoints/make_training_samples.py torchtitan deepspeed megatron": SAMPLES,
    "python train.py --dataset=random_tokens --device=cpu --n_layer=2 --n_head=2 --n_embd=16 "
    "--block_size=16 --batch_size=4 --gradient_accumulation_steps=1 --dropout=0.0 --max_iters=4 "
    "--eval_interval=2 --eval_iters=2 --log_interval=1 --learning_rate=1e-3 --warmup_iters=1 "
    "--lr_decay_iters=4 --min_lr=1e-4": "nanoGPT's own train.py, in a nanoGPT checkout",
    "python3 -m venv /tmp/samples-venv": VENV,
    '/tmp/samples-venv/bin/pip install "torch==2.13.0"': INSTALLS,
    '/tmp/samples-venv/bin/pip install "torch==2.13.0" numpy safetensors pytorch-ignite mmengine '
    "fvcore peft transformers accelerate deepspeed huggingface_hub pyyaml": INSTALLS,
    "/tmp/samples-venv/bin/pip install --no-deps timm": INSTALLS,
    "/tmp/samples-venv/bin/python sample_checkpoints/make_project_samples.py": SAMPLES,
    "/tmp/samples-venv/bin/python sample_checkpoints/make_project_samples.py nanogpt timm "
    "mmengine": SAMPLES,
    "pip install -c <(echo torch==2.13.0) torch==2.13.0 torchtune==0.6.1 torchao==0.17.0":
        INSTALLS,
    "python sample_checkpoints/make_torchtune_samples.py": SAMPLES,
    "python sample_checkpoints/make_zero_samples.py": SAMPLES,
    'pip install "torch==2.13.0" "deepspeed==0.19.8"': INSTALLS,
    "python -m torch.distributed.run --nproc_per_node 2":
        "a fragment: the launcher a multi-rank sample was trained with",
    "python": NAME + " (a key of the saved RNG state)",
    "git rev-parse HEAD": NAME + " (what mmengine records in its checkpoints)",
    "git": NAME + " (a key mmengine saves)",
    "ckpt-browser export": NAME + " (the command `e` does the work of)",
}

# What a command cannot run as written: an install, a placeholder (PATH, A, <commit>,
# [--json], ...), a URL (but offline, hf:// reads the local cache).
NEEDS_LISTING = re.compile(r"\bpip3? install\b|\bapt-get\b|-m venv\b|\bsudo\b|<[^>]*>|\.\.\.|"
                           r"\[|(?<![\w=./-])[A-Z]+\b")
URL = re.compile(r"\b[a-z0-9]+://")


def cannot_run(command: str) -> bool:
    offline = command.startswith("HF_HUB_OFFLINE=1 ")
    return bool(NEEDS_LISTING.search(command) or URL.search(command) and not offline)


def readme_commands() -> list[str]:
    return [c for name in READMES
            for c in commands((ROOT / name).read_text(encoding="utf-8"))]


def runs() -> list[str]:
    """The commands run: each README command as written, or its substitutions."""
    found = [SUBSTITUTE.get(c, [c]) for c in readme_commands() if c not in NOT_RUNNABLE]
    return list(dict.fromkeys(c for group in found for c in group))


def test_every_command_is_run_or_listed():
    found = readme_commands()
    unlisted = [c for c in found
                if cannot_run(c) and c not in SUBSTITUTE and c not in NOT_RUNNABLE]
    assert not unlisted, ("README commands that cannot run as written: substitute them or "
                          f"list them in NOT_RUNNABLE with the reason: {unlisted}")
    stale = [c for c in [*SUBSTITUTE, *NOT_RUNNABLE, *EXIT_CODES]
             if c not in found and c not in runs()]
    assert not stale, f"listed here but no longer in a README: {stale}"


def test_the_scripts_of_unrunnable_commands_exist():
    """A command not run still names files of this repository that must be there."""
    for command in NOT_RUNNABLE:
        for word in command.split():
            if re.match(r"(benchmarks|tests|sample_checkpoints|ckpt_browser|\.ci)/", word):
                assert (ROOT / word).exists(), f"{command!r}: {word} is not in the repository"


def tracked_copy(dest: Path) -> Path:
    """The repository's tracked files as the working tree has them, so nothing untracked,
    built or cached here can help a command. Not a `git clone`: that is of HEAD, and would
    run an uncommitted README's commands against the committed files."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src, dst = ROOT / name, dest / name
        if src.is_symlink() or src.exists():  # a file deleted in the working tree is gone
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)
    return dest


def hub_cache(hub: Path, repo_id: str, folder: Path, sub: str = "") -> None:
    """`folder` as the cached model repo `repo_id` at REVISION: refs/main and the snapshot,
    as huggingface_hub lays out its cache (plain files here, not links into blobs/)."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REVISION)
    shutil.copytree(folder, repo / "snapshots" / REVISION / sub)


def environment(home: Path, clone: Path) -> dict[str, str]:
    """A fresh user's environment: per-user state under `home`, this venv's programs first,
    and the copy's package imported, not this checkout's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "HF_", "CKPT_BROWSER_", "PYTEST_", "TRANSFORMERS_"))}
    env.update(HOME=str(home), PYTHONPATH=str(clone), TMPDIR=str(home),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def run(command: str, cwd: Path, env: dict[str, str]) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr); the code is None when it did not return in time."""
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its whole group: `a; sleep 999` too
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """(the copy, the environment) every command runs in. Each test runs its own command,
    so pytest-xdist spreads them over its workers and none runs twice."""
    base = tmp_path_factory.mktemp("readme")
    clone, home = tracked_copy(base / "clone"), base / "home"
    hub = home / ".cache" / "huggingface" / "hub"
    hub_cache(hub, "org/model", ROOT / RUN6, sub="checkpoint-6")
    hub_cache(hub, "org/name", ROOT / RUN6)
    env = environment(home, clone)
    where = run("python -c 'import ckpt_browser; print(ckpt_browser.__file__)'", clone, env)
    assert where[1].startswith(str(clone)), where
    return clone, env


def opens_the_browser(command: str) -> bool:
    words = command.split()
    if program(command) != "ckpt-browser" or "--help" in words:
        return False
    rest = words[[w.endswith("ckpt-browser") for w in words].index(True) + 1:]
    return not rest or rest[0] not in {"inspect", "check", "stats", "diff", "quiz", "export"}


@pytest.mark.parametrize("command", runs())
def test_readme_command_returns(sandbox, command):
    code, out, err = run(command, *sandbox)
    assert code is not None, f"did not return within {TIMEOUT} s; stderr: {err[-2000:]}"
    assert "Traceback (most recent call last)" not in out + err, err[-4000:]
    assert code == EXIT_CODES.get(command, 0), f"exit {code}; stderr: {err[-2000:]}"
    if opens_the_browser(command):  # no terminal: the report instead of the screen
        assert "not a terminal" in err and out, (out[-1000:], err[-1000:])
