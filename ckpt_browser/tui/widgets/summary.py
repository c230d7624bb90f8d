"""Top lines: path, format, files, tensors, params, bytes, dtypes, progress, problems."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ckpt_browser.report.escape import printable
from ckpt_browser.report.text import count, dtype_line, size
from ckpt_browser.tui.state import BrowseState


def short_path(path: str, room: int) -> str:
    """Keep the end of a long path (the checkpoint's own name) on one line."""
    return path if len(path) <= room else "…" + path[-(room - 1):]


def _weights_line(state: BrowseState) -> str:
    layout = state.layout
    totals = state.totals()
    tensors = totals.tensors if state.loaded else (state.index_tensor_count() or totals.tensors)
    nbytes = totals.bytes if state.loaded or not layout.index or layout.index.total_size is None \
        else layout.index.total_size
    params = count(totals.params) if state.loaded else "…"
    progress = "" if state.loaded else " reading…"
    return (f"{state.total} files · {tensors:,} tensors · {params} params · {size(nbytes)}"
            f" · headers {state.done}/{state.total}{progress}")


def _state_line(state: BrowseState) -> Text:
    """Framework, step and each component's status, in words (press t for the details)."""
    training = state.training
    if training is None:
        return Text("training state: reading…", style="dim")
    head = training.framework
    if training.step is not None:
        head += f" · step {training.step}"
    if training.ranks:
        head += f" · {training.ranks} rank{'s' if training.ranks != 1 else ''}"
    if state.resume is not None:
        head += f" · resume: {state.resume.verdict.upper()}"
    comps = [c for c in training.components.values() if c.status != "not-needed"]
    ok = sum(c.status == "ok" for c in comps)
    text = Text(f"{head} · state: {ok} ok")
    for comp in comps:
        if comp.status != "ok":
            text.append(f" · {comp.kind} {comp.status.upper()}", style="bold red")
    return text.append("  (t, r)", style="dim")


def summary_text(state: BrowseState, width: int = 80) -> Text:
    layout = state.layout
    text = Text()
    kind = layout.format if layout.files or state.training is None else state.training.framework
    room = max(20, width - len(kind) - 6)
    text.append(short_path(printable(layout.path), room), style="bold")
    text.append(f"  ({kind})\n")
    if layout.files:
        text.append(_weights_line(state))
        text.append("\n" + ("dtypes: " + dtype_line(state.totals()) if state.shards else "dtypes: …"))
        text.append("\n")
    text.append(_state_line(state))
    errors = sum(p.severity == "error" for p in state.problems)
    warnings = sum(p.severity == "warning" for p in state.problems)
    if errors or warnings:
        text.append(f"\n{errors} error(s), {warnings} warning(s): press p to list them",
                    style="bold red" if errors else "bold yellow")
    if state.pattern:
        hits, total, files = state.match_counts()
        text.append(f"\nfilter {printable(state.pattern)!r}: {hits:,} of {total:,} tensors in {files} files")
    return text


class Summary(Static):
    def __init__(self, state: BrowseState, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state = state

    def refresh_summary(self) -> None:
        self.update(summary_text(self.state, self.app.size.width))

    def on_resize(self) -> None:
        self.refresh_summary()
