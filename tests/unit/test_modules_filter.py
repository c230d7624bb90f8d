"""Module tree subtotals, the name filter, and natural sort order."""

from __future__ import annotations

import math
import random

import pytest

from ckpt_browser.analysis.modules import build_modules
from ckpt_browser.analysis.opened import open_path
from ckpt_browser.model import natural_key
from ckpt_browser.tui.common.filter import name_matcher

from .helpers import RUN6, SAFETENSORS_BITS, SHARDS, craft, entry, reference_map


def walk(node):
    yield node
    for child in node.children.values():
        yield from walk(child)


def test_module_subtotals_equal_the_tensors_under_each_prefix():
    ckpt = open_path(str(RUN6)).checkpoint
    root = build_modules(ckpt.weights)
    ref = reference_map(RUN6, SHARDS)  # name -> (dtype, shape, file), from safe_open

    assert root.totals.tensors == len(ref)
    assert root.totals.params == ckpt.totals.params
    assert root.totals.bytes == ckpt.totals.bytes
    for node in walk(root):
        under = [(d, s) for n, (d, s, _) in ref.items()
                 if not node.path or n.startswith(node.path + ".")]
        assert node.totals.tensors == len(under), node.path
        assert node.totals.params == sum(math.prod(s) for _, s in under), node.path
        assert node.totals.bytes == sum(math.prod(s) * SAFETENSORS_BITS[d] // 8
                                        for d, s in under), node.path
        # children and own tensors add up to the node
        assert node.totals.params == (sum(c.totals.params for c in node.children.values())
                                      + sum(t.numel for t in node.tensors))


def test_module_tree_places_each_tensor_under_its_dotted_path():
    ckpt = open_path(str(RUN6)).checkpoint
    root = build_modules(ckpt.weights)
    placed = {t.name: node.path for node in walk(root) for t in node.tensors}
    assert placed == {t.name: t.name.rpartition(".")[0] for t in ckpt.weights}
    q = root.children["model"].children["layers"].children["0"].children["self_attn"]
    assert q.path == "model.layers.0.self_attn"
    assert "q_proj" in q.children


def test_module_children_sort_naturally_and_subtotals_by_dtype(tmp_path):
    header, begin = {}, 0
    for i in random.Random(0).sample(range(12), 12):  # written in a shuffled order
        for part, dtype in (("w", "F32"), ("s", "BF16")):
            size = 4 * SAFETENSORS_BITS[dtype] // 8
            header[f"model.layers.{i}.{part}"] = entry(dtype, [4], begin, begin + size)
            begin += size
    path = craft(tmp_path / "m.safetensors", header, bytes(begin))
    root = build_modules(open_path(str(path)).checkpoint.weights)

    layers = root.children["model"].children["layers"]
    assert [c.name for c in layers.sorted_children()] == [str(i) for i in range(12)]
    assert layers.totals.by_dtype["F32"].bytes == 12 * 16
    assert layers.totals.by_dtype["BF16"].bytes == 12 * 8
    assert layers.totals.params == 12 * 8


def test_natural_key_orders_layer_numbers_as_numbers():
    names = ["layers.10.w", "layers.2.w", "layers.1.w", "layers.2.b", "embed", "layers.100.w"]
    assert sorted(names, key=natural_key) == ["embed", "layers.1.w", "layers.2.b", "layers.2.w",
                                              "layers.10.w", "layers.100.w"]
    assert natural_key("layers.2") < natural_key("layers.10")


def test_natural_key_never_compares_a_number_with_text():
    names = ["1a", "a1", "10", "a", "", "2.b", "x.y.3", "x.y.z"]
    sorted(names, key=natural_key)  # must not raise TypeError


NAMES = [
    "model.embed_tokens.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.k_proj.weight",
    "model.layers.10.self_attn.q_proj.weight",
    "model.layers.1.mlp.up_proj.weight",
    "model.norm.weight",
    "lm_head.weight",
]


@pytest.mark.parametrize("pattern, expected", [
    ("q_proj", {NAMES[1], NAMES[3]}),
    ("Q_PROJ", {NAMES[1], NAMES[3]}),
    ("  norm  ", {NAMES[5]}),
    ("layers.*.q_proj*", {NAMES[1], NAMES[3]}),
    ("LAYERS.*.Q_PROJ*", {NAMES[1], NAMES[3]}),
    ("layers.?.*", {NAMES[1], NAMES[2], NAMES[4]}),
    ("*.weight", set(NAMES)),
    ("lm_*", {NAMES[6]}),
    ("layers.[01].mlp*", {NAMES[4]}),
    ("no-such-thing", set()),
    ("", set(NAMES)),
])
def test_name_matcher(pattern, expected):
    match = name_matcher(pattern)
    assert {n for n in NAMES if match(n)} == expected


def test_glob_from_the_help_finds_the_sample_tensor():
    names = [t.name for t in open_path(str(RUN6)).checkpoint.weights]
    match = name_matcher("layers.*.q_proj*")
    assert sorted(filter(match, names)) == sorted(n for n in names if ".q_proj." in n)
    assert match("model.layers.0.self_attn.q_proj.weight")
    assert not match("model.layers.0.self_attn.k_proj.weight")
