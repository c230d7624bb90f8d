"""Write `projects/composer/run/` with MosaicML Composer's own `Trainer` and its checkpoint saver.

Composer is not a project dependency. mosaicml 0.32.1 (the newest release) declares
torch<2.7.1,>=2.6.0 and torchvision<0.22.1, and imports torchvision, whose wheel does not import
beside the project's torch 2.13.0. So this runs in a venv of its own, with torch 2.14.1 and
torchvision 0.29.1 (the pair of make_ultralytics_samples.py's venv) and composer installed with
--no-deps, which BYPASSES its declared torch/torchvision pins; its other requirements are
installed under a constraints file that keeps torch/torchvision as they are and honours
composer's own upper bounds for the rest:
    python3.11 -m venv /tmp/composervenv
    /tmp/composervenv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /tmp/composervenv/bin/pip install --no-deps mosaicml==0.32.1
    printf 'torch==2.14.1\\ntorchvision==0.29.1\\npillow<12\\ntabulate==0.9.0\\ntorchmetrics<1.7.5\\nimportlib-metadata<9\\npackaging<25.1\\nnumpy<2.3.0\\ncoolname<3\\nmosaicml-cli<0.8\\n' > /tmp/composer_c.txt
    /tmp/composervenv/bin/pip install -c /tmp/composer_c.txt torchmetrics coolname tabulate \\
        py-cpuinfo psutil pyyaml tqdm requests importlib-metadata packaging numpy pillow \\
        torch_optimizer mosaicml-cli
    /tmp/composervenv/bin/python sample_checkpoints/make_composer_samples.py
Made with mosaicml 0.32.1, torch 2.14.1+cu130 (run on CPU), torchvision 0.29.1, torchmetrics
1.7.4, Python 3.11 (`pip check` reports only the torch and torchvision pins as broken).

The run: `composer.models.ComposerClassifier` over a 2-layer MLP (4 -> 8 -> 3), a DataLoader over
a random TensorDataset (32 rows, batch 8, so 4 batches an epoch), AdamW, max_duration "2ep",
save_interval "1ep", device "cpu", seed 0, in a scratch folder with a relative save_folder, so
composer writes `ep1-ba4-rank0.pt` and `ep2-ba8-rank0.pt` (its default save_filename) and the
`latest-rank0.pt` symlink. The two .pt files are copied to projects/composer/run/, and the
symlink too if (and only if) its target is relative.

Then it proves that `ep1-ba4-rank0.pt` resumes: a second Trainer on fresh objects with
`load_path=<ep1 file>` reports epoch 1 / batch 4 in `state.timestamp` after loading, and its
model weights equal the ones saved.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "projects" / "composer" / "run"


def build(seed=0):
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    from composer.models import ComposerClassifier

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(32, 4, generator=g)
    y = torch.randint(0, 3, (32,), generator=g)
    dl = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)
    torch.manual_seed(seed)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model = ComposerClassifier(mlp, num_classes=3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, dl, opt


def main():
    import torch
    import composer
    from composer import Trainer

    print("composer", composer.__version__, "torch", torch.__version__, file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="composer-samples-"))
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        model, dl, opt = build()
        trainer = Trainer(model=model, train_dataloader=dl, max_duration="2ep", optimizers=opt,
                          save_folder="run", save_interval="1ep", save_overwrite=True,
                          device="cpu", seed=0, run_name="composer-sample", progress_bar=False)
        trainer.fit()
        trainer.close()
        run = scratch / "run"
        names = sorted(os.listdir(run))
        print("written:", names, file=sys.stderr)

        # resume proof
        model2, dl2, opt2 = build(seed=99)
        t2 = Trainer(model=model2, train_dataloader=dl2, max_duration="2ep", optimizers=opt2,
                     load_path=str(run / "ep1-ba4-rank0.pt"), device="cpu", seed=0,
                     run_name="composer-resume", progress_bar=False)
        ts = t2.state.timestamp
        print("resumed timestamp: epoch", int(ts.epoch), "batch", int(ts.batch), file=sys.stderr)
        assert int(ts.epoch) == 1 and int(ts.batch) == 4, ts
        saved = torch.load(run / "ep1-ba4-rank0.pt", weights_only=False)["state"]["model"]
        for k, v in t2.state.model.state_dict().items():
            assert torch.equal(v, saved[k]), k
        print("resumed model equals ep1's saved weights", file=sys.stderr)
        t2.close()

        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.mkdir(parents=True)
        for n in ("ep1-ba4-rank0.pt", "ep2-ba8-rank0.pt"):
            shutil.copyfile(run / n, OUT / n)
        link = run / "latest-rank0.pt"
        if link.is_symlink():
            target = os.readlink(link)
            print("latest-rank0.pt ->", target, file=sys.stderr)
            if not os.path.isabs(target):
                os.symlink(target, OUT / "latest-rank0.pt")
        # no machine path in any file
        bad = [p.encode() for p in (str(scratch), "/tmp/", sys.prefix, os.path.expanduser("~"),
                                    str(Path(__file__).resolve().parent.parent))]
        for f in sorted(OUT.iterdir()):
            if f.is_symlink():
                continue
            data = f.read_bytes()
            hits = [b.decode() for b in bad if b in data]
            print(f"{f.name}: {len(data)} bytes" + (f"  HOLDS PATHS {hits}" if hits else ""),
                  file=sys.stderr)
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
