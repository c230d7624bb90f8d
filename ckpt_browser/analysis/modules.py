"""Dotted tensor names as a module hierarchy with subtotals.

A 94,000-tensor checkpoint makes ~60,000 module nodes, so subtotals are added up
only for the nodes someone looks at (a tree shows a node's label when its parent opens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ckpt_browser.model import TensorInfo, Totals, natural_key


@dataclass(eq=False)
class ModuleNode:
    name: str  # last component, e.g. "q_proj"
    path: str  # full dotted prefix, e.g. "model.layers.0.self_attn.q_proj"
    children: dict[str, ModuleNode] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)  # tensors directly here

    @cached_property
    def totals(self) -> Totals:
        return Totals.of(self.walk())

    def walk(self):
        """Every tensor at or below this node."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield from node.tensors
            stack.extend(node.children.values())

    def sorted_children(self) -> list[ModuleNode]:
        return sorted(self.children.values(), key=lambda m: natural_key(m.name))

    def sorted_tensors(self) -> list[TensorInfo]:
        return sorted(self.tensors, key=lambda t: natural_key(t.name))


def build_modules(tensors) -> ModuleNode:
    root = ModuleNode("", "")
    for t in tensors:
        node = root
        for part in t.name.split(".")[:-1]:
            child = node.children.get(part)
            if child is None:
                path = f"{node.path}.{part}" if node.path else part
                child = node.children[part] = ModuleNode(part, path)
            node = child
        node.tensors.append(t)
    return root


def leaf_name(tensor_name: str) -> str:
    return tensor_name.rsplit(".", 1)[-1]
