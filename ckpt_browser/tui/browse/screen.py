"""The browse screen: layout and wiring. Widgets render; the workers read headers, then the
training state."""

from __future__ import annotations

import threading

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, Tree
from textual.worker import Worker

from ckpt_browser.analysis.modules import build_modules
from ckpt_browser.analysis.opened import iter_tagged, open_path
from ckpt_browser.model import Layout
from ckpt_browser.readers import finish
from ckpt_browser.tui.browse.details import Details
from ckpt_browser.tui.browse.export_action import ExportAction
from ckpt_browser.tui.browse.messages import (
    FilterReady,
    HeadersRead,
    LoadFinished,
    ModulesReady,
    TrainingRead,
)
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.resume import READING, ResumeScreen
from ckpt_browser.tui.browse.search import Search
from ckpt_browser.tui.browse.summary import Summary, matched_sums
from ckpt_browser.tui.browse.table import TableView, TensorTable
from ckpt_browser.tui.browse.timeline import TimelineScreen
from ckpt_browser.tui.browse.tree import CheckpointTree
from ckpt_browser.tui.browse.values_check import ProgressLine, ValuesCheck
from ckpt_browser.tui.common.filter_input import FilterInput
from ckpt_browser.tui.common.help import HelpScreen
from ckpt_browser.tui.common.modals import PathPrompt
from ckpt_browser.tui.common.problems import ProblemsScreen, notice
from ckpt_browser.tui.common.workers import ForwardsWorkerErrors, current_load
from ckpt_browser.tui.keys import BROWSE, gated_bindings

# The footer's keys, by the focused pane: 80 columns hold these. The rest are under
# "? All keys" and ctrl+p; from WIDE columns the footer adds the EXTRA ones.
FOOTER = {
    "tree": ("Filter", "Values", "Table", "View", "State", "Resume", "All keys", "Quit"),
    "table": ("Filter", "Sort", "Values", "Tree", "Resume", "All keys", "Quit"),
    "details": ("Filter", "Values", "Resume", "All keys", "Quit"),
    "filter": ("Clear",),  # letters type into the filter there
}
WIDE, EXTRA = 120, ("Problems", "Quiz", "Diff", "Export")


class BrowseScreen(Search, TableView, ValuesCheck, ExportAction, ForwardsWorkerErrors,
                   Screen):
    TITLE = "ckpt-browser"
    KEYS = BROWSE  # the footer, the palette and the help window come from it
    BINDINGS = gated_bindings(KEYS)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # -narrow: details below

    def __init__(self, layout: Layout, timeline: tuple[str, list] | None = None) -> None:
        super().__init__()
        self.model = BrowseModel(layout)
        self.timeline = timeline  # (folder, entries) when opened on a folder of checkpoints
        self._cancel = threading.Event()
        self._keep: tuple[str, ...] = ()  # where the cursor was when Esc cleared the filter
        self.queued_steps: list[int] = []  # n / N typed before the filter's matches were in

    def compose(self) -> ComposeResult:
        yield Summary(self.model, id="summary")
        with Horizontal(id="main"):
            yield CheckpointTree(self.model, id="tree")
            yield TensorTable(id="table")  # l: instead of the tree, the details below it
            yield Details(self.model, id="details")
        yield ProgressLine(id="check-bar")  # `!`: how far checking every tensor's values is
        yield ProgressLine(id="export-bar")  # `e`: how far the export is
        yield FilterInput(lambda: self.main_pane, id="filter")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(Details).border_title = "details"
        self._tree.focus()
        self._start()
        if self.picker_first:
            self.action_timeline()

    @property
    def picker_first(self) -> bool:
        """A folder of several checkpoints opens with their list on top; a folder of one
        opens that one (there is nothing to pick)."""
        return bool(self.timeline) and len(self.timeline[1]) > 1

    def _start(self) -> None:
        """Show the current state's skeleton and start reading it."""
        self._set_mode("file")
        self._summary.refresh_summary()
        self.load_headers()  # the training state is read once the headers are in
        self.reload_table()

    def open_checkpoint(self, path: str) -> None:
        """Switch to another checkpoint (from the timeline); stale workers are ignored."""
        from ckpt_browser.errors import CheckpointError

        try:
            layout = open_path(path).layout
        except CheckpointError as e:
            self.notify(str(e), title="Cannot open", severity="error", timeout=10)
            return
        self._cancel.set()
        self._cancel = threading.Event()
        self.cancel_check()
        self.model = BrowseModel(layout)
        for widget in (self._tree, self._summary, self.query_one(Details)):
            widget.model = self.model
        self.query_one("#filter", Input).value = ""
        self._start()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A footer entry shows where footer_labels says (elsewhere its key falls to its plain
        binding). "Cancel values" is offered only while values are read. "Checkpoints" stays
        enabled on a single checkpoint, so `c` answers that there is no folder instead of
        doing nothing (a False here would swallow the key before action_timeline could)."""
        if action == "footer":
            return parameters[1] in self.footer_labels()
        if action == "cancel_values":
            return self.query_one(Details).values.running
        return True

    async def action_footer(self, action: str, label: str) -> None:
        await self.run_action(action)

    def footer_labels(self) -> tuple[str, ...]:
        """The keys the footer shows now: the focused pane's; with a filter, n and N."""
        focused = self.focused
        where = "filter" if isinstance(focused, Input) else \
            "table" if focused is self.table else \
            "details" if self.query_one(Details).has_focus_within else "tree"
        labels = FOOTER[where]
        if self.model.pattern and where != "filter":
            labels = ("Filter", "Next", *(x for x in labels if x not in ("Filter", "State")))
        if self.size.width >= WIDE:
            labels += EXTRA + (("Checkpoints",) if self.timeline else ())
        return labels

    def on_resize(self) -> None:
        self.refresh_bindings()  # a wider footer shows more keys

    def action_timeline(self, compare: bool = False) -> None:
        if not self.timeline:
            self.notify("This is a single checkpoint, not a folder of them.", timeout=4)
            return
        folder, entries = self.timeline

        def chosen(choice: tuple[str, str] | None) -> None:
            if choice is None:
                return
            what, path = choice
            if what == "diff" or compare:
                self.compare_with(path)
            elif path != self.model.layout.path:
                self.open_checkpoint(path)

        self.app.push_screen(TimelineScreen(folder, entries, compare=compare), chosen)

    def action_compare(self) -> None:
        """`d`: diff this checkpoint against another, from the folder's list or a typed path."""
        if self.timeline:
            self.action_timeline(compare=True)
            return

        def typed(path: str | None) -> None:
            if path:
                self.compare_with(path)

        self.app.push_screen(PathPrompt("Diff against which checkpoint? (a path)"), typed)

    def compare_with(self, path: str) -> None:
        from ckpt_browser.tui.diff.screen import DiffScreen

        self.app.push_screen(DiffScreen(self.model.layout.path, path))

    def on_unmount(self) -> None:
        self._cancel.set()
        self.cancel_check()
        self.cancel_export()

    @property
    def _tree(self) -> CheckpointTree:
        return self.query_one(CheckpointTree)

    @property
    def _summary(self) -> Summary:
        return self.query_one(Summary)

    # -- loading: the worker computes, handlers mutate ---------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="load")
    def load_headers(self) -> None:
        model, cancel = self.model, self._cancel
        files = []
        # each batch redraws the summary, tree and problems from all read so far: at most
        # ~64 of them, so 10,000 files cost 64 redraws, not 1,250 (quadratic)
        size = max(8, len(model.layout.files) // 64)
        for batch in iter_tagged(model.layout, cancel, size):
            files.extend(batch)
            self.post_message(HeadersRead(model, batch))
        if not cancel.is_set():
            ckpt = finish(model.layout, files)
            ckpt.totals  # noqa: B018 - add up here, off the UI thread
            ckpt.component_totals  # noqa: B018
            self.post_message(LoadFinished(model, ckpt))
            self.post_message(ModulesReady(model, build_modules(ckpt.weights)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="training")
    def load_training(self) -> None:
        """Optimizer, scheduler, RNG ... read after the weights: a failure here leaves
        the weights browsable."""
        from ckpt_browser.analysis.components import training_state
        from ckpt_browser.analysis.resume import report_from

        model = self.model
        training = training_state(model.checkpoint)
        resume = report_from(model.checkpoint, training)
        self.post_message(TrainingRead(model, training, resume))

    @on(HeadersRead)
    @current_load
    def _headers_read(self, message: HeadersRead) -> None:
        self.model.add(message.batch)
        self._tree.refresh_shards([s.name for s in message.batch])
        self._summary.refresh_summary()
        self._refresh_details()
        self._refresh_problems()

    @on(LoadFinished)
    @current_load
    async def _load_finished(self, message: LoadFinished) -> None:
        self.model.checkpoint = message.checkpoint
        self.load_training()
        if self._tree.mode == "file":  # the module view waits for ModulesReady
            self._tree.refresh_shards(self.model.layout.files)
            self._tree.open_a_lone_file()
        self._summary.refresh_summary()
        self._refresh_details()
        self.reload_table()
        self._report_errors()
        await self._refresh_windows()

    def _report_errors(self) -> None:
        errors = sum(p.severity == "error" for p in self.model.problems)
        if errors > self.model.errors_told:  # the training state often repeats a file's error
            self.model.errors_told = errors
            title, text = notice(self.model.problems)
            self.notify(text, title=title, severity="error", timeout=8)

    @on(TrainingRead)
    @current_load
    async def _training_read(self, message: TrainingRead) -> None:
        self.model.training = message.training
        self.model.resume = message.resume
        if self._tree.mode == "state":
            self._rebuild_tree()
        if message.training.problems and self.model.loaded:
            self._report_errors()
        self._summary.refresh_summary()
        await self._refresh_windows()

    @on(ModulesReady)
    @current_load
    def _modules_ready(self, message: ModulesReady) -> None:
        self.model.modules = message.modules
        if self._tree.mode == "module":
            self._rebuild_tree()

    @property
    def load(self) -> BrowseModel:
        """The token of the load on screen: workers' messages for another are stale."""
        return self.model

    def recover(self, worker: Worker, why: str) -> None:
        """A reader that raised (a bug, not a bad file): say so where "reading…" was, and
        keep what was read browsable."""
        self.model.failed[worker.group] = why
        if worker.group == "load":
            self._tree.refresh_shards(self.model.layout.files)
        if self._tree.mode == "state":
            self._rebuild_tree()
        self._summary.refresh_summary()
        self.call_later(self._refresh_windows)

    # -- selection ----------------------------------------------------------------------
    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        if not self.table_shown:  # the table's cursor has the details then
            self.query_one(Details).show(event.node.data)

    def _rebuild_tree(self) -> None:
        """Rebuild, then make the details follow the cursor's new node."""
        tree = self._tree
        tree.rebuild()
        self.query_one(Details).show(self.cursor_ref())

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
        self.model.prepare(pattern, modules)
        self.post_message(FilterReady(pattern))

    @on(FilterReady)
    def _filter_ready(self, message: FilterReady) -> None:
        if message.pattern != self.query_one("#filter", Input).value:
            return  # typed on since; a newer worker is coming
        self.model.pattern = message.pattern
        self._rebuild_tree()
        if message.pattern:
            self._open_matches()
        elif self._keep:
            self._tree.reveal_path(self._keep)  # Esc: back where the cursor was
        self._keep = ()
        self.reload_table()
        self._summary.refresh_summary()
        self._title_tree()
        self.refresh_bindings()  # n and N join the footer
        self.walk_queued()


    def action_cancel_or_clear(self) -> None:
        """Esc: stop a running values read first, then the values check, then an export;
        otherwise clear the filter."""
        if not (self.query_one(Details).values.cancel() or self.cancel_check()
                or self.cancel_export()):
            self.action_clear_filter()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        self.screen.remove_class("-filtering")
        self.queued_steps = []  # an n typed ahead of this Esc walked a filter now gone
        if field.value:
            node = self._tree.cursor_node
            self._keep = self._tree.path_of(node) if node is not None else ()
            self.model.match_at = None
            field.value = ""  # Input.Changed rebuilds the tree, then goes back to _keep
        self.main_pane.focus()

    # -- views and screens --------------------------------------------------------------
    def _set_mode(self, mode: str) -> None:
        tree = self._tree
        tree.mode = mode
        self._title_tree()
        self._rebuild_tree()

    def _title_tree(self) -> None:
        """"by file", and with a filter what it matched, summed (tensors, params, bytes)."""
        tree = self._tree
        title = "training state" if tree.mode == "state" else f"by {tree.mode}"
        if self.model.pattern and tree.mode != "state":
            m = self.model.match_counts()
            title += f" · {m.tensors:,} {'match' if m.tensors == 1 else 'matches'}: " \
                f"{matched_sums(m)}"
        tree.border_title = title

    def action_toggle_view(self) -> None:
        self._set_mode("module" if self._tree.mode == "file" else "file")

    def action_training_view(self) -> None:
        self._set_mode("file" if self._tree.mode == "state" else "state")

    def action_values(self) -> None:
        # The table's or the tree's cursor, not the details' node: keys typed ahead ("down",
        # "v") can arrive before the details have heard of the move.
        self.query_one(Details).values.start(self.cursor_ref())

    def action_cancel_values(self) -> None:
        self.query_one(Details).values.cancel()

    def action_resume(self) -> None:
        """The verdict; opened while the training state is still read, it says so and
        fills in when the read ends (`_refresh_windows`)."""

        def chosen(finding) -> None:
            if finding is not None and finding.file:
                tree = self._tree
                if not tree.reveal_file(finding.file):
                    self._set_mode("state")
                    tree.reveal_file(finding.file)
                tree.focus()

        self.app.push_screen(ResumeScreen(self.model.resume, self._resume_waiting()), chosen)

    def _resume_waiting(self) -> str:
        failed = self.model.failed.get("training") or self.model.failed.get("load")
        return f"No verdict: reading stopped ({failed})." if failed else READING

    def action_problems(self) -> None:
        self.app.push_screen(ProblemsScreen(self.model.problems, self._reading()))

    def _reading(self) -> bool:
        """Still reading something that may find problems."""
        model = self.model
        return not model.failed and (not model.loaded or model.training is None)

    async def _refresh_windows(self) -> None:
        """Open windows of this checkpoint show what was read since they opened."""
        self._refresh_problems()
        for screen in self.app.screen_stack:
            if isinstance(screen, ResumeScreen) and (screen.report is not self.model.resume or
                                                     screen.waiting != self._resume_waiting()):
                await screen.show(self.model.resume, self._resume_waiting())

    def _refresh_problems(self) -> None:
        for screen in self.app.screen_stack:
            if isinstance(screen, ProblemsScreen):
                screen.show(self.model.problems, self._reading())

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_quiz(self) -> None:
        from ckpt_browser.quiz.progress import load_progress
        from ckpt_browser.tui.common.quiz import QuizScreen

        self.app.clear_notifications()  # the browser's notices would cover the quiz's keys
        progress = load_progress()
        if progress.note:
            self.notify(progress.note, title="Quiz", severity="warning", timeout=8)
        questions = self.quiz_questions()
        if not questions:
            return
        self.app.push_screen(QuizScreen(questions, progress=progress))

    def quiz_questions(self) -> list:
        """The bank, plus questions about the open checkpoint once it is read."""
        from ckpt_browser.errors import CheckpointError
        from ckpt_browser.quiz.bank import load_bank
        from ckpt_browser.quiz.generated import generate

        try:
            questions = load_bank()
        except CheckpointError as e:
            self.notify(str(e), title="Quiz bank", severity="error", timeout=8)
            questions = []
        model = self.model
        if model.checkpoint is not None or model.training is not None:
            questions += generate(model.checkpoint, model.training, model.resume, seed=None)
        if not questions:
            self.notify("No quiz questions: the bank is unreadable and the checkpoint "
                        "is still being read.", title="Quiz", timeout=6)
        return questions
