"""What a tree node stands for; the details pane renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.model import Component, TensorInfo


@dataclass(frozen=True, eq=False)
class Ref:
    # "root" | "shard" | "tensor" | "module" | "component" | "file" | "value" | "dcp-entry" | "more"
    kind: str
    shard: str | None = None
    tensor: TensorInfo | str | None = None
    module: ModuleNode | None = None
    component: Component | None = None
    file: Any = None  # PickleFile | DcpCheckpoint | str (a file no reader parsed)
    path: str = ""  # dotted path of a value inside its file
    value: Any = None
