"""classify on object graphs the pickle shares (memoised objects reached by many paths): each
shared object is searched once per key, and its parts are still said at every path."""

from __future__ import annotations

import io

import torch

from ckpt_browser.parts import classify as classify_module
from ckpt_browser.parts.classify import classify
from ckpt_browser.readers.torchfile import read_pickle_file_object


def read(obj) -> object:
    buf = io.BytesIO()
    torch.save(obj, buf)
    size = buf.tell()
    buf.seek(0)
    return read_pickle_file_object(buf, "x.pt", size).obj


def test_a_shared_optimizer_is_found_at_each_path():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), momentum=0.9)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    shared = {"optimizer": opt.state_dict()}
    parts = classify(read({"model": model.state_dict(), "a": shared, "b": shared}))
    assert {(p.kind, p.path) for p in parts} >= {
        ("weights", "model"), ("optimizer", "a.optimizer"), ("optimizer", "b.optimizer")}


def test_a_diamond_of_shared_dicts_is_searched_once_per_object(monkeypatch):
    node: dict = {"step": 7}
    for _ in range(16):  # 2**16 paths, 17 objects
        node = {"left": node, "right": node}
    obj = read({"model": {"w": torch.zeros(2)}, "tree": node})
    calls = 0
    fields = classify_module.sig.fields

    def counting(x):
        nonlocal calls
        calls += 1
        return fields(x)

    monkeypatch.setattr(classify_module.sig, "fields", counting)
    parts = classify(obj)
    assert calls < 1_000  # each object once per key it sits under (left, right), not 2**16
    assert ("weights", "model") in {(p.kind, p.path) for p in parts}
