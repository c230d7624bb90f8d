"""Producers: the libraries that write checkpoints, one module each, and PRODUCERS, the one
ordered registry. The first producer that claims a path's names says what it is
(`producers.recognise.detect`); a new producer is a module and a line here.

Decided from file and folder names only (FORMATS.md has each framework's names). The only
files opened are tiny text markers: DeepSpeed's `latest`, Megatron's
`latest_checkpointed_iteration.txt` and `metadata.json`. No pickle is touched here.
"""

from ckpt_browser.producers.accelerate import ACCELERATE
from ckpt_browser.producers.base import ENGINES, Producer
from ckpt_browser.producers.dcp import DCP
from ckpt_browser.producers.deepspeed import DEEPSPEED
from ckpt_browser.producers.hf_trainer import HF_TRAINER
from ckpt_browser.producers.lightning import LIGHTNING
from ckpt_browser.producers.megatron import MEGATRON
from ckpt_browser.producers.plain import SAFETENSORS, TORCH
from ckpt_browser.producers.speechbrain import SPEECHBRAIN
from ckpt_browser.producers.torchtitan import TORCHTITAN
from ckpt_browser.producers.torchtune import TORCHTUNE

# Order decides between two that claim one folder: a framework's own layout before the DCP or
# weights files it holds (torchtitan's step-N before any DCP folder; torchtune's epoch_N before
# the safetensors in it; plain weights last).
PRODUCERS: tuple[Producer, ...] = (
    LIGHTNING, MEGATRON, HF_TRAINER, ACCELERATE, DEEPSPEED, TORCHTITAN, DCP, TORCHTUNE,
    SPEECHBRAIN, SAFETENSORS, TORCH)
BY_ID: dict[str, Producer] = {p.id: p for p in PRODUCERS}
ENGINES.extend(p.engine for p in PRODUCERS if p.engine is not None)


def reads_by_names(framework: str) -> bool:
    """The producer reads its files by the names it gives them (else: by content)."""
    producer = BY_ID.get(framework)
    return producer is not None and producer.build is not None

def weights_only(framework: str) -> bool:
    """The producer writes weights and never training state."""
    producer = BY_ID.get(framework)
    return producer is not None and producer.weights_only


__all__ = ["BY_ID", "PRODUCERS", "Producer", "reads_by_names", "weights_only"]
