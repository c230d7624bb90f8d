"""Top lines: path, format, files, tensors, params, bytes, dtypes, progress, problems."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ckpt_browser import alarms
from ckpt_browser.analysis.resume.shard import shard_of
from ckpt_browser.escape import printable
from ckpt_browser.producers import weights_only
from ckpt_browser.report.styles import ALERT, WARN
from ckpt_browser.report.text import dtype_line
from ckpt_browser.report.words import (
    GOOD_STATUSES,
    VERDICT_STYLE,
    count,
    plural,
    size,
    status_word,
    verdict_word,
)
from ckpt_browser.tui.browse.model import BrowseModel, Matched


def short_path(path: str, room: int) -> str:
    """Keep the end of a long path (the checkpoint's own name) on one line; a remote
    checkpoint shows its URL, not the cache folder that mirrors it."""
    from ckpt_browser.remote import shown

    path = shown(path)
    return path if len(path) <= room else "…" + path[-(room - 1):]


def _weights_line(model: BrowseModel) -> str:
    """The weights' totals (the other components are counted apart, on the dtype line)."""
    layout = model.layout
    totals = model.totals()
    tensors = totals.tensors if model.loaded else (model.index_tensor_count() or totals.tensors)
    nbytes = totals.bytes if model.loaded or not layout.index or layout.index.total_size is None \
        else layout.index.total_size
    params = count(totals.params) if model.loaded else "…"
    failed = model.failed.get("load")
    progress = "" if model.loaded else f" · stopped: {failed}" if failed else " reading…"
    files = f"{model.total} file{'s' if model.total != 1 else ''}"
    return (f"{files} · {tensors:,} tensors · {params} params · {size(nbytes)}"
            f" · read {model.done}/{model.total}{progress}")


def _dtypes_line(model: BrowseModel) -> str:
    if not model.shards:
        return "dtypes: …"
    line = "dtypes: " + dtype_line(model.totals())
    others = model.others()
    if others:
        line += " · also " + ", ".join(f"{k} {v.tensors:,}" for k, v in others.items())
    return line


def _state_line(model: BrowseModel, width: int) -> Text:
    """Framework, step, the resume verdict and the components that are not ok, on one line
    (cut to the width: the `t` and `r` views have the rest)."""
    training = model.training
    if training is None:
        failure = model.training_failure
        return Text(f"training state: not read: {failure}", style=ALERT) if failure else \
            Text("training state: reading…", style="dim")
    head = training.framework
    if training.step is not None:
        head += f" · step {training.step}"
    if training.ranks:
        head += f" · {training.ranks} rank{'s' if training.ranks != 1 else ''}"
    text = Text(head)
    shard = shard_of(model.layout.path) if model.resume is not None else None
    if shard is not None:  # a weights file to browse, not a failed resume
        text.append(f" · {shard.sentence()}")
    elif model.resume is not None:
        text.append(" · resume: ")
        text.append(verdict_word(model.resume.verdict),
                    style=VERDICT_STYLE.get(model.resume.verdict, "bold"))
    if shard is not None:
        pass
    elif weights_only(training.framework):
        text.append(" · weights only, no training state")
    else:
        bad = [f"{c.kind} {status_word(c.status)}" for c in training.components.values()
               if c.status not in GOOD_STATUSES]
        text.append(" · " + (", ".join(bad) if bad else "all state ok"),
                    style=ALERT if bad else "")
    text.append("  (t, r)", style="dim")
    text.truncate(max(width - 2, 20), overflow="ellipsis")
    return text


def summary_text(model: BrowseModel, width: int = 80) -> Text:
    layout = model.layout
    text = Text()
    kind = layout.format if layout.format != "files" or model.training is None \
        else model.training.framework
    room = max(20, width - len(kind) - 6)
    text.append(layout.shown_as or short_path(printable(layout.path), room), style="bold")
    text.append(f"  ({kind})\n")
    text.append(_weights_line(model))
    text.append("\n" + _dtypes_line(model))
    text.append("\n")
    errors = sum(p.severity == "error" for p in model.problems)
    warnings = sum(p.severity == "warning" for p in model.problems)
    if errors or warnings:  # before the state line: the summary may be cut at 6 lines
        said = alarms.phrase(model.problems)
        found = len(model.values_found)  # not the headers': found by reading values
        values = f" ({found} from reading values)" if found else ""
        text.append(f"{said + ': ' if said else ''}{errors} error(s), {warnings} warning(s)"
                    f"{values}: press p to list them\n", style=ALERT if errors else WARN)
    text.append(_state_line(model, width))
    if model.pattern:
        m = model.match_counts()
        # their params and bytes are in the tree's and the table's titles (one line here)
        text.append(f"\nfilter {printable(model.pattern)!r}: {m.tensors:,} of {m.total:,} tensors "
                    f"in {plural(m.files, 'file')}")
        if model.match_at is not None and model.match_count:
            text.append(f" · match {model.match_at + 1:,}/{model.match_count:,} (n/N)",
                        style="bold")
    return text


def matched_sums(m: Matched) -> str:
    """"2.1B params, 4.0 GiB": what the filter matched, summed; names whose header is not read
    yet are counted apart, not guessed."""
    said = f"{count(m.params)} params, {size(m.bytes)}"
    return f"{said} (+{m.unread:,} not read yet)" if m.unread else said


class Summary(Static):
    def __init__(self, model: BrowseModel, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model = model

    def refresh_summary(self) -> None:
        self.update(summary_text(self.model, self.app.size.width))

    def on_resize(self) -> None:
        self.refresh_summary()
