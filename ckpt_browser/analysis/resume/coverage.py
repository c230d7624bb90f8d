"""Optimizer coverage: per-parameter state against the trainable weights, where the format
allows. DCP keys optimizer state by parameter name, so names and shapes are compared one to
one; torch optimizers key it by position, so the count and the multiset of shapes are compared.
ZeRO keeps flat partitions, which say nothing per parameter: not checked."""

from __future__ import annotations

from collections import Counter

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import ERROR, INFO, Checkpoint, TrainingState

AFTER = ("it was saved for a different model or parameter split, and loading it fails or "
         "pairs moments with the wrong weights: only a warm start from the weights is safe.")


def weight_shapes(ckpt: Checkpoint | None, ts: TrainingState) -> dict[str, tuple[int, ...]]:
    """Every weight's parameter name and shape, from every file that holds weights."""
    from ckpt_browser.parts.tag import named_weights

    shapes: dict[str, tuple[int, ...]] = {}
    if ckpt is None:
        return shapes
    for f in ckpt.files:
        if f.format == "dcp-metadata":
            shapes.update((t.name.removeprefix("model."), tuple(t.shape)) for t in f.tensors
                          if t.component == "weights")
        else:
            shapes.update((name, tuple(t.shape)) for name, t in named_weights(f))
    return shapes


def check_coverage(draft: Draft, ckpt: Checkpoint | None, ts: TrainingState) -> None:
    opt = draft.components["optimizer"]
    facts = opt.facts
    if opt.status != "ok" or draft.components["weights"].status != "ok" or \
            "zero_stage" in facts or "partition_count" in facts or "dp_ranks" in facts:
        return
    shapes = {str(k): tuple(v) for k, v in (facts.get("exp_avg") or {}).get("shapes", {}).items()}
    weights = weight_shapes(ckpt, ts)
    if not weights:
        return
    file = opt.files[0] if opt.files else None
    if "dcp" in facts and shapes and _by_name(draft, file, shapes, weights):
        return
    params = facts.get("params")
    if isinstance(params, int) and params > len(weights):
        draft.add(ERROR, "optimizer", file, f"the optimizer's param_groups list {params} "
                  f"parameters but the weights hold only {len(weights)} tensors: {AFTER}")
        return
    if shapes and len(shapes) == facts.get("params_with_state"):
        _by_shape(draft, file, shapes, weights)
    with_state = facts.get("params_with_state")
    if isinstance(params, int) and isinstance(with_state, int) and 0 < with_state < params:
        draft.add(INFO, "optimizer", file, f"optimizer state for {with_state} of {params} "
                  "parameters: the others never took a step (frozen, or no gradient yet) and "
                  "start with fresh moments, as they would have without the interruption.")


def _by_name(draft: Draft, file, shapes: dict, weights: dict) -> bool:
    """DCP: optimizer.state.<fqn>.* against the weight <fqn>. False when no name matches
    (another naming scheme): then shapes are compared as a multiset."""
    unknown = [k for k in shapes if k not in weights]
    if len(unknown) == len(shapes):
        return False
    if unknown:
        draft.add(ERROR, "optimizer", file, f"optimizer state for {len(unknown)} parameter"
                  f"{'s' if len(unknown) != 1 else ''} that no weight has (first: {unknown[0]}): "
                  f"{AFTER}")
    wrong = [k for k in shapes if k in weights and shapes[k] != tuple(weights[k])]
    if wrong:
        k = wrong[0]
        draft.add(ERROR, "optimizer", file, f"optimizer state for {k} has shape "
                  f"{list(shapes[k])} but the weight has {list(weights[k])}"
                  f"{f' ({len(wrong) - 1} more like it)' if len(wrong) > 1 else ''}: {AFTER}")
    return True


def _by_shape(draft: Draft, file, shapes: dict, weights: dict) -> None:
    have = Counter(tuple(s) for s in weights.values())
    need = Counter(shapes.values())
    over = [(s, k) for s, k in need.items() if k > have.get(s, 0)]
    if over:
        s, k = over[0]
        draft.add(ERROR, "optimizer", file, f"the optimizer holds state for {k} tensor"
                  f"{'s' if k != 1 else ''} of shape {list(s)} but the weights have "
                  f"{have.get(s, 0)}: {AFTER}")
