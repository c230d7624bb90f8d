"""The checkpoint tree, by file or by module. Children are made only on expand."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.widgets import Tree

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.report.styles import ALERT
from ckpt_browser.tui.browse import training_tree
from ckpt_browser.tui.browse.labels import (
    column_widths,
    module_label,
    shard_label,
    tensor_cells,
    tensor_label,
    tensor_row,
)
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.common.vtable import type_ahead


def node_key(ref: Ref | None) -> str | None:
    """What names a node among its siblings, the same before and after a filter rebuilds the
    tree: a file's name, a module's name, a tensor's full name."""
    if ref is None:
        return None
    if ref.kind == "shard":
        return ref.shard
    if ref.kind == "module" and ref.module is not None:
        return ref.module.name
    if ref.kind == "tensor" and ref.tensor is not None:
        return ref.tensor if isinstance(ref.tensor, str) else ref.tensor.name
    return None


def copy_text(ref: Ref | None) -> str:
    """What `y` copies: a tensor's full name, a module's dotted path, a file's name."""
    if ref is None:
        return ""
    if ref.kind == "tensor" and ref.tensor is not None:
        return ref.tensor if isinstance(ref.tensor, str) else ref.tensor.name
    if ref.kind == "module" and ref.module is not None:
        return ref.module.path
    if ref.kind == "shard":
        return ref.shard or ""
    if ref.kind == "file" and isinstance(ref.file, str):
        return ref.file
    return ref.path or ""


class CheckpointTree(Tree[Ref]):
    BINDINGS = [Binding("right", "expand_node", "Expand", show=False),
                Binding("left", "collapse_node", "Collapse", show=False)]

    def __init__(self, model: BrowseModel, **kwargs) -> None:
        super().__init__("checkpoint", data=Ref("root"), **kwargs)
        self.model = model
        self.mode = "file"
        self.show_root = False
        self.guide_depth = 2
        self._shard_nodes: dict = {}
        self._widths: dict[int, tuple[int, int, int, int]] = {}  # parent node id -> column widths
        self._mixed: dict[int, bool] = {}  # parent node id -> has children that expand and not
        self._heading = None  # the node a move after the next layout goes to (heading_to)

    # -- tensor rows as columns ------------------------------------------------------------
    def render_label(self, node, base_style, style):
        text = self._render_label(node, base_style, style)
        if self._indent(node):
            return Text.assemble("  ", text)  # in line with its siblings' names after "▶ "
        return text

    def _indent(self, node) -> int:
        """2 for a row that cannot expand among siblings that can (their names start after
        "▶ "), else 0; found once per parent."""
        if node.allow_expand or node.parent is None:
            return 0
        key = node.parent._id
        mixed = self._mixed.get(key)
        if mixed is None:
            mixed = self._mixed[key] = any(c.allow_expand for c in node.parent.children)
        return 2 if mixed else 0

    def _render_label(self, node, base_style, style):
        ref = node.data
        if ref is not None and ref.kind in ("shard", "module"):
            return self._fit_label(node, ref, super().render_label(node, base_style, style),
                                   style)
        if ref is None or ref.kind != "tensor" or ref.tensor is None or node.allow_expand:
            return super().render_label(node, base_style, style)
        short = self.mode == "module"
        text = tensor_row(tensor_cells(ref.tensor, short), self._sibling_widths(node, short),
                          self._label_room(node), self._tail_style(node))
        text.stylize(style)
        return text

    def _tail_style(self, node) -> str:
        """Counts and columns after a name are dim, but not on the cursor's row: dim text on
        the cursor's colour fell to a contrast of 2.5."""
        return "" if node is self.cursor_node else "dim"

    def _fit_label(self, node, ref: Ref, text: Text, style) -> Text:
        """A file's or module's row in the pane's width: its name whole, and the counts after
        it as far as they fit (the stored label is the whole text)."""
        room = self._label_room(node)
        tail = self._tail_style(node)
        if text.cell_len <= room and tail:
            return text
        icon = text.cell_len - node.label.cell_len  # the expand arrow Tree puts first
        if ref.kind == "shard" and ref.shard is not None:
            label = self._shard_text(ref.shard, room - icon, tail)
        elif ref.module is not None:
            label = module_label(ref.module, room - icon, tail)
        else:
            return text
        label.stylize(style)
        return Text.assemble(text[:icon], label)

    def get_label_width(self, node) -> int:
        ref = node.data
        if ref is not None and (ref.kind in ("shard", "module") or
                                ref.kind == "tensor" and not node.allow_expand):
            # fitted to the pane (render_label): never a horizontal scroll, and no label
            # drawn to be measured (the tree measures every row: 100,000 files took minutes)
            return self._label_room(node)
        return super().get_label_width(node)

    def _label_room(self, node) -> int:
        """Cells left for a label after the guides, keeping the scrollbar's gutter free so a
        scrollbar appearing later cannot cut the size column."""
        depth, parent = 0, node.parent
        while parent is not None and parent is not self.root:
            depth, parent = depth + 1, parent.parent
        gutter = self.styles.scrollbar_size_vertical
        return max(self.size.width - gutter - depth * self.guide_depth - self._indent(node), 20)

    def _sibling_widths(self, node, short: bool) -> tuple[int, int, int, int]:
        """Columns line up among a node's tensors; measured once per parent."""
        parent = node.parent
        key = parent._id  # unique until clear(), which rebuild() pairs with emptying this
        widths = self._widths.get(key)
        if widths is None:
            rows = [tensor_cells(c.data.tensor, short) for c in parent.children
                    if c.data is not None and c.data.kind == "tensor" and c.data.tensor is not None]
            widths = self._widths[key] = column_widths(rows)
        return widths

    # -- building ----------------------------------------------------------
    def rebuild(self) -> None:
        self.clear()
        self._shard_nodes = {}
        self._widths, self._mixed = {}, {}
        if self.mode == "file":
            for name in self.model.layout.files:
                if not self.model.pattern or self.model.tensors_of(name):
                    self._shard_nodes[name] = self.root.add(self._shard_text(name),
                                                            data=Ref("shard", name))
        elif self.mode == "module":
            self._add_module_children(self.root, self.model.module_tree())
        elif self.model.training is None:
            failure = self.model.training_failure
            text = Text(f"the training state could not be read: {failure}", style=ALERT) \
                if failure else Text("reading the training state…", style="dim")
            self.root.add_leaf(text, data=Ref("more"))
        else:
            self._add_items(self.root, training_tree.component_items(self.model.training))
        self.root.expand()
        self.cursor_line = 0

    def _shard_text(self, name: str, width: int | None = None, tail: str = "dim"):
        shard = self.model.shards.get(name)
        shown = len(self.model.tensors_of(name)) if self.model.pattern else None
        if shard is None:
            return shard_label(name, self.model.shard_state(name), 0, None, shown, width=width,
                               tail=tail)
        nbytes = shard.totals.bytes if shard.tensors else shard.size
        return shard_label(name, self.model.shard_state(name), len(shard.tensors), nbytes,
                           shown, shard.format, width, tail)

    def relabel(self, names) -> None:
        """Say a file's new state (values found suspect) without refilling it: the cursor
        may be on one of its tensors."""
        for name in names:
            node = self._shard_nodes.get(name)
            if node is not None:
                node.set_label(self._shard_text(name))

    def refresh_shards(self, names) -> None:
        """New files were read: relabel them and refill them if open; a file that holds no
        tensors (JSON, a text file) has nothing to open."""
        for name in names:
            node = self._shard_nodes.get(name)
            if node is None:
                continue
            node.set_label(self._shard_text(name))
            shard = self.model.shards.get(name)
            if shard is not None and not shard.tensors and not self.model.tensors_of(name):
                node.allow_expand = False
                self._mixed.pop(self.root._id, None)
            if node.is_expanded:
                node.remove_children()
                self._widths.pop(node._id, None)
                self._mixed.pop(node._id, None)
                self._fill(node)

    def open_a_lone_file(self) -> None:
        """A checkpoint of one file holding tensors (a lone shard, one model.safetensors) opens
        with its tensors shown: there is nothing else to choose."""
        if self.mode != "file" or len(self._shard_nodes) != 1:
            return
        node = next(iter(self._shard_nodes.values()))
        if node.allow_expand and not node.is_expanded:
            self._ensure_children(node)
            node.expand()

    def _add_module_children(self, parent, module: ModuleNode) -> None:
        for child in module.sorted_children():
            parent.add(module_label(child), data=Ref("module", module=child))
        for t in module.sorted_tensors():
            parent.add_leaf(tensor_label(t, short=True), data=Ref("tensor", t.file, t))

    def _add_items(self, parent, items) -> None:
        for item in items:
            if item.expandable:
                parent.add(item.label, data=item.ref)
            else:
                parent.add_leaf(item.label, data=item.ref)

    def _fill(self, node) -> None:
        ref = node.data
        if self.mode == "state" and self.model.training is not None:
            self._add_items(node, training_tree.children(self.model.training, ref,
                                                      self.model.pattern))
        elif ref.kind == "shard":
            for t in self.model.tensors_of(ref.shard):
                node.add_leaf(tensor_label(t), data=Ref("tensor", ref.shard, t))
        elif ref.kind == "module":
            self._add_module_children(node, ref.module)

    def _ensure_children(self, node) -> None:
        if node is not self.root and not node.children:
            self._fill(node)

    def _toggle_node(self, node) -> None:
        # Fill before expanding, not on NodeExpanded: keys typed ahead (Right, Down, Down)
        # would otherwise move the cursor before the children exist.
        self._ensure_children(node)
        super()._toggle_node(node)

    @on(Tree.NodeExpanded)
    def _lazy_children(self, event: Tree.NodeExpanded) -> None:
        self._ensure_children(event.node)  # expansions that bypass _toggle_node

    def on_key(self, event: events.Key) -> None:
        type_ahead(self, event, "filter")

    def reveal_file(self, name: str) -> bool:
        """Put the cursor on the node of a file (a shard, or a state file under its component)."""
        if self.mode == "file" and name in self._shard_nodes:
            self._move_when_laid_out(self._shard_nodes[name])
            return True
        if self.mode != "state":
            return False
        for comp in self.root.children:
            c = comp.data.component
            if c is None or name not in c.files:
                continue
            self._ensure_children(comp)
            comp.expand()
            target = next((n for n in comp.children
                           if name in (training_tree.file_name(n.data.file), n.data.file)
                           or training_tree.holds(n.data.file, name)), comp)
            self._move_when_laid_out(target)
            return True
        return False

    def path_of(self, node) -> tuple[str, ...]:
        """The keys from the top node down to `node` (see `node_key`)."""
        keys: list[str] = []
        while node is not None and node is not self.root:
            key = node_key(node.data)
            if key is None:
                return ()
            keys.append(key)
            node = node.parent
        return tuple(reversed(keys))

    def reveal_path(self, keys: tuple[str, ...], move: bool = True):
        """Open the nodes down to the one at `keys` (or as far as they still exist) and put
        the cursor there; returns the node reached, or None."""
        node = self.root
        for key in keys:
            if node is not self.root:
                self._ensure_children(node)
                node.expand()
            child = next((c for c in node.children if node_key(c.data) == key), None)
            if child is None:
                break
            node = child
        if node is self.root:
            return None
        if move:
            self._move_when_laid_out(node)
        return node

    def _move_when_laid_out(self, node) -> None:
        # A node's line is known only after the tree re-lays out (just rebuilt or expanded);
        # until then `heading_to` says where the cursor is going
        self._heading = node

        def move() -> None:
            if self._heading is node:
                self._heading = None
            self.move_cursor(node)

        self.call_after_refresh(move)

    @property
    def heading_to(self):
        """The node the cursor is about to move to, else the one it is on."""
        return self._heading if self._heading is not None else self.cursor_node

    # -- actions -------------------------------------------------------------
    def action_expand_node(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            self._ensure_children(node)
            node.expand()

    def action_collapse_node(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)
