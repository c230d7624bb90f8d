"""Search that jumps, for the browse screen: after `/`, n and N walk the matching tensors in
the tree's order (opening the way to each), and y copies the highlighted name."""

from __future__ import annotations

from ckpt_browser.escape import printable
from ckpt_browser.tui.browse.tree import copy_text

OPENED_MATCHES = 50  # matches whose way is opened at once; n and N open the rest


class Search:
    """A mixin of BrowseScreen: it reads the screen's model, tree, summary and cursor."""

    def _open_matches(self) -> None:
        """Open the way to the first matches (a bounded number: "weight" matches all 94,000)
        and put the cursor on the first; n and N open the others as they go."""
        paths = self.model.match_paths(self._tree.mode)
        self.model.match_at, self.model.match_count = (0 if paths else None), len(paths)
        for path in reversed(paths[:OPENED_MATCHES]):
            self._tree.reveal_path(path, move=False)
        if paths:
            self._tree.reveal_path(paths[0])

    def action_next_match(self, step: int = 1) -> None:
        """n / N: the next or previous tensor that matches the filter, wrapping around."""
        model, tree = self.model, self._tree
        if self.query_one("#filter").value != model.pattern:
            # typed ahead of the filter ("/proj", Enter, "n"): walk once its matches are in
            self.queued_steps.append(step)
            return
        if not model.pattern:
            self.notify("No filter: press / and type a name first.", timeout=4)
            return
        if self.table_next_match(step):
            return
        paths = model.match_paths(tree.mode)
        if not paths:
            words = "in the training state view: use m for the file or module view" \
                if tree.mode == "state" else "no tensor matches"
            self.notify(f"n / N jump between matching tensors; {words}.", timeout=4)
            return
        node = tree.heading_to  # a jump not yet laid out is where the cursor is
        here = tree.path_of(node) if node is not None else ()
        at = model.match_at if model.match_at is not None else (-1 if step > 0 else 0)
        if here in paths and paths[at % len(paths)] != here:
            at = paths.index(here)  # the cursor was moved by hand: go on from there
        model.match_at, model.match_count = (at + step) % len(paths), len(paths)
        tree.reveal_path(paths[model.match_at])
        self._summary.refresh_summary()

    def walk_queued(self) -> None:
        """The n and N typed before the filter's matches were in (_filter_ready)."""
        steps, self.queued_steps = self.queued_steps, []
        for step in steps:
            self.action_next_match(step)

    def action_previous_match(self) -> None:
        self.action_next_match(-1)

    def action_copy_name(self) -> None:
        """y: the highlighted name to the clipboard (OSC 52: the terminal on the other end of
        the SSH connection takes it; a terminal that ignores OSC 52 gets nothing)."""
        name = copy_text(self.cursor_ref())
        if not name:
            self.notify("Nothing to copy here: highlight a tensor, module or file.", timeout=4)
            return
        self.app.copy_to_clipboard(name)
        self.notify(f"Copied {printable(name)}", title="Clipboard", timeout=4, markup=False)
