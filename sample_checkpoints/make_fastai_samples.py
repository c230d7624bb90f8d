"""Write `projects/fastai/` with fastai's own save code (`Learner.save`, `Learner.export`).

fastai is not a project dependency, and it needs torchvision, whose wheel does not import beside
the project's torch 2.13.0: run this in the venv that make_ultralytics_samples.py uses,
    python3.11 -m venv /tmp/ultravenv
    /tmp/ultravenv/bin/pip install torch==2.14.1 torchvision==0.29.1
    printf 'torch==2.14.1\\ntorchvision==0.29.1\\n' > /tmp/tail_c2.txt
    /tmp/ultravenv/bin/pip install -c /tmp/tail_c2.txt fastai
    /tmp/ultravenv/bin/python sample_checkpoints/make_fastai_samples.py
Made with fastai 2.8.12, fastcore 2.2.41, fasttransform 0.0.5, cloudpickle 3.1.3, pandas 3.1.1,
torch 2.14.1 (CPU), Python 3.11.

No network, no downloads. Two Learners, each seeded, CPU, batch 16, fit 2 epochs (fit_one_cycle):
- tabular/: `tabular_learner` on a synthetic DataFrame of 64 rows (two categorical columns, two
  continuous, a binary target; Categorify, FillMissing, Normalize; layers [8], accuracy metric).
  `learn.save('stage1')` writes models/stage1.pth (fastai/learner.py save_model: a torch.save of
  {'model': the TabularModel's state_dict(), 'opt': fastai's own Optimizer.state_dict(), i.e.
  {'state': [...per-parameter dicts...], 'hypers': [...per-group dicts...]}}; not torch's layout).
  `learn.export('export.pkl')` writes a torch.save zip of the whole Learner pickled with
  cloudpickle (protocol 2), without the optimizer and with empty DataLoaders (dls.new_empty()):
  TabularModel, the procs with their category maps and means, callbacks, loss, metrics.
- custom/: a plain `Learner` on tensor data (a fastai `Datasets` of (x, y) tuples, ItemGetter
  transforms, the last 16 of 64 rows for validation; `dsets.dataloaders`) with
  a model class `TinyRegressor` defined in the generator's `__main__` (as in a notebook), MSE loss.
  `learn.save('stage1')` as above; `learn.export('export.pkl')`: since the class lives in
  `__main__`, cloudpickle pickles it BY VALUE: the class body and its methods' code objects are
  inside the pickle (cloudpickle's _make_skeleton_class, _make_function, types.CodeType...),
  so loading it runs code that came from the file. Its source is compiled under the file name
  'tiny_regressor.py', and __main__.__file__ reads 'train.py' during the export (cloudpickle
  records the module's __file__ with each by-value function), so no path of this machine lands
  in the pickle.
"""

import shutil
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "projects" / "fastai"

CUSTOM_SRC = '''
from torch import nn


class TinyRegressor(nn.Module):
    def __init__(self, n_in=4, hidden=8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.body(x).squeeze(-1)
'''


def describe(obj, depth=0, max_depth=2):
    import torch

    pad = "  " * depth
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))[:3]
    else:
        return
    for k, v in items:
        extra = f" shape={tuple(v.shape)} {v.dtype}" if isinstance(v, torch.Tensor) else ""
        n = f" (len {len(v)})" if isinstance(v, (list, tuple, dict)) else ""
        print(f"{pad}{k!r}: {type(v).__module__}.{type(v).__qualname__}{extra}{n}")
        if depth + 1 < max_depth:
            describe(v, depth + 1, max_depth)


def make_tabular(root: Path) -> None:
    import numpy as np
    import pandas as pd
    from fastai.tabular.all import (Categorify, FillMissing, Normalize, TabularDataLoaders,
                                    accuracy, set_seed, tabular_learner)

    set_seed(0, reproducible=True)
    rng = np.random.default_rng(0)
    n = 64
    df = pd.DataFrame({
        "colour": rng.choice(["red", "green", "blue"], n),
        "size": rng.choice(["S", "M", "L", "XL"], n),
        "width": rng.normal(size=n).astype("float32"),
        "height": rng.normal(size=n).astype("float32"),
    })
    df.loc[3, "height"] = np.nan  # FillMissing adds a height_na column
    df["label"] = ((df.width.fillna(0) + (df.colour == "red")) > 0.5).map({True: "yes", False: "no"})
    dls = TabularDataLoaders.from_df(
        df, path=".", procs=[Categorify, FillMissing, Normalize], cat_names=["colour", "size"],
        cont_names=["width", "height"], y_names="label", valid_idx=list(range(48, 64)), bs=16,
        num_workers=0)
    learn = tabular_learner(dls, layers=[8], metrics=accuracy)
    with learn.no_bar(), learn.no_logging():
        learn.fit_one_cycle(2, 1e-2)
    learn.save("stage1")
    learn.export("export.pkl")


def make_custom(root: Path) -> None:
    import torch
    from fastai.data.core import Datasets
    from fastai.data.transforms import IndexSplitter, ItemGetter
    from fastai.learner import Learner
    from fastai.losses import MSELossFlat
    from fastai.torch_core import set_seed

    main = sys.modules["__main__"]
    exec(compile(CUSTOM_SRC, "tiny_regressor.py", "exec"), main.__dict__)
    set_seed(0, reproducible=True)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + 0.1 * torch.randn(64)
    items = list(zip(x, y))
    dsets = Datasets(items, tfms=[[ItemGetter(0)], [ItemGetter(1)]],
                     splits=IndexSplitter(range(48, 64))(items))
    dls = dsets.dataloaders(bs=16, num_workers=0)
    learn = Learner(dls, main.TinyRegressor(), loss_func=MSELossFlat(), path=".")
    with learn.no_bar(), learn.no_logging():
        learn.fit_one_cycle(2, 1e-2)
    learn.save("stage1")
    # cloudpickle keeps the __file__ of a by-value function's module: a neutral name, as if the
    # user's script were train.py, instead of this machine's path to the generator
    saved_file = main.__file__
    main.__file__ = "train.py"
    try:
        learn.export("export.pkl")
    finally:
        main.__file__ = saved_file


def main() -> None:
    import os

    import torch

    torch.set_num_threads(1)
    if OUT.exists():
        shutil.rmtree(OUT)
    cwd = os.getcwd()
    for name, fn in (("tabular", make_tabular), ("custom", make_custom)):
        root = OUT / name
        root.mkdir(parents=True)
        os.chdir(root)  # Learner.path '.': the exported Learner keeps it relative
        try:
            fn(root)
        finally:
            os.chdir(cwd)

    bads = [str(OUT).encode(), b"/tmp/", str(Path.home()).encode(), sys.prefix.encode(),
            str(Path(__file__).resolve()).encode()]
    import zipfile
    for p in sorted(OUT.rglob("*")):
        if not p.is_file():
            continue
        blobs = [p.read_bytes()]
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                blobs += [z.read(m) for m in z.namelist()]
        for data in blobs:
            for bad in bads:
                assert bad not in data, (p, bad)
        print(f"{p.relative_to(OUT)}  {p.stat().st_size} bytes")
    for p in sorted(OUT.rglob("*.p*")):
        print(f"== {p.relative_to(OUT)}")
        obj = torch.load(p, weights_only=False)
        print(f"{type(obj).__module__}.{type(obj).__qualname__}")
        if isinstance(obj, dict):
            describe(obj)
        else:
            describe({k: v for k, v in vars(obj).items() if not k.startswith("_")}, max_depth=1)


if __name__ == "__main__":
    main()
