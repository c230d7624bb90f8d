"""Write `projects/skorch/` with skorch's own save code.

skorch is not a project dependency: run this in a venv of its own, torch pinned,
    python3 -m venv /tmp/tailvenv
    /tmp/tailvenv/bin/pip install torch==2.13.0
    echo torch==2.13.0 > /tmp/tail_c.txt
    /tmp/tailvenv/bin/pip install -c /tmp/tail_c.txt skorch
    /tmp/tailvenv/bin/python sample_checkpoints/make_skorch_samples.py
Made with skorch 1.4.0, scikit-learn 1.9.1, torch 2.13.0+cpu, numpy 2.4.6, Python 3.11.

A `NeuralNetClassifier` around a module of one hidden layer of 8 (`make_classification`: 64
rows, 6 features, 2 classes; 74 parameters), Adam, seeded, CPU, `max_epochs=2`, skorch's
default train/valid split (20 % valid), `net.fit(X, y)`. Files:
- `save_params/model.pkl`, `opt.pkl`, `history.json`: `net.save_params(f_params='model.pkl',
  f_optimizer='opt.pkl', f_history='history.json')`. Despite the names the `.pkl` files are
  `torch.save` zips (skorch/net.py save_params): the module's `state_dict()` and the Adam
  optimizer's `state_dict()`; the history is JSON.
- `checkpoint/params.pt`, `optimizer.pt`, `criterion.pt`, `history.json`: the `Checkpoint`
  callback with its defaults (monitor 'valid_loss_best', f_params 'params.pt', f_optimizer
  'optimizer.pt', f_criterion 'criterion.pt', f_history 'history.json', f_pickle None) and
  `dirname='checkpoint'`; it saves (same save_params) at each epoch whose valid loss is the best
  so far, so the files are those of the last improving epoch. `criterion.pt` is the
  `CrossEntropyLoss` module's (empty) `state_dict()`.
- `net.pkl`: `pickle.dump(net, f)`, skorch's documented way of saving a whole net (the same as
  the Checkpoint callback's `f_pickle`): a plain pickle of the NeuralNetClassifier, its module,
  optimizer and callbacks; the tensors inside are pickled by torch's `__reduce_ex__`.
The module class is `tinynet.TinyNet`, built from source in a module registered as `tinynet`,
so unpickling net.pkl needs it importable (as any user's own module would be).
"""

import json
import pickle
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent / "projects" / "skorch"

TINYNET_SRC = '''
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, n_in=6, hidden=8, n_out=2):
        super().__init__()
        self.hidden = nn.Linear(n_in, hidden)
        self.act = nn.ReLU()
        self.out = nn.Linear(hidden, n_out)

    def forward(self, X):
        return self.out(self.act(self.hidden(X)))
'''


def tinynet_module():
    mod = types.ModuleType("tinynet")
    exec(compile(TINYNET_SRC, "tinynet.py", "exec"), mod.__dict__)
    sys.modules["tinynet"] = mod
    return mod


def describe(obj, depth=0, max_depth=2):
    pad = "  " * depth
    if isinstance(obj, dict):
        for k, v in obj.items():
            extra = f" shape={tuple(v.shape)} {v.dtype}" if isinstance(v, torch.Tensor) else ""
            print(f"{pad}{k!r}: {type(v).__module__}.{type(v).__qualname__}{extra}")
            if depth + 1 < max_depth:
                describe(v, depth + 1, max_depth)
    elif isinstance(obj, (list, tuple)) and obj and depth < max_depth:
        for i, v in enumerate(obj[:3]):
            print(f"{pad}[{i}]: {type(v).__module__}.{type(v).__qualname__}")
            describe(v, depth + 1, max_depth)


def main() -> None:
    import os

    from sklearn.datasets import make_classification
    from skorch import NeuralNetClassifier
    from skorch.callbacks import Checkpoint

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tinynet = tinynet_module()
    X, y = make_classification(64, 6, n_informative=4, random_state=0)
    X = X.astype(np.float32)
    y = y.astype(np.int64)

    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "save_params").mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(OUT)  # relative dirname: the pickled callback keeps it as given
    try:
        net = NeuralNetClassifier(
            tinynet.TinyNet, max_epochs=2, lr=0.01, optimizer=torch.optim.Adam,
            criterion=torch.nn.CrossEntropyLoss, device="cpu", batch_size=16,
            callbacks=[Checkpoint(dirname="checkpoint")],
        )
        net.fit(X, y)
        os.chdir(OUT / "save_params")
        net.save_params(f_params="model.pkl", f_optimizer="opt.pkl", f_history="history.json")
        os.chdir(OUT)
        with open("net.pkl", "wb") as f:
            pickle.dump(net, f)
    finally:
        os.chdir(cwd)

    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            for bad in (str(OUT).encode(), b"/tmp/", str(Path.home()).encode(), sys.prefix.encode()):
                assert bad not in data, (p, bad)
            print(f"{p.relative_to(OUT)}  {len(data)} bytes")
    for p in sorted(OUT.rglob("*")):
        if p.suffix in (".pt", ".pkl"):
            print(f"== {p.relative_to(OUT)}")
            if p.name == "net.pkl":
                with open(p, "rb") as f:
                    obj = pickle.load(f)
                print(type(obj).__module__ + "." + type(obj).__qualname__)
                describe({k: v for k, v in vars(obj).items() if k.endswith("_")})
            else:
                describe(torch.load(p, weights_only=False))
                torch.load(p, weights_only=True)  # plain state_dicts: must load
        elif p.suffix == ".json":
            hist = json.loads(p.read_text())
            print(f"== {p.relative_to(OUT)}: {len(hist)} epochs, keys {sorted(hist[0])}")


if __name__ == "__main__":
    main()
