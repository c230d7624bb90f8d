"""Write `projects/diffusers/unconditional/checkpoint-{4,6}/` the way diffusers' training scripts do.

diffusers and accelerate are not project dependencies: run this in a venv of its own, with torch
pinned (only PyPI is needed, nothing is downloaded at run time):
    python3 -m venv /tmp/diffvenv
    /tmp/diffvenv/bin/pip install torch==2.13.0
    echo torch==2.13.0 > /tmp/diffc.txt
    /tmp/diffvenv/bin/pip install -c /tmp/diffc.txt torch==2.13.0 diffusers accelerate safetensors
    /tmp/diffvenv/bin/python sample_checkpoints/make_diffusers_samples.py
Written with diffusers 0.42.1, accelerate 1.16.0, torch 2.13.0+cpu, safetensors 0.8.0, numpy 2.4.6,
Python 3.11, on CPU.

What it follows: diffusers' examples/unconditional_image_generation/train_unconditional.py,
main():
- the `save_model_hook` / `load_model_hook` pair registered with
  `accelerator.register_save_state_pre_hook` / `register_load_state_pre_hook` (the block under
  `if version.parse(accelerate.__version__) >= version.parse("0.16.0"):`). Their bodies below are
  copied from the script unchanged; only the enclosing function (`register_hooks`) is ours, so
  that the resume check can register the same hooks on fresh objects. The save hook writes
  `unet_ema/` with `EMAModel.save_pretrained` and `unet/` with `UNet2DModel.save_pretrained`, and
  pops the weights so accelerate writes no model file of its own;
- "Initialize the model" (`UNet2DModel(...)`, here tiny), "Create EMA for the model"
  (`EMAModel(model.parameters(), decay=args.ema_max_decay, use_ema_warmup=True,
  inv_gamma=args.ema_inv_gamma, power=args.ema_power, model_cls=UNet2DModel,
  model_config=model.config)` with the script's defaults 0.9999, 1.0, 3/4),
  "Initialize the scheduler" (`DDPMScheduler(num_train_timesteps=1000, beta_schedule="linear",
  prediction_type="epsilon")`), "Initialize the optimizer" (AdamW, betas (0.95, 0.999),
  weight_decay 1e-6, eps 1e-8, the script's defaults), `get_scheduler("cosine", ...)` (the script's
  default lr_scheduler), then `accelerator.prepare(model, optimizer, train_dataloader,
  lr_scheduler)` and `ema_model.to(accelerator.device)`;
- the training step: add noise at random timesteps, `F.mse_loss(model_output.float(),
  noise.float())`, `accelerator.backward`, `clip_grad_norm_(..., 1.0)`, optimizer/LR scheduler
  step, `zero_grad`; on `sync_gradients`, `ema_model.step(model.parameters())` and
  `global_step += 1`; every `checkpointing_steps` (here: at steps 4 and 6, the last step),
  `accelerator.save_state(os.path.join(args.output_dir, f"checkpoint-{global_step}"))` on the
  main process.
examples/text_to_image/train_text_to_image.py saves the same way (unet/ and unet_ema/ through the
same pair of hooks, for a UNet2DConditionModel).

Differences from the script, none of which changes what save_state writes: `Accelerator()` with
no log_with/project_config (they set the tracker and logging dir only); random images instead of
a dataset (12 images of 3x8x8 in [-1, 1], batch 2, so 6 steps in one epoch); a tiny UNet;
lr_warmup_steps 2 instead of 500; checkpoints at steps 4 and 6.

Then it proves the folder resumes as the script's --resume_from_checkpoint does: fresh model,
EMA, optimizer, scheduler, dataloader and Accelerator, the same hooks, `prepare`,
`accelerator.load_state(checkpoint-4)`; the UNet, EMA shadow weights, optimizer state and LR
scheduler must equal what was saved at step 4.

Files per checkpoint: unet/{config.json, diffusion_pytorch_model.safetensors},
unet_ema/{config.json, diffusion_pytorch_model.safetensors} (the EMA's decay, inv_gamma,
power, optimization_step... are in that config.json), optimizer.bin, scheduler.bin and
random_states_0.pkl (python, numpy and torch RNG states, and accelerate's micro-step counter
`step`): all three are torch.save zips despite the .pkl. No model.safetensors: the save hook pops
the weights. Two runs give byte-identical files; no file holds a path.
"""

import os
import shutil
from pathlib import Path

import accelerate
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from packaging import version

from diffusers import DDPMScheduler, UNet2DModel
from diffusers.optimization import get_scheduler
from diffusers.training_utils import EMAModel

OUT = Path(__file__).resolve().parent / "projects" / "diffusers" / "unconditional"


class Args:  # the script's argparse values that matter here
    output_dir = str(OUT)
    use_ema = True
    ema_max_decay = 0.9999
    ema_inv_gamma = 1.0
    ema_power = 3 / 4
    learning_rate = 1e-4
    adam_beta1 = 0.95
    adam_beta2 = 0.999
    adam_weight_decay = 1e-6
    adam_epsilon = 1e-08
    lr_scheduler = "cosine"
    lr_warmup_steps = 2
    gradient_accumulation_steps = 1
    num_epochs = 1
    train_batch_size = 2
    ddpm_num_steps = 1000
    ddpm_beta_schedule = "linear"
    prediction_type = "epsilon"
    checkpoint_at = (4, 6)


UNET_CONFIG = dict(
    sample_size=8,
    in_channels=3,
    out_channels=3,
    layers_per_block=1,
    block_out_channels=(4, 8),
    down_block_types=("DownBlock2D", "AttnDownBlock2D"),
    up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    norm_num_groups=2,
    attention_head_dim=8,
)


def register_hooks(accelerator, ema_model, args):
    # Copied from train_unconditional.py (main(), the "0.16.0" block), bodies unchanged.
    # `accelerate` 0.16.0 will have better support for customized saving
    if version.parse(accelerate.__version__) >= version.parse("0.16.0"):
        # create custom saving & loading hooks so that `accelerator.save_state(...)` serializes in a nice format
        def save_model_hook(models, weights, output_dir):
            if accelerator.is_main_process:
                if args.use_ema:
                    ema_model.save_pretrained(os.path.join(output_dir, "unet_ema"))

                for i, model in enumerate(models):
                    model.save_pretrained(os.path.join(output_dir, "unet"))

                    # make sure to pop weight so that corresponding model is not saved again
                    weights.pop()

        def load_model_hook(models, input_dir):
            if args.use_ema:
                load_model = EMAModel.from_pretrained(os.path.join(input_dir, "unet_ema"), UNet2DModel)
                ema_model.load_state_dict(load_model.state_dict())
                ema_model.to(accelerator.device)
                del load_model

            for i in range(len(models)):
                # pop models so that they are not loaded again
                model = models.pop()

                # load diffusers style into model
                load_model = UNet2DModel.from_pretrained(input_dir, subfolder="unet")
                model.register_to_config(**load_model.config)

                model.load_state_dict(load_model.state_dict())
                del load_model

        accelerator.register_save_state_pre_hook(save_model_hook)
        accelerator.register_load_state_pre_hook(load_model_hook)


def build(args):
    """The script's objects, in its order; returns them prepared."""
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    model = UNet2DModel(**UNET_CONFIG)
    ema_model = EMAModel(
        model.parameters(),
        decay=args.ema_max_decay,
        use_ema_warmup=True,
        inv_gamma=args.ema_inv_gamma,
        power=args.ema_power,
        model_cls=UNet2DModel,
        model_config=model.config,
    )
    register_hooks(accelerator, ema_model, args)
    noise_scheduler = DDPMScheduler(
        num_train_timesteps=args.ddpm_num_steps,
        beta_schedule=args.ddpm_beta_schedule,
        prediction_type=args.prediction_type,
    )
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        weight_decay=args.adam_weight_decay,
        eps=args.adam_epsilon,
    )
    g = torch.Generator().manual_seed(1)
    images = torch.rand(12, 3, 8, 8, generator=g) * 2 - 1
    dataset = [{"input": im} for im in images]
    train_dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.train_batch_size, shuffle=True)
    lr_scheduler = get_scheduler(
        args.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=args.lr_warmup_steps * args.gradient_accumulation_steps,
        num_training_steps=(len(train_dataloader) * args.num_epochs),
    )
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler
    )
    ema_model.to(accelerator.device)
    return accelerator, model, ema_model, noise_scheduler, optimizer, train_dataloader, lr_scheduler


def snapshot(model, ema_model, optimizer, lr_scheduler):
    return {
        "unet": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "ema": [p.detach().clone() for p in ema_model.shadow_params],
        "ema_step": ema_model.optimization_step,
        "opt": {k: {n: (t.clone() if torch.is_tensor(t) else t) for n, t in s.items()}
                for k, s in optimizer.state_dict()["state"].items()},
        "lr_last_epoch": lr_scheduler.scheduler.last_epoch if hasattr(lr_scheduler, "scheduler")
        else lr_scheduler.last_epoch,
    }


def train(args):
    set_seed(0)
    accelerator, model, ema_model, noise_scheduler, optimizer, train_dataloader, lr_scheduler = build(args)
    saved = {}
    global_step = 0
    for epoch in range(args.num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            clean_images = batch["input"]
            noise = torch.randn(clean_images.shape, dtype=clean_images.dtype, device=clean_images.device)
            bsz = clean_images.shape[0]
            timesteps = torch.randint(
                0, noise_scheduler.config.num_train_timesteps, (bsz,), device=clean_images.device
            ).long()
            noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)
            with accelerator.accumulate(model):
                model_output = model(noisy_images, timesteps).sample
                loss = F.mse_loss(model_output.float(), noise.float())
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                if args.use_ema:
                    ema_model.step(model.parameters())
                global_step += 1
                print(f"step {global_step} loss {loss.item():.4f} lr {lr_scheduler.get_last_lr()[0]:.3e}")
                if accelerator.is_main_process and global_step in args.checkpoint_at:
                    save_path = os.path.join(args.output_dir, f"checkpoint-{global_step}")
                    accelerator.save_state(save_path)
                    saved[global_step] = snapshot(model, ema_model, optimizer, lr_scheduler)
                    print(f"Saved state to checkpoint-{global_step}")
    accelerator.end_training()
    return saved


def check_resume(args, expected):
    set_seed(123)  # different from training: everything must come from the checkpoint
    accelerator, model, ema_model, _, optimizer, _, lr_scheduler = build(args)
    accelerator.load_state(os.path.join(args.output_dir, "checkpoint-4"))
    got = snapshot(model, ema_model, optimizer, lr_scheduler)
    assert got["unet"].keys() == expected["unet"].keys()
    for k in expected["unet"]:
        assert torch.equal(got["unet"][k], expected["unet"][k]), k
    assert len(got["ema"]) == len(expected["ema"])
    for a, b in zip(got["ema"], expected["ema"]):
        assert torch.equal(a, b)
    assert got["ema_step"] == expected["ema_step"] == 4, (got["ema_step"], expected["ema_step"])
    assert got["opt"].keys() == expected["opt"].keys()
    for k in expected["opt"]:
        for n, v in expected["opt"][k].items():
            w = got["opt"][k][n]
            assert torch.equal(w, v) if torch.is_tensor(v) else w == v, (k, n)
    assert got["lr_last_epoch"] == expected["lr_last_epoch"] == 4, got["lr_last_epoch"]
    n = sum(v.numel() for v in got["unet"].values())
    print(f"resume check: checkpoint-4 loads back: {len(got['unet'])} UNet tensors ({n} values), "
          f"{len(got['ema'])} EMA shadow params (optimization_step {got['ema_step']}), "
          f"optimizer state for {len(got['opt'])} params, LR scheduler at step {got['lr_last_epoch']}: all equal")


def check_no_paths():
    host = os.uname().nodename  # a host name of a few letters matches binary data by chance
    bad = [s.encode() for s in {str(Path(__file__).resolve().parent.parent), str(Path.home()), "/tmp/",
                                host if len(host) >= 4 else ""} if s]
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            for b in bad:
                assert b not in data, (f, b)


def main() -> None:
    torch.set_num_threads(1)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    args = Args()
    saved = train(args)
    check_resume(args, saved[4])
    check_no_paths()
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            print(f"{f.stat().st_size:>8}  {f.relative_to(OUT)}")


if __name__ == "__main__":
    main()
