"""Write the torchtune samples with torchtune's own save code (sample_checkpoints/README.md).

Run in a venv with torchtune (not a project dependency; torchao must still ship
`torchao.dtypes.nf4tensor`, which torchtune 0.6.1 imports):

    pip install -c <(echo torch==2.13.0) torch==2.13.0 torchtune==0.6.1 torchao==0.17.0
    python sample_checkpoints/make_torchtune_samples.py

Two runs of a tiny Llama 3 (torchtune.models.llama3.llama3: vocab 64, dim 16, 2 layers, 2 heads,
1 KV head, 6,736 parameters), each trained on 8 random-token sequences of length 8, batch 2
(4 steps an epoch), AdamW and torchtune's cosine schedule with 2 warmup steps:

* torchtune-full/: recipes/full_finetune_single_device.py, 2 of 3 epochs done (an interrupted
  run): epoch_0/, epoch_1/ (HF safetensors, FullModelHFCheckpointer) and
  recipe_state/recipe_state.pt, written after epoch 1 (epochs_run 2).
* torchtune-lora/: recipes/lora_finetune_single_device.py, LoRA (rank 2, alpha 4, 224 adapter
  parameters) on q_proj and v_proj, both of
  2 epochs done (a finished run): epoch_0/, epoch_1/ with the merged model,
  adapter_model.{pt,safetensors} and adapter_config.json; recipe_state/recipe_state.pt is the
  one written after epoch 0 (the final save writes none).

The training loop is the recipes' own loop, cut to what touches the saved state (set_epoch, the
optimizer and scheduler steps, epochs_run). Each save is the recipe's own `save_checkpoint`
method, called on a namespace holding the attributes it reads, so the checkpoint dict and the
files are exactly what the recipe and the checkpointer write.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from types import SimpleNamespace

import importlib.util

import torch
from safetensors.torch import save_file
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
from torchtune.models import convert_weights
from torchtune.models.llama3 import llama3, lora_llama3
from torchtune.modules.peft import get_adapter_params, set_trainable_params
from torchtune.training import FullModelHFCheckpointer, set_seed
from torchtune.training.lr_schedulers import get_cosine_schedule_with_warmup



def recipe(module: str, cls: str):
    """A recipe class, from the recipe file torchtune installs (`tune run` runs these files;
    their folder is not an importable package)."""
    folder = importlib.util.find_spec("recipes").submodule_search_locations[0]
    spec = importlib.util.spec_from_file_location(module, os.path.join(folder, module + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, cls)


FullFinetuneRecipeSingleDevice = recipe("full_finetune_single_device",
                                        "FullFinetuneRecipeSingleDevice")
LoRAFinetuneRecipeSingleDevice = recipe("lora_finetune_single_device",
                                        "LoRAFinetuneRecipeSingleDevice")
HERE = os.path.dirname(os.path.abspath(__file__))
DIMS = dict(vocab_size=64, num_layers=2, num_heads=2, num_kv_heads=1, embed_dim=16,
            max_seq_len=16, intermediate_dim=32)
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
             "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
             "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
             "max_position_embeddings": 16, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
             "tie_word_embeddings": False, "torch_dtype": "float32"}
SEED = 42
BATCH, SEQ, EXAMPLES = 2, 8, 8


class Tokens(torch.utils.data.Dataset):
    """Random token sequences, as a tokenized SFT dataset yields them."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, DIMS["vocab_size"], (EXAMPLES, SEQ), generator=g)

    def __len__(self) -> int:
        return EXAMPLES

    def __getitem__(self, i: int) -> dict:
        return {"tokens": self.data[i], "labels": self.data[i]}


def base_checkpoint(folder: str) -> None:
    """The "downloaded" HF model the run starts from: config.json and one safetensors file."""
    torch.manual_seed(0)
    model = llama3(**DIMS)
    sd = convert_weights.tune_to_hf(model.state_dict(), num_heads=2, num_kv_heads=1, dim=16)
    save_file({k: v.contiguous() for k, v in sd.items()},
              os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(HF_CONFIG, f, indent=2)


def data_loader() -> StatefulDataLoader:
    """As the recipes' _setup_data builds it (shuffle on, drop_last)."""
    ds = Tokens()
    sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0)
    return StatefulDataLoader(dataset=ds, batch_size=BATCH, sampler=sampler, drop_last=True)


def train(recipe_cls, state: SimpleNamespace, stop_after: int) -> None:
    """The recipes' train() loop, cut to what the saved state sees; saves after each epoch."""
    loss_fn = torch.nn.CrossEntropyLoss()
    sched = get_cosine_schedule_with_warmup(
        state._optimizer, num_warmup_steps=2,
        num_training_steps=state.total_epochs * len(state._dataloader), last_epoch=-1)
    for curr_epoch in range(state.epochs_run, state.total_epochs):
        state._dataloader.sampler.set_epoch(curr_epoch)
        for batch in state._dataloader:
            logits = state._model(batch["tokens"])
            loss = loss_fn(logits[:, :-1].reshape(-1, DIMS["vocab_size"]),
                           batch["labels"][:, 1:].reshape(-1))
            loss.backward()
            state._optimizer.step()
            state._optimizer.zero_grad(set_to_none=True)
            sched.step()
        state.epochs_run += 1
        recipe_cls.save_checkpoint(state, epoch=curr_epoch)
        if state.epochs_run == stop_after:
            return


def checkpointer(base: str, out: str) -> FullModelHFCheckpointer:
    """Its load_checkpoint (called next) also fills the weight map the shards are split by."""
    return FullModelHFCheckpointer(checkpoint_dir=base, checkpoint_files=["model.safetensors"],
                                   model_type="LLAMA3", output_dir=out)


def full_run(base: str) -> None:
    out = os.path.join(HERE, "torchtune-full")
    shutil.rmtree(out, ignore_errors=True)
    ckptr = checkpointer(base, out)
    torch.manual_seed(SEED)
    model = llama3(**DIMS)
    model.load_state_dict(ckptr.load_checkpoint()["model"])  # converted to torchtune's names
    state = SimpleNamespace(
        _model=model, _optimizer=torch.optim.AdamW(model.parameters(), lr=2e-3,
                                                   weight_decay=0.01, fused=False),
        _optimizer_in_bwd=False, _dataloader=data_loader(), _checkpointer=ckptr,
        seed=set_seed(SEED), epochs_run=0, total_epochs=3, max_steps_per_epoch=None)
    train(FullFinetuneRecipeSingleDevice, state, stop_after=2)  # interrupted after epoch 1


def lora_run(base: str) -> None:
    out = os.path.join(HERE, "torchtune-lora")
    shutil.rmtree(out, ignore_errors=True)
    ckptr = checkpointer(base, out)
    torch.manual_seed(SEED)
    attn = ["q_proj", "v_proj"]
    model = lora_llama3(attn, apply_lora_to_mlp=False, apply_lora_to_output=False,
                        lora_rank=2, lora_alpha=4.0, **DIMS)
    model.load_state_dict(ckptr.load_checkpoint()["model"], strict=False)  # no LoRA weights yet
    set_trainable_params(model, get_adapter_params(model))
    trainable = [p for p in model.parameters() if p.requires_grad]
    state = SimpleNamespace(
        _model=model, _optimizer=torch.optim.AdamW(trainable, lr=3e-3, weight_decay=0.01,
                                                   fused=False),
        _dataloader=data_loader(), _checkpointer=ckptr, seed=set_seed(SEED), epochs_run=0,
        total_epochs=2, max_steps_per_epoch=None, _lora_rank=2, _lora_alpha=4.0,
        _lora_attn_modules=attn, _apply_lora_to_mlp=False, _apply_lora_to_output=False,
        _save_adapter_weights_only=False)
    train(LoRAFinetuneRecipeSingleDevice, state, stop_after=2)  # runs to the end


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as base:
        base_checkpoint(base)
        full_run(base)
        lora_run(base)


if __name__ == "__main__":
    main()
