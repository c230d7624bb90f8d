"""The checkpoint tree, by file or by module. Children are made only on expand."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.widgets import Input, Tree

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.tui.browse import training_tree
from ckpt_browser.tui.browse.labels import module_label, shard_label, tensor_label
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref


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

    # -- building ----------------------------------------------------------
    def rebuild(self) -> None:
        self.clear()
        self._shard_nodes = {}
        if self.mode == "file":
            for name in self.model.layout.files:
                if not self.model.pattern or self.model.tensors_of(name):
                    self._shard_nodes[name] = self.root.add(self._shard_text(name),
                                                            data=Ref("shard", name))
        elif self.mode == "module":
            self._add_module_children(self.root, self.model.module_tree())
        elif self.model.training is None:
            failure = self.model.training_failure
            text = Text(f"the training state could not be read: {failure}", style="red") \
                if failure else Text("reading the training state…", style="dim")
            self.root.add_leaf(text, data=Ref("more"))
        else:
            self._add_items(self.root, training_tree.component_items(self.model.training))
        self.root.expand()
        self.cursor_line = 0

    def _shard_text(self, name: str):
        shard = self.model.shards.get(name)
        shown = len(self.model.tensors_of(name)) if self.model.pattern else None
        if shard is None:
            return shard_label(name, self.model.shard_state(name), 0, None, shown)
        nbytes = shard.totals.bytes if shard.tensors else shard.size
        return shard_label(name, self.model.shard_state(name), len(shard.tensors), nbytes,
                           shown, shard.format)

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
            if node.is_expanded:
                node.remove_children()
                self._fill(node)

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
        """Keys reach the app's bindings only after the tree has queued every key typed so
        far, so "/q_proj" typed in one burst would open the filter after "q" had quit.
        Open the filter here, in order, and pass the keys behind "/" on to it."""
        focused = self.screen.focused
        if focused is self and event.key == "slash":
            self.screen.action_filter()
        elif isinstance(focused, Input) and event.is_printable:
            focused.insert_text_at_cursor(event.character)
        else:
            return
        event.stop()
        event.prevent_default()

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

    def _move_when_laid_out(self, node) -> None:
        # A node's line is known only after the tree re-lays out (just rebuilt or expanded).
        self.call_after_refresh(self.move_cursor, node)

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
