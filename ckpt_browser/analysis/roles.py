"""Which component a tensor in a state file belongs to (weights, optimizer ...).

Files that hold one component (optimizer.pt) say it by themselves; files that mix
several (a Lightning .ckpt, DeepSpeed model states, a torchtitan DCP folder) are split
by the dotted path of the tensor, using the keys the catalog documents.
"""

from __future__ import annotations

from ckpt_browser.model import TrainingState

# (path prefix, component), first match wins; checked only for files in several components.
_PREFIXES = (
    ("state_dict.", "weights"), ("optimizer_states.", "optimizer"),  # Lightning .ckpt
    ("lr_schedulers.", "scheduler"), ("loops.", "progress"),
    ("module.", "weights"), ("lr_scheduler.", "scheduler"),  # DeepSpeed model states
    ("model.", "weights"), ("model0.", "weights"), ("optimizer.", "optimizer"),  # Megatron, HF FSDP
    ("opt_param_scheduler.", "scheduler"), ("rng_state.", "rng"),
    ("dataloader.", "data"), ("train_state.", "progress"),  # torchtitan
)


def component_of(training: TrainingState | None, file: str, path: str) -> str | None:
    """The component holding the tensor at `path` in `file` ("other" when none does)."""
    if training is None:
        return None
    owners = [c.kind for c in training.components.values() if file in c.files]
    if len(owners) == 1:
        return owners[0]
    for prefix, kind in _PREFIXES:
        if path.startswith(prefix):
            return kind
    if file.endswith(".metadata"):  # torchtitan keeps model FQNs at the top level of its DCP
        return "weights"
    for kind in ("optimizer", "weights"):  # a ZeRO optimizer file also holds the loss scaler
        if kind in owners:
            return kind
    return "other"  # e.g. a Lightning callback's tensor: part of no component
