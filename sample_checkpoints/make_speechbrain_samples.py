"""Write `projects/speechbrain/save/` with speechbrain's own `Brain.fit` and `Checkpointer`.

speechbrain is not a project dependency. It imports torchaudio at import time (speechbrain ->
speechbrain.dataio.dataio -> speechbrain.utils.torch_audio_backend), and no torchaudio wheel loads
beside the project's torch 2.13.0 (torchaudio's newest release is 2.11.1). So this runs in a venv
of its own, with torch 2.11.0 and torchaudio 2.11.0. torchaudio 2.11.1 (which declares a bare
`torch` requirement) does NOT load beside torch 2.11.0: `libtorchaudio.so: undefined symbol:
torch_exception_get_what_without_backtrace`; 2.11.0 does:
    python3.11 -m venv /tmp/sbvenv
    /tmp/sbvenv/bin/pip install torch==2.11.0 torchaudio==2.11.0
    printf 'torch==2.11.0\\ntorchaudio==2.11.0\\n' > /tmp/sb_c.txt
    /tmp/sbvenv/bin/pip install -c /tmp/sb_c.txt speechbrain==1.1.2
    /tmp/sbvenv/bin/python sample_checkpoints/make_speechbrain_samples.py
Made with speechbrain 1.1.2 (the newest release), torch 2.11.0+cu130 run on CPU, torchaudio
2.11.0+cu130, HyperPyYAML 1.2.3, PyYAML 6.0.4, numpy 2.4.6, Python 3.11 (`pip check` is clean;
nothing bypassed).

The run follows speechbrain's recipe templates (a `Brain` subclass whose `on_stage_end(VALID)`
anneals the learning rate with `lr_annealing` and calls
`checkpointer.save_and_keep_only(meta={"loss": ...}, min_keys=["loss"])`, a Checkpointer whose
recoverables are the model, the scheduler and the epoch counter):
- model: `torch.nn.Sequential(speechbrain.nnet.linear.Linear(6 -> 8), LeakyReLU,
  speechbrain.nnet.linear.Linear(8 -> 3))` (speechbrain's Linear wraps an nn.Linear as `.w`, so
  the keys are `0.w.weight`, `0.w.bias`, `2.w.weight`, `2.w.bias`; 83 parameters);
- data: a random TensorDataset of 32 train rows and 8 valid rows (6 features; the class, of 3, is
  the argmax of the first 3 features, so the valid loss falls from epoch to epoch), handed
  to `fit` as Datasets with `train_loader_kwargs={"batch_size": 8, "shuffle": True}`, so the Brain
  builds the train loader itself (`make_dataloader`: a `SaveableDataLoader` over speechbrain's
  `ReproducibleRandomSampler`, 4 batches an epoch) and registers it as `dataloader-TRAIN`;
- `opt_class` Adam (lr 0.01), which `init_optimizers` registers as `optimizer`; Brain registers
  itself as `brain`;
- `lr_annealing`: `speechbrain.nnet.schedulers.NewBobScheduler(initial_value=0.01)`;
- `counter`: `speechbrain.utils.epoch_loop.EpochCounter(limit=3)`;
- `run_opts={"device": "cpu", "ckpt_interval_steps": 2, "noprogressbar": True}`, so Brain also
  writes its own intra-epoch checkpoint (`_save_intra_epoch_ckpt`) every 2 train steps, keeping
  only the newest of those.
Seeded with `speechbrain.utils.seed.seed_everything(0)`.

Epochs 1 and 2 run to the end; in epoch 3 the Brain raises KeyboardInterrupt at train step 3,
as a Ctrl-C would, just after the intra-epoch checkpoint of step 2. The checkpoints folder then
holds exactly two checkpoints, as speechbrain left them:
- the end-of-epoch checkpoint of epoch 2 (`end-of-epoch: true`, `loss` in its meta; the epoch-1
  one was deleted by `save_and_keep_only`, epoch 2's valid loss being the lower);
- the intra-epoch checkpoint of epoch 3, step 2 (`end-of-epoch: false`,
  `brain_intra_epoch_ckpt: true`).
Each `CKPT+<stamp>+<nn>/` folder holds `CKPT.yaml` (the meta: `unixtime`, `end-of-epoch`, and
the extra keys), `model.ckpt`, `optimizer.ckpt` (torch.save zips of state_dicts),
`lr_annealing.ckpt` (a torch.save zip of NewBob's dict), `counter.ckpt` (the epoch number as
text), `brain.ckpt` (YAML: step, avg_train_loss, optimizer_step) and `dataloader-TRAIN.ckpt`
(text: the number of batches yielded in the current epoch, or `None`).

Folder names: speechbrain names a checkpoint `CKPT+%Y-%m-%d+%H-%M-%S+NN` from `time.time()` in
local time (`Checkpointer._new_checkpoint_dirpath`) and writes the same clock to `unixtime`.
To make both deterministic, the generator replaces the `time` module that
`speechbrain.utils.checkpoints` imported with a clock that starts at 2026-01-01 00:00:00 UTC and
advances one second per reading, in UTC (nothing else of speechbrain is changed). A real run
gives the same layout with the wall clock's stamps. `Checkpointer.save_checkpoint(name=...)`
would give `CKPT+<name>` instead, but Brain's intra-epoch save does not pass a name, and the
recipes do not either.

Then it proves that the checkpoints resume: a copy of the folder, fresh objects, a second Brain
with the same recoverables; `fit` recovers the newest checkpoint (the intra-epoch one) in
`on_fit_start`, and the generator prints the epoch and step it continues at (epoch 3, step 3:
EpochCounter's `_recover` sets `current` to 3 - 1 for an intra-epoch checkpoint, the
SaveableDataLoader skips the 2 batches already seen), checks that the recovered weights equal
`model.ckpt`, and that after finishing epoch 3 the weights equal those of an uninterrupted
3-epoch run. The samples are written only by the first run; the resume works in a scratch copy.
"""

import os
import shutil
import sys
import tempfile
import time as _real_time
import types
from pathlib import Path

OUT = Path(__file__).resolve().parent / "projects" / "speechbrain" / "save"
CLOCK_START = 1767225600.0  # 2026-01-01 00:00:00 UTC


def fake_clock_module():
    state = {"t": CLOCK_START}

    def fake_time():
        t = state["t"]
        state["t"] += 1.0
        return t

    return types.SimpleNamespace(
        time=fake_time, strftime=_real_time.strftime, localtime=_real_time.gmtime
    )


def build(ckpt_dir, interrupt_at=None):
    import torch
    import speechbrain as sb
    from speechbrain.nnet.linear import Linear
    from speechbrain.nnet.schedulers import NewBobScheduler, update_learning_rate
    from speechbrain.utils.checkpoints import Checkpointer
    from speechbrain.utils.epoch_loop import EpochCounter
    from speechbrain.utils.seed import seed_everything

    seed_everything(0)
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(40, 6, generator=g)
    y = x[:, :3].argmax(dim=1)  # learnable, so the valid loss falls from epoch 1 to 2
    train = torch.utils.data.TensorDataset(x[:32], y[:32])
    valid = torch.utils.data.TensorDataset(x[32:], y[32:])

    model = torch.nn.Sequential(
        Linear(input_size=6, n_neurons=8), torch.nn.LeakyReLU(), Linear(input_size=8, n_neurons=3)
    )
    lr_annealing = NewBobScheduler(initial_value=0.01)
    counter = EpochCounter(limit=3)
    checkpointer = Checkpointer(
        ckpt_dir,
        recoverables={"model": model, "lr_annealing": lr_annealing, "counter": counter},
    )

    class TinyBrain(sb.Brain):
        seen = []

        def compute_forward(self, batch, stage):
            xb, _ = batch
            return self.modules.model(xb.to(self.device))

        def compute_objectives(self, predictions, batch, stage):
            _, yb = batch
            return torch.nn.functional.cross_entropy(predictions, yb.to(self.device))

        def fit_batch(self, batch):
            here = (self.hparams.counter.current, self.step)
            self.seen.append(here)
            if here == interrupt_at:
                raise KeyboardInterrupt  # as a Ctrl-C during this step would
            return super().fit_batch(batch)

        def on_stage_end(self, stage, stage_loss, epoch=None):
            if stage == sb.Stage.VALID:
                old_lr, new_lr = self.hparams.lr_annealing(stage_loss)
                update_learning_rate(self.optimizer, new_lr)
                self.checkpointer.save_and_keep_only(
                    meta={"loss": stage_loss}, min_keys=["loss"]
                )

    brain = TinyBrain(
        modules={"model": model},
        opt_class=lambda params: torch.optim.Adam(params, lr=0.01),
        hparams={"lr_annealing": lr_annealing, "counter": counter},
        run_opts={"device": "cpu", "ckpt_interval_steps": 2, "noprogressbar": True},
        checkpointer=checkpointer,
    )
    return brain, counter, train, valid


def fit(brain, counter, train, valid):
    brain.fit(
        counter,
        train_set=train,
        valid_set=valid,
        train_loader_kwargs={"batch_size": 8, "shuffle": True},
        valid_loader_kwargs={"batch_size": 8},
    )


def main():
    import torch
    import speechbrain
    import speechbrain.utils.checkpoints as sbck

    print("speechbrain", speechbrain.__version__, "torch", torch.__version__)
    sbck.time = fake_clock_module()
    tmp = Path(tempfile.mkdtemp(prefix="sbsamples-"))
    try:
        # 1. the run: epochs 1, 2, then interrupted at epoch 3 step 3
        save = tmp / "save"
        brain, counter, train, valid = build(save, interrupt_at=(3, 3))
        try:
            fit(brain, counter, train, valid)
            sys.exit("the run was not interrupted")
        except KeyboardInterrupt:
            print("interrupted at epoch 3, step 3")
        ckpts = sorted(brain.checkpointer.list_checkpoints(), key=lambda c: c.meta["unixtime"])
        for c in ckpts:
            print(c.path.name, c.meta)
        assert len(ckpts) == 2, ckpts
        assert ckpts[0].meta["end-of-epoch"] and not ckpts[1].meta["end-of-epoch"]
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(save, OUT)

        # 2. an uninterrupted 3-epoch run, for comparison
        sbck.time = fake_clock_module()
        full, fcounter, ftrain, fvalid = build(tmp / "full")
        fit(full, fcounter, ftrain, fvalid)
        full_state = {k: v.clone() for k, v in full.modules.model.state_dict().items()}

        # 3. resume from a copy of the sample folder
        sbck.time = fake_clock_module()
        resumed = tmp / "resume"
        shutil.copytree(OUT, resumed)
        brain2, counter2, train2, valid2 = build(resumed)
        newest = ckpts[1].path.name
        saved_model = torch.load(resumed / newest / "model.ckpt", weights_only=True)
        orig_on_fit_start = brain2.on_fit_start

        def on_fit_start():
            orig_on_fit_start()  # recovers the newest checkpoint
            sd = brain2.modules.model.state_dict()
            assert all(torch.equal(sd[k], saved_model[k]) for k in saved_model)
            loader = brain2.checkpointer.recoverables["dataloader-TRAIN"]
            print(
                "recovered:", "counter.current", counter2.current,
                "brain.step", brain2.step, "optimizer_step", brain2.optimizer_step,
                "dataloader skip_to", loader._speechbrain_recovery_skip_to,
                "lr", brain2.optimizer.param_groups[0]["lr"],
                "newbob metric_values", len(brain2.hparams.lr_annealing.metric_values),
            )

        brain2.on_fit_start = on_fit_start
        fit(brain2, counter2, train2, valid2)
        first = brain2.seen[0]
        print("resumed run's first train batch: epoch %d, step %d" % first)
        assert first == (3, 3), first
        assert len(brain2.seen) == 2, brain2.seen
        sd = brain2.modules.model.state_dict()
        same = all(torch.equal(sd[k], full_state[k]) for k in full_state)
        print("final weights equal the uninterrupted run's:", same)
        assert same
    finally:
        shutil.rmtree(tmp)

    # no path of this machine in any file
    needles = [str(Path(__file__).resolve().parents[1]), str(Path.home()), "/tmp/", sys.prefix]
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            for n in needles:
                assert n.encode() not in data, (f, n)
            print("%8d  %s" % (len(data), f.relative_to(OUT.parent)))


if __name__ == "__main__":
    main()
