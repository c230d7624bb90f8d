"""Every key, described once: the footer, the command palette, the help window and the
README's key tables are all built from these tables.

Order matters: it is the footer's order. The browser's footer shows only the keys of the
focused view (its screen says which, `footer_actions`); "? All keys" says where the rest are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    shown: str  # how a person writes it: "/", "?", "escape", "up / down"
    help: str  # what it does, in the help window and the README
    action: str = ""  # the screen's action; "" for keys the widgets handle (arrows, tab)
    footer: str = ""  # its footer label; "" keeps it out of the footer
    palette: str = ""  # its command palette title; "" keeps it out of the palette
    bind: str = ""  # Textual's key name when it differs from `shown` ("slash")
    palette_only: bool = False  # a second meaning of a key: in the palette or footer by name

    def binding(self, show: bool) -> Binding:
        return Binding(self.bind or self.shown, self.action, self.footer or self.palette,
                       show=show and bool(self.footer))

    def gated(self) -> Binding:
        """The footer's entry of this key, shown where the screen's check_action lets
        `footer(action, label)` through; where not, the key falls to its plain binding."""
        return Binding(self.bind or self.shown, f"footer({self.action!r}, {self.footer!r})",
                       self.footer)


BROWSE: tuple[Key, ...] = (
    Key("up / down", "move in the tree"),
    Key("right / left", "expand / collapse (left again: to the parent)"),
    Key("enter / space", "toggle the highlighted node"),
    Key("/", "filter names: substring (case-insensitive), or a glob such as `layers.*.q_proj*` "
        "that may match any tail of the name; the summary shows the match count and size",
        "filter", "Filter", "Filter names", bind="slash"),
    Key("n", "with a filter: the next matching tensor (its module or file opens); the "
        "summary shows which match of how many", "next_match", "Next", "Next match"),
    Key("N", "with a filter: the previous matching tensor", "previous_match",
        palette="Previous match"),
    Key("escape", "stop reading values, else clear the filter (the cursor stays on its "
        "node); closes any window",
        "cancel_or_clear", "Clear", "Clear filter"),
    Key("escape", "stop reading the highlighted tensor's values (what was read is kept)",
        "cancel_values", palette="Cancel values", palette_only=True),
    Key("s", "sort the tensor table: name -> size (largest first) -> dtype -> file",
        "cycle_sort", "Sort", "Sort the tensor table"),
    Key("v", "values of the highlighted tensor (in any view, optimizer state and DCP keys "
        "included): min, max, mean, std, abs-max, NaN, Inf, zeros, a histogram and the first "
        "values, read in the background with a progress bar; Esc cancels. Only `v` and `!` "
        "read tensor bytes", "values", "Values", "Values"),
    Key("l", "every tensor in one table instead of the tree: name, dtype, shape, size, file "
        "(the details below it); `/` filters it too; `l` again: back to the tree",
        "toggle_table", "Table", "Tensor table"),
    Key("l", "back to the tree", "toggle_table", "Tree", palette_only=True),
    Key("m", "tree by file (every file, its format, its tensors) <-> tree by module (the "
        "weights' dotted names as a hierarchy with subtotals)", "toggle_view", "View",
        "Switch view"),
    Key("t", "training state: components -> their files -> what the files hold (optimizer "
        "state down to each tensor, DCP keys down to each chunk and rank file)",
        "training_view", "State", "Training state"),
    Key("r", "resume check: the verdict in words, the seven components (their files compact: "
        "\"163 shards (model-00001 ... model-00163)\"; `f` there lists every file), the "
        "findings; Enter on a finding shows its file in the tree", "resume", "Resume",
        "Resume check"),
    Key("p", "every problem found, by file", "problems", "Problems", "Show problems"),
    Key("z", "quiz on sharding and resumable training, with questions about this checkpoint: "
        "`1`-`4` or `a`-`d` answer, Enter next, `l` English / Vietnamese, Esc closes",
        "quiz", "Quiz", "Quiz"),
    Key("c", "for a folder of checkpoints: pick another one (newest first); `d` there diffs it "
        "against this one", "timeline", "Checkpoints", "Checkpoints"),
    Key("d", "diff this checkpoint against another: picked from the folder's checkpoints, or "
        "typed as a path", "compare", "Diff", "Compare with another checkpoint"),
    Key("y", "copy the highlighted name (tensor, module path or file) to the clipboard; "
        "works over SSH in terminals that accept OSC 52", "copy_name", palette="Copy name"),
    Key("!", "check every weight tensor's values for NaN and Inf, as `stats --check` does: "
        "read one tensor at a time in the background, a line above the footer counts tensors "
        "and bytes; Esc cancels (what was found stays); each tensor found is a problem (`p`), "
        "and `v` adds the ones it finds", "check_values", palette="Check values for NaN / Inf",
        bind="exclamation_mark"),
    Key("e", "export the weights as safetensors into a new folder, as `ckpt-browser export` "
        "does (model.safetensors, or shards and an index past 5 GiB, the config copied "
        "beside); a line above the footer shows how far, Esc cancels and removes what was "
        "written; a damaged or unsafe checkpoint is refused with its findings", "export",
        "Export", "Export weights to safetensors"),
    Key("?", "every key (this window)", "help", "All keys", "Help: keys",
        bind="question_mark"),
    Key("q", "quit", "app.quit", "Quit"),
    Key("tab", "move focus between the tree and the details"),
    Key("ctrl+p", "command palette: every action by name"),
)

DIFF: tuple[Key, ...] = (
    Key("up / down", "move in the table; pgup / pgdn a page, home / end the first / last row"),
    Key("v", "compare the values of every pair with the same shape (progress bar; Esc cancels, "
        "results so far stay)", "values", "Values", "Compare values"),
    Key("escape", "cancel a comparison (what is compared stays); closes any window", "cancel",
        "Cancel", "Cancel comparison"),
    Key("escape", "clear the name filter; the cursor stays on its row", "clear_filter",
        palette="Clear name filter"),
    Key("f", "filter by status: all, changed, then each status present", "cycle_filter",
        "Filter", "Filter by status"),
    Key("/", "filter names as the browser does (substring, or a glob such as "
        "`layers.*.experts.1*`), together with the status filter; the table's title counts "
        "the rows that match", "filter_names", palette="Filter names", bind="slash"),
    Key("s", "sort: name -> largest max abs difference first -> largest relative change "
        "first (the norm of a - b over the norm of a)", "toggle_sort", "Sort",
        "Sort"),
    Key("t", "the weights' table or the training-state tensors' table", "toggle_set", "State",
        "Weights / state tensors"),
    Key("p", "problems found in A and B, notes on the comparison", "problems", "Problems",
        "Show problems"),
    Key("?", "this help", "help", "Help", "Help: keys", bind="question_mark"),
    Key("q", "quit (back to the browser when opened from it)", "close", "Quit"),
    Key("c", "compare only the highlighted pair", "compare_row", palette="Compare this tensor"),
    Key("i", "the whole training-state comparison (step, lr per group, step counters, flags)",
        "state_info", palette="Training state"),
    Key("ctrl+p", "command palette: every action by name"),
)


def bindings(keys: Iterable[Key]) -> list[Binding]:
    """Every key bound; those with a footer label always in the footer."""
    return [k.binding(show=True) for k in keys if k.action and not k.palette_only]


def gated_bindings(keys: Iterable[Key]) -> list[Binding]:
    """Every key bound, hidden; before them, in the footer's order, a gated entry for each key
    with a footer label (Key.gated). Textual tries a key's bindings in order."""
    keys = [k for k in keys if k.action]
    return [k.gated() for k in keys if k.footer] + \
        [k.binding(show=False) for k in keys if not k.palette_only]


def palette(keys: Iterable[Key]) -> list[Key]:
    return [k for k in keys if k.palette]


def readme_table(keys: Iterable[Key]) -> str:
    """The README's table of these keys, as Markdown."""
    rows = ["| key | action |", "|---|---|"]
    for k in keys:
        if k.palette_only:
            continue
        shown = f"`{k.shown}`" if len(k.shown) == 1 else k.shown
        rows.append(f"| {shown} | {k.help} |")
    return "\n".join(rows)
