"""The common table's cells: names cut in the middle (never from the left), widths that add up."""

import pytest

from ckpt_browser.tui.common.cells import cut_middle, cut_right
from ckpt_browser.tui.common.vtable import Column, line, widths

NAME = "model.layers.61.mlp.experts.255.down_proj.weight"


@pytest.mark.parametrize("width", range(2, len(NAME) + 3))
def test_the_cut_fits_and_keeps_both_ends(width):
    shown = cut_middle(NAME, width)
    assert len(shown) == min(width, len(NAME))
    if len(NAME) > width:
        head, tail = shown.split("…")
        assert NAME.startswith(head) and NAME.endswith(tail) and tail  # never cut from the left
    else:
        assert shown == NAME


@pytest.mark.parametrize("width", [36, 38, 40, 44])
def test_layer_and_expert_numbers_stay_whole(width):
    shown = cut_middle(NAME, width)
    assert shown.startswith("model.layers.61") and "255.down_proj.weight" in shown


def test_examples():
    assert cut_middle(NAME, 36) == "model.layers.61…255.down_proj.weight"
    assert cut_middle(NAME, 40) == "model.layers.61.mlp…255.down_proj.weight"
    assert cut_middle("abc", 1) == "…" and cut_middle("abc", 0) == ""
    assert cut_right("abcdef", 4) == "abc…" and cut_right("abc", 4) == "abc"


def test_the_rest_goes_to_the_flexible_column():
    cols = (Column("name"), Column("n", 5, "right"), Column("f", 3))
    assert widths(cols, 40) == [40 - 8 - 3, 5, 3]
    assert widths(cols, 5) == [8, 5, 3]  # never below its minimum
    assert line(cols, ("x", "12", "abcd"), [4, 5, 3]) == "x       12 ab…"


def test_a_layer_number_is_not_cut_out_when_a_word_can_go_instead():
    """`model.layers.0.mlp.down_proj.weight` in 34 cells: cutting out `.0.` would make layer 0
    and layer 1 look alike; a piece of `mlp.` goes instead."""
    assert cut_middle("model.layers.0.mlp.down_proj.weight", 34) == \
        "model.layers.0.ml…down_proj.weight"
    for layer in range(12):
        shown = cut_middle(f"model.layers.{layer}.mlp.gate_proj.weight", 34)
        assert shown.startswith((f"model.layers.{layer}.", f"model.layers.{layer}…")), shown
