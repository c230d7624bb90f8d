"""hf:// fixtures: the fake Hub of fake_hub.py on loopback, reached by huggingface_hub through
`HF_ENDPOINT`, with its own HF_HOME (no token file, no cache of the machine's) and `HF_TOKEN`.

Repos (once per session, per worker):
- `org/samples`: every file of sample_checkpoints/ (the store the shared suite runs on);
- `org/served`: `served_root` (big/, wide/, bigpt/ ...: the byte-budget cases);
- `org/private`: private, tiny-llama-release; the test token is granted;
- `org/gated`: gated (manual approval), tiny-llama-release; the test token is not granted;
- `org/run`: checkpoint-3/ and checkpoint-6/ pushed one commit each (a minute apart);
- `org/revs`: `checkpoint/` holds tiny-llama-run/checkpoint-3 in the first commit (tag `v1`)
  and checkpoint-6 in the second (`main`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from .fake_hub import FakeHub, blobs_of, last_change

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"

TOKEN = "hf_ckptTestTokenDoNotPrint9f3b1c7e5a2d"  # distinctive: a leak shows in a substring search
UNKNOWN_TOKEN = "hf_ckptUnknownTokenRefused0000000000"
SAMPLES_REPO = "org/samples"


def _under(prefix: str, folder: Path) -> dict:
    return {f"{prefix}/{rel}": b for rel, b in blobs_of(folder).items()}


@pytest.fixture(scope="session")
def _hub(served_root):
    hub = FakeHub().start()
    hub.tokens.add(TOKEN)
    hub.add_repo(SAMPLES_REPO, SAMPLES)
    hub.add_repo("org/served", served_root)
    hub.add_repo("org/private", SAMPLES / "tiny-llama-release", private=True, granted={TOKEN})
    hub.add_repo("org/gated", SAMPLES / "tiny-llama-release", gated=True)
    hub.add_repo("org/revs")
    run = SAMPLES / "tiny-llama-run"
    v1 = hub.commit("org/revs", _under("checkpoint", run / "checkpoint-3"), "step 3",
                    replace=True)
    hub.tag("org/revs", "v1", v1)
    hub.commit("org/revs", _under("checkpoint", run / "checkpoint-6"), "step 6", replace=True)
    hub.v1 = v1  # type: ignore[attr-defined]
    hub.add_repo("org/run")  # a run pushed checkpoint by checkpoint, as the Trainer's
    for step in (3, 6):     # hub_strategy="all_checkpoints" does
        hub.commit("org/run", _under(f"checkpoint-{step}", run / f"checkpoint-{step}"),
                   f"Training in progress, step {step}")

    yield hub
    hub.stop()


class HfStore:
    """The shared suite's store interface over the fake Hub (repo `org/samples`)."""

    scheme = "hf"
    secret = TOKEN
    backend_module = "huggingface_hub"

    def __init__(self, hub: FakeHub, monkeypatch):
        self.hub, self._mp = hub, monkeypatch

    def url(self, rel: str, folder: bool = True) -> str:
        tail = "/" if folder and not rel.endswith((".ckpt", ".pt")) else ""
        return f"hf://{SAMPLES_REPO}/{rel}{tail}"

    def object_reads(self) -> list[str]:
        return self.hub.file_reads(SAMPLES_REPO)

    def reset_requests(self) -> None:
        self.hub.reset()

    def put(self, rel: str, data: bytes) -> None:
        self.hub.commit(SAMPLES_REPO, {rel: data}, f"update {rel}")

    @contextlib.contextmanager
    def denied(self):
        """A token the Hub does not know: every request is answered 401."""
        with self._mp.context() as mp:
            mp.setenv("HF_TOKEN", UNKNOWN_TOKEN)
            yield UNKNOWN_TOKEN

    def missing_container_url(self) -> str:
        return "hf://org/no-such-repo/run/checkpoint-1/"

    def newest_time(self, rel: str) -> float:
        """The date of the last commit that changed anything under `rel`."""
        repo = self.hub.repos[("model", SAMPLES_REPO)]
        return last_change(repo, repo.commits[repo.refs["main"]], rel.rstrip("/")).date


@pytest.fixture
def hf_store(_hub, monkeypatch, tmp_path) -> HfStore:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH",
                "HUGGING_FACE_HUB_TOKEN", "HF_HUB_ENABLE_HF_TRANSFER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", _hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    _hub.reset()
    return HfStore(_hub, monkeypatch)
