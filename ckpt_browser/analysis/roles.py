"""Which component a tensor belongs to (weights, optimizer ...): decided by content when the
checkpoint was opened (parts.tag); this answers for one tensor."""

from __future__ import annotations

from ckpt_browser.model import TrainingState


def component_of(training: TrainingState | None, file: str, path: str) -> str | None:
    """The component holding the tensor at `path` in `file` ("other" when none does)."""
    if training is None:
        return None
    kind = training.kinds.get(file, {}).get(path)
    if kind is not None:
        return kind
    return "weights" if file.endswith(".safetensors") else "other"
