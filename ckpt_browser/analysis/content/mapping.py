"""Optimizer state against the weights: which saved tensors are trainable parameters, and,
where the order makes it certain, which parameter each optimizer id stands for.

torch numbers parameters 0..N-1 in the order they were given to the optimizer, usually
`model.parameters()`: a module's own parameters, then its children's, which is the model's
state_dict order without the buffers, a tied parameter counted once. That order is certain
only when the count matches exactly and every saved moment has its parameter's shape.
"""

from __future__ import annotations

from ckpt_browser.analysis.content.signatures import fields
from ckpt_browser.standins import TensorRef

BUFFERS = ("running_mean", "running_var", "num_batches_tracked", "n_averaged")
FLOATS = ("F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "C64", "C128")
# per-parameter state that has the parameter's shape (FORMATS.md "Optimizer state")
MAIN_STATE = ("exp_avg", "momentum_buffer", "sum", "square_avg", "exp_avg_sq", "state1",
              "exp_inf", "ax", "prev", "acc_delta", "max_exp_avg_sq")


def parameters(named) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of the weights that can be trainable parameters, in saved order:
    floating tensors that are not known buffers, a tied tensor (same bytes) once."""
    seen = set()
    out = []
    for name, t in named:
        if t.dtype not in FLOATS or name.rsplit(".", 1)[-1] in BUFFERS:
            continue
        where = (t.file, t.begin, t.end) if t.located else None
        if where is not None and where in seen:
            continue
        seen.add(where)
        out.append((name, tuple(t.shape)))
    return out


def main_shape(state) -> tuple[int, ...] | None:
    f = fields(state)
    for key in MAIN_STATE:
        v = f.get(key)
        if type(v) is TensorRef:
            return v.shape
    return None


def ids_in_order(sd: dict) -> list | None:
    ids = []
    for g in sd.get("param_groups") or []:
        params = fields(g).get("params")
        if not isinstance(params, (list, tuple)):
            return None
        ids.extend(params)
    return ids


def param_names(sd: dict, named) -> dict[str, str] | None:
    """str(optimizer id) -> parameter name, when certain; None otherwise."""
    ids = ids_in_order(sd)
    params = parameters(named)
    if not ids or len(ids) != len(params) or ids != list(range(len(ids))):
        return None
    state = sd.get("state") if type(sd.get("state")) is dict else {}
    for pid, st in state.items():
        if type(pid) is not int or not 0 <= pid < len(params):
            return None
        shape = main_shape(st)
        if shape is not None and tuple(shape) != params[pid][1]:
            return None
    return {str(i): params[i][0] for i in ids}
