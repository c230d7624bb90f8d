#!/usr/bin/env python
"""Regenerate the small, real sample checkpoints in ``sample_checkpoints/``.

Usage (from any working directory)::

    pip install "torch==2.13.0" transformers accelerate   # pin torch on the same line
    python sample_checkpoints/make_samples.py

``transformers`` and ``accelerate`` are NOT dependencies of ckpt-browser. They are only
needed to regenerate these samples, because the samples must be byte-for-byte what the
real Hugging Face ``Trainer`` / ``save_pretrained`` write, never a hand-made imitation.
The committed samples were produced with transformers 5.24.0, accelerate 1.15.0,
huggingface_hub 2.4.0, torch 2.13.0+cpu, safetensors 0.8.0, numpy 2.4.6 on Python 3.11.

What it writes (every output folder is deleted first, then rebuilt):

``tiny-llama-run/checkpoint-3/``, ``tiny-llama-run/checkpoint-6/``
    Real ``transformers.Trainer`` checkpoints of a tiny ``LlamaForCausalLM`` (vocab 128,
    hidden 32, 2 layers, 4 heads / 2 KV heads, untied, float32) trained for 6 steps on
    random tokens with AdamW (``optim="adamw_torch"``) and the linear warmup schedule,
    saving every 3 steps: ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth``,
    ``trainer_state.json``, ``training_args.bin``, ``config.json``,
    ``generation_config.json``. The Trainer's single ``model.safetensors`` is then
    replaced by a sharded copy of the same weights, written by
    ``model.save_pretrained(..., max_shard_size="40KB")`` after loading that checkpoint
    with ``from_pretrained``: ``model-0000i-of-0000K.safetensors`` +
    ``model.safetensors.index.json``. The Trainer's own ``config.json`` and
    ``generation_config.json`` are kept.
``tiny-llama-release/``
    Weights-only release of the step-6 model: exactly the ``save_pretrained`` output
    (sharded safetensors + index + ``config.json`` + ``generation_config.json``).
``tiny-llama-damaged/``
    A copy of the release where shard 1 is truncated by 100 bytes and shard 2 (still
    named in the index) is deleted.

Determinism: python ``random``, numpy and torch are seeded, the Trainer gets
``seed``/``data_seed``, torch runs single-threaded, the Trainer's ``output_dir`` is the
relative path ``tiny-llama-run`` (the script ``chdir``s into ``sample_checkpoints/``),
and nothing written has a timestamp or absolute path in it (the script checks). Running
it twice on the same machine gave byte-identical files, including the torch zip files
(``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth``, ``training_args.bin``): their
``.data/serialization_id`` record is a hash of the record names and CRC32s, not a random
id, and zip entry times are fixed at 1980-01-01. Float results on a different CPU
(other SIMD kernels) or with other library versions may differ in the last bits, and a
different transformers version writes a different ``transformers_version`` in the JSON.

Check made by hand when the samples were built: ``Trainer.train(resume_from_checkpoint=
"tiny-llama-run/checkpoint-3")`` (sharded weights) reproduces checkpoint-6's weights
and ``trainer_state.json`` bit for bit, so the run checkpoints really are exact-resume.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

RUN_DIR = "tiny-llama-run"
RELEASE_DIR = "tiny-llama-release"
DAMAGED_DIR = "tiny-llama-damaged"

SEED = 1234
MAX_SHARD_SIZE = "40KB"  # huggingface_hub parses KB as 10**3 bytes -> 3 shards here
TRUNCATE_BYTES = 100
N_EXAMPLES = 16
SEQ_LEN = 16
BATCH_SIZE = 4  # 4 updates per epoch, so max_steps=6 ends at epoch 1.5


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _tiny_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        dtype="float32",
    )


class _RandomTokens:
    """Tiny map-style dataset of random token ids (a plain list is enough for Trainer)."""

    def __init__(self, n: int, seq_len: int, vocab: int, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, vocab, (n, seq_len), generator=g)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, i: int) -> dict:
        import torch

        x = self.ids[i]
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x.clone()}


def _save_pretrained_sharded(model, out_dir: Path) -> None:
    kwargs = {"max_shard_size": MAX_SHARD_SIZE}
    # transformers v4 takes safe_serialization=...; v5 always writes safetensors and
    # would silently route the keyword into its push-to-hub kwargs.
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True
    model.save_pretrained(str(out_dir), **kwargs)


def _reshard_checkpoint(ckdir: Path) -> None:
    """Replace the Trainer's model.safetensors by save_pretrained's sharded layout."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    single = ckdir / "model.safetensors"
    original = load_file(str(single))
    model = LlamaForCausalLM.from_pretrained(str(ckdir), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _save_pretrained_sharded(model, tmp)
        produced = sorted(p.name for p in tmp.iterdir())
        shards = [n for n in produced if n.startswith("model-") and n.endswith(".safetensors")]
        if len(shards) < 2 or "model.safetensors.index.json" not in produced:
            sys.exit(f"expected a sharded save in {ckdir}, got {produced}")
        for name in ("config.json", "generation_config.json"):
            if (tmp / name).read_bytes() != (ckdir / name).read_bytes():
                print(f"note: save_pretrained's {name} differs from the Trainer's; keeping the Trainer's")
        resharded = {}
        for n in shards:
            resharded.update(load_file(str(tmp / n)))
        if resharded.keys() != original.keys() or not all(
            torch.equal(resharded[k], original[k]) for k in original
        ):
            sys.exit(f"resharded weights differ from {single}")
        for n in shards + ["model.safetensors.index.json"]:
            shutil.move(str(tmp / n), str(ckdir / n))
    single.unlink()


def _train() -> None:
    import torch
    from transformers import LlamaForCausalLM, Trainer, TrainingArguments, default_data_collator

    _seed_everything(SEED)
    model = LlamaForCausalLM(_tiny_config())
    model.to(torch.float32)
    data = _RandomTokens(N_EXAMPLES, SEQ_LEN, model.config.vocab_size, SEED)

    arg_kwargs = dict(
        output_dir=RUN_DIR,  # relative on purpose: no absolute path in the outputs
        max_steps=6,
        save_strategy="steps",
        save_steps=3,
        logging_strategy="steps",
        logging_steps=1,
        per_device_train_batch_size=BATCH_SIZE,
        learning_rate=1e-3,
        weight_decay=0.01,
        optim="adamw_torch",
        lr_scheduler_type="linear",
        warmup_steps=2,
        seed=SEED,
        data_seed=SEED,
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    params = inspect.signature(TrainingArguments.__init__).parameters
    if "save_safetensors" in params:  # removed in transformers v5 (always safetensors)
        arg_kwargs["save_safetensors"] = True
    args = TrainingArguments(**arg_kwargs)
    trainer = Trainer(
        model=model, args=args, train_dataset=data, data_collator=default_data_collator
    )
    trainer.train()


def _make_damaged(release: Path, damaged: Path) -> None:
    shutil.copytree(release, damaged)
    index = json.loads((damaged / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    truncated, deleted = damaged / shards[0], damaged / shards[1]
    data = truncated.read_bytes()
    truncated.write_bytes(data[:-TRUNCATE_BYTES])
    deleted.unlink()
    print(f"damaged: truncated {truncated.name} by {TRUNCATE_BYTES} bytes, deleted {deleted.name}")


def _check_no_abs_paths(root: Path) -> None:
    needles = [str(HERE).encode(), str(Path.home()).encode(), b"/tmp/"]
    for p in sorted(root.rglob("*")):
        if p.is_file():
            blob = p.read_bytes()
            for n in needles:
                if n in blob:
                    sys.exit(f"{p} contains the path {n!r}")


def main() -> None:
    os.chdir(HERE)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import LlamaForCausalLM

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    for d in (RUN_DIR, RELEASE_DIR, DAMAGED_DIR):
        shutil.rmtree(HERE / d, ignore_errors=True)

    _train()

    run = HERE / RUN_DIR
    found = sorted(p.name for p in run.iterdir())
    if found != ["checkpoint-3", "checkpoint-6"]:
        sys.exit(f"unexpected Trainer output in {run}: {found}")
    for ck in found:
        state = json.loads((run / ck / "trainer_state.json").read_text())
        if state.get("best_model_checkpoint") not in (None, ""):
            # Normally null; never leave an absolute path behind.
            state["best_model_checkpoint"] = os.path.relpath(state["best_model_checkpoint"], HERE)
            (run / ck / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        _reshard_checkpoint(run / ck)

    model = LlamaForCausalLM.from_pretrained(str(run / "checkpoint-6"), dtype=torch.float32)
    _save_pretrained_sharded(model, HERE / RELEASE_DIR)

    _make_damaged(HERE / RELEASE_DIR, HERE / DAMAGED_DIR)

    for d in (RUN_DIR, RELEASE_DIR, DAMAGED_DIR):
        _check_no_abs_paths(HERE / d)
    print("done:", ", ".join((RUN_DIR, RELEASE_DIR, DAMAGED_DIR)))


if __name__ == "__main__":
    main()
