"""Optimizer state against the weights: which saved tensors are trainable parameters, and,
where the order makes it certain, which parameter each optimizer id stands for.

torch numbers parameters 0..N-1 in the order they were given to the optimizer, group after
group (`param_groups[i]["params"]`), usually `model.parameters()`: a module's own parameters,
then its children's, which is the model's state_dict order without the buffers, a tied
parameter counted once. A name is given only when that is certain:

- the weights were saved in that order: a pickled state dict keeps it; a safetensors header
  sorts its names and a DCP folder flattens them, so neither can say which id is which;
- the number of ids equals the number of trainable-looking weights (floating tensors that are
  not known buffers): a frozen parameter or an unknown buffer makes the count differ;
- every saved moment (exp_avg ...) has its parameter's shape.

With several groups, each built from `model.named_parameters()` filtered (HF Trainer's decay /
no-decay split, nanoGPT's 2-D / rest split), ids run group after group, not in model order. The
groups are then merged back into model order, and a name is given only when the shapes allow
exactly one merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckpt_browser.parts.signatures import fields
from ckpt_browser.standins import TensorRef

BUFFERS = ("running_mean", "running_var", "num_batches_tracked", "n_averaged")
FLOATS = ("F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "C64", "C128")
# per-parameter state that has the parameter's shape (FORMATS.md "Optimizer state")
MAIN_STATE = ("exp_avg", "momentum_buffer", "sum", "square_avg", "exp_avg_sq", "state1",
              "exp_inf", "ax", "prev", "acc_delta", "max_exp_avg_sq")
MAX_MERGES = 20_000  # partial merges of the groups followed at once; more is "uncertain"


@dataclass(frozen=True)
class IdNames:
    """What the optimizer's ids stand for. `names` maps str(id) to a parameter name and is
    empty unless certain; `why` says how (certain) or why not, in one sentence."""

    names: dict[str, str] = field(default_factory=dict)
    why: str = ""
    by: str = ""  # "order", "merged groups", "names saved" or "" (ids only)

    @property
    def certain(self) -> bool:
        return bool(self.names) or self.by == "names saved"


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
            return tuple(v.shape)
    return None


def groups_of(sd: dict) -> list[list] | None:
    groups = []
    for g in sd.get("param_groups") or []:
        params = fields(g).get("params")
        if not isinstance(params, (list, tuple)):
            return None
        groups.append(list(params))
    return groups


def ids_in_order(sd: dict) -> list | None:
    groups = groups_of(sd)
    return None if groups is None else [i for g in groups for i in g]


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def name_ids(sd: dict, named, ordered: bool = True, where: str = "") -> IdNames:
    """The parameter name of each optimizer id, when certain, and why or why not.
    `named`: (name, tensor) of the checkpoint's weights; `ordered`: whether they are in the
    order they were saved from the model (a pickled state dict), not sorted (safetensors)."""
    raw = sd.get("state")
    state: dict = raw if type(raw) is dict else {}
    groups = groups_of(sd) or []
    ids = [i for g in groups for i in g]
    if any(type(k) is str for k in (*state, *ids)):
        return IdNames(by="names saved", why="the optimizer state is keyed by parameter name.")
    if not ids or any(type(i) is not int for i in ids) or ids != list(range(len(ids))):
        return IdNames(why="ids only: the param groups do not list the ids 0..N-1.")
    params = parameters(named)
    if not params:
        return IdNames(why="ids only: no model weights beside the optimizer to name them by.")
    if not ordered:
        return IdNames(why=f"ids only: the weights are in {where or 'files'} that keep names "
                       "sorted, not in the model's parameter order, so no id can be named.")
    if len(ids) != len(params):
        counts = f"{_plural(len(ids), 'id')}, {_plural(len(params), 'weights tensor')}"
        return IdNames(why=f"ids only: {counts}; buffers or frozen params make the mapping "
                       "uncertain.")
    if any(type(pid) is not int or not 0 <= pid < len(ids) for pid in state):
        return IdNames(why="ids only: the state holds ids that no param group lists.")
    shapes = {pid: main_shape(st) for pid, st in state.items()}
    if len(groups) == 1:
        if all(s is None or s == params[pid][1] for pid, s in shapes.items()):
            return IdNames({str(i): params[i][0] for i in ids}, "named by order: ids follow "
                           "the model's parameters, and every moment has its parameter's "
                           "shape.", "order")
        return IdNames(why="ids only: the moments' shapes do not follow the weights' order, "
                       "so no id can be named.")
    # several groups: their concatenation is one merge of many; it counts only if unique
    order = _merge(groups, shapes, [s for _, s in params])
    if order is not None:
        return IdNames({str(pid): params[k][0] for k, pid in enumerate(order)},
                       f"named by merging the {len(groups)} param groups back into model "
                       "order: the shapes allow one way only.", "merged groups")
    return IdNames(why=f"ids only: the shapes allow no single way to merge the {len(groups)} "
                   "param groups back into the weights' order, so no id can be named.")


def _merge(groups: list[list], shapes: dict, want: list) -> list | None:
    """The one interleaving of the groups (each kept in its order) whose moments' shapes are
    the weights' shapes in order; None when there is none, several, or too many to follow.
    An id without state fits any shape, which usually makes the merge ambiguous."""
    start = (0,) * len(groups)
    frontier: dict[tuple[int, ...], int] = {start: 1}  # place in each group -> ways (max 2)
    steps: list[dict[tuple[int, ...], tuple[tuple[int, ...], int]]] = []  # -> (from, id)
    for target in want:
        nxt: dict[tuple[int, ...], int] = {}
        back: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}
        for pos, ways in frontier.items():
            for g, ids in enumerate(groups):
                if pos[g] >= len(ids):
                    continue
                pid = ids[pos[g]]
                shape = shapes.get(pid)
                if shape is not None and shape != target:
                    continue
                key = pos[:g] + (pos[g] + 1,) + pos[g + 1:]
                nxt[key] = min(2, nxt.get(key, 0) + ways)
                back.setdefault(key, (pos, pid))
        if not nxt or len(nxt) > MAX_MERGES:
            return None
        frontier = nxt
        steps.append(back)
    (end, ways), = frontier.items()
    if ways != 1:
        return None
    order = []
    for back in reversed(steps):
        end, pid = back[end]
        order.append(pid)
    return order[::-1]


def param_names(sd: dict, named, ordered: bool = True) -> dict[str, str] | None:
    """str(optimizer id) -> parameter name, when certain; None otherwise."""
    return name_ids(sd, named, ordered).names or None
