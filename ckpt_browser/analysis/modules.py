"""Dotted tensor names as a module hierarchy with subtotals."""

from __future__ import annotations

from dataclasses import dataclass, field

from ckpt_browser.model import TensorInfo, Totals, natural_key


@dataclass
class ModuleNode:
    name: str  # last component, e.g. "q_proj"
    path: str  # full dotted prefix, e.g. "model.layers.0.self_attn.q_proj"
    children: dict[str, ModuleNode] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)  # tensors directly here
    totals: Totals = field(default_factory=Totals)

    def sorted_children(self) -> list[ModuleNode]:
        return sorted(self.children.values(), key=lambda m: natural_key(m.name))

    def sorted_tensors(self) -> list[TensorInfo]:
        return sorted(self.tensors, key=lambda t: natural_key(t.name))


def build_modules(tensors) -> ModuleNode:
    """One pass to place tensors, one pass to add up subtotals."""
    root = ModuleNode("", "")
    for t in tensors:
        node = root
        parts = t.name.split(".")
        for part in parts[:-1]:
            child = node.children.get(part)
            if child is None:
                path = f"{node.path}.{part}" if node.path else part
                child = node.children[part] = ModuleNode(part, path)
            node = child
        node.tensors.append(t)
    _add_up(root)
    return root


def _add_up(node: ModuleNode) -> dict[str, list[int]]:
    rows: dict[str, list[int]] = {}
    for t in node.tensors:
        row = rows.setdefault(t.dtype, [0, 0, 0])
        row[0] += 1
        row[1] += t.numel
        row[2] += t.nbytes
    for child in node.children.values():
        for dtype, (n, p, b) in _add_up(child).items():
            row = rows.setdefault(dtype, [0, 0, 0])
            row[0] += n
            row[1] += p
            row[2] += b
    node.totals = Totals._from_rows(rows)
    return rows


def leaf_name(tensor_name: str) -> str:
    return tensor_name.rsplit(".", 1)[-1]


