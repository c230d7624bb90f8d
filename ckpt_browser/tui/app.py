"""The browser app: layout and wiring. Widgets render; the worker reads headers."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, Tree
from textual.worker import Worker, WorkerState

from ckpt_browser.analysis.modules import build_modules
from ckpt_browser.model import Layout
from ckpt_browser.readers import finish, iter_shards
from ckpt_browser.tui.messages import FilterReady, HeadersRead, LoadFinished, ModulesReady
from ckpt_browser.tui.screens.help import HelpScreen
from ckpt_browser.tui.screens.problems import ProblemsScreen
from ckpt_browser.tui.state import BrowseState
from ckpt_browser.tui.widgets.ckpt_tree import CheckpointTree
from ckpt_browser.tui.widgets.details import Details
from ckpt_browser.tui.widgets.summary import Summary


class BrowserApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "ckpt-browser"
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("m", "toggle_view", "View"),
        Binding("p", "problems", "Problems"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, layout: Layout) -> None:
        super().__init__()
        self.state = BrowseState(layout)
        self._cancel = threading.Event()

    def compose(self) -> ComposeResult:
        yield Summary(self.state, id="summary")
        with Horizontal(id="main"):
            yield CheckpointTree(self.state, id="tree")
            yield Details(self.state, id="details")
        yield Input(placeholder="filter names: substring or glob (Esc clears)", id="filter",
                    select_on_focus=False)  # typed-ahead text must not get selected and replaced
        yield Footer()

    def on_mount(self) -> None:
        self._tree.border_title = "by shard"
        self.query_one(Details).border_title = "details"
        self._rebuild_tree()
        self._summary.refresh_summary()
        self._tree.focus()
        self.load_headers()

    def on_unmount(self) -> None:
        self._cancel.set()

    @property
    def _tree(self) -> CheckpointTree:
        return self.query_one(CheckpointTree)

    @property
    def _summary(self) -> Summary:
        return self.query_one(Summary)

    # -- loading: the worker computes, handlers mutate ---------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="load")
    def load_headers(self) -> None:
        shards = []
        for batch in iter_shards(self.state.layout, self._cancel):
            shards.extend(batch)
            self.post_message(HeadersRead(batch))
        if not self._cancel.is_set():
            ckpt = finish(self.state.layout, shards)
            ckpt.totals  # noqa: B018 - add up here, off the UI thread
            self.post_message(LoadFinished(ckpt))
            self.post_message(ModulesReady(build_modules(ckpt.tensors)))

    @on(HeadersRead)
    def _headers_read(self, message: HeadersRead) -> None:
        self.state.add(message.batch)
        self._tree.refresh_shards([s.name for s in message.batch])
        self._summary.refresh_summary()
        self._refresh_details()

    @on(LoadFinished)
    def _load_finished(self, message: LoadFinished) -> None:
        self.state.checkpoint = message.checkpoint
        if self._tree.mode == "shard":  # the module view waits for ModulesReady
            self._tree.refresh_shards(self.state.layout.files)
        self._summary.refresh_summary()
        self._refresh_details()
        errors = sum(p.severity == "error" for p in message.checkpoint.problems)
        if errors:
            self.notify(f"{errors} error(s) found: press p to list them", title="Damaged",
                        severity="error", timeout=8)

    @on(ModulesReady)
    def _modules_ready(self, message: ModulesReady) -> None:
        self.state.modules = message.modules
        if self._tree.mode == "module":
            self._rebuild_tree()

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.notify(f"Reading stopped: {event.worker.error}", title="Error", severity="error",
                        timeout=15)

    # -- selection ----------------------------------------------------------------------
    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.query_one(Details).show(event.node.data)

    def _rebuild_tree(self) -> None:
        """Rebuild, then make the details follow the cursor's new node."""
        tree = self._tree
        tree.rebuild()
        node = tree.cursor_node
        self.query_one(Details).show(node.data if node is not None else None)

    def _refresh_details(self) -> None:
        details = self.query_one(Details)
        details.show(details.ref)

    # -- filter -------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.screen.add_class("-filtering")
        # Focus now, not via focus()'s call_later: keys typed right after "/" (say "q_proj")
        # must reach the input, or "q" would quit the app.
        self.screen.set_focus(self.query_one("#filter", Input))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.prepare_filter(event.value, self._tree.mode == "module")

    @work(thread=True, exclusive=True, exit_on_error=False, group="filter")
    def prepare_filter(self, pattern: str, modules: bool) -> None:
        """Match 94,000 names (and build a module tree) off the UI thread, so typing
        stays responsive; the newest pattern wins."""
        self.state.prepare(pattern, modules)
        self.post_message(FilterReady(pattern))

    @on(FilterReady)
    def _filter_ready(self, message: FilterReady) -> None:
        if message.pattern != self.query_one("#filter", Input).value:
            return  # typed on since; a newer worker is coming
        self.state.pattern = message.pattern
        self._rebuild_tree()
        self._summary.refresh_summary()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self._tree.focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        self.screen.remove_class("-filtering")
        if field.value:
            field.value = ""  # Input.Changed rebuilds the tree
        self._tree.focus()

    # -- views and screens --------------------------------------------------------------
    def action_toggle_view(self) -> None:
        tree = self._tree
        tree.mode = "module" if tree.mode == "shard" else "shard"
        tree.border_title = f"by {tree.mode}"
        self._rebuild_tree()

    def action_problems(self) -> None:
        self.push_screen(ProblemsScreen(self.state.problems))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Switch view", "Tree by shard or by module (m)", self.action_toggle_view)
        yield SystemCommand("Filter names", "Substring or glob over tensor names (/)",
                            self.action_filter)
        yield SystemCommand("Clear filter", "Show every tensor again (Esc)", self.action_clear_filter)
        yield SystemCommand("Show problems", "Every problem found, by file (p)", self.action_problems)
        yield SystemCommand("Help: keys", "What each key does (?)", self.action_help)


def make_app(layout: Layout) -> BrowserApp:
    """The one factory used by the CLI and by every test."""
    return BrowserApp(layout)
