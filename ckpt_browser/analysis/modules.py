"""Dotted tensor names as a module hierarchy with subtotals.

A 94,000-tensor checkpoint makes ~60,000 module nodes, so subtotals are added up
only for the nodes someone looks at (a tree shows a node's label when its parent opens).
A node keeps its own name and its parent, not its dotted path: a name of 20,000 dots made
20,000 nodes whose paths held 400 MB. Names are split into at most MAX_DEPTH levels (real
ones nest under 20); the dots past that stay in the tensor's own name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ckpt_browser.model import TensorInfo, Totals, natural_key

MAX_DEPTH = 32  # module levels one tensor name makes


@dataclass(eq=False)
class ModuleNode:
    name: str  # last component, e.g. "q_proj"
    parent: ModuleNode | None = field(default=None, repr=False)  # None: the root
    children: dict[str, ModuleNode] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)  # tensors directly here

    @property
    def path(self) -> str:
        """The full dotted prefix, e.g. "model.layers.0.self_attn.q_proj" ("" at the root)."""
        parts, node = [], self
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return ".".join(reversed(parts))

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
    root = ModuleNode("")
    for t in tensors:
        node = root
        for part in t.name.split(".", MAX_DEPTH)[:-1]:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = ModuleNode(part, node)
            node = child
        node.tensors.append(t)
    return root


def leaf_name(tensor_name: str) -> str:
    """The name under its module: after the last dot, or the MAX_DEPTH-th."""
    return tensor_name.rsplit(".", 1)[-1] if tensor_name.count(".") <= MAX_DEPTH else \
        tensor_name.split(".", MAX_DEPTH)[-1]
