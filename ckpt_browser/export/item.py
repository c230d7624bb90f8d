"""What an export writes: one output tensor and where its bytes come from."""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_browser.values.locate import TensorLoc


@dataclass(frozen=True, slots=True)
class Item:
    name: str  # the output's tensor name (the model's state_dict key)
    loc: TensorLoc  # its bytes, in row-major order of `shape` (a ZeRO partition's loc is 1-D)
    shape: tuple[int, ...]  # the output's shape
    dtype: str  # the output's dtype (safetensors spelling); another than loc.dtype: a cast
    same_as: str | None = None  # tied: one storage with this earlier item, stored once
