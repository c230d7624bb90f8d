"""`r`: can this checkpoint resume? The verdict in words, the seven components, the findings.

Choosing a finding closes the panel and shows its file in the tree. Each component's files are
shown compactly ("163 shards (model-00001 ... model-00163)"); `f` lists every one of them.
"""

from __future__ import annotations

import os

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ckpt_browser.analysis.resume.shard import shard_of
from ckpt_browser.escape import printable
from ckpt_browser.model import Finding, ResumeReport
from ckpt_browser.report.resume import verdict_line
from ckpt_browser.report.styles import ALERT
from ckpt_browser.report.words import (
    GOOD_STATUSES,
    SEVERITY_STYLE,
    VERDICT_STYLE,
    compacted,
    file_list,
    plural,
    status_word,
)
from ckpt_browser.tui.common.cells import PathText
from ckpt_browser.tui.common.modals import CloseableModal, TextModal

READING = "Reading the training state… the verdict shows here when it is read."


def verdict_text(report: ResumeReport) -> Text:
    """The same headline as `ckpt-browser check`."""
    return Text(printable(verdict_line(report)), style=VERDICT_STYLE.get(report.verdict, "bold"))


def components_table(report: ResumeReport) -> Table:
    table = Table(box=None, padding=(0, 1), show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for kind, comp in report.components.items():
        style = "" if comp.status in GOOD_STATUSES else ALERT
        table.add_row(kind, Text(status_word(comp.status), style=style),
                      PathText(printable(file_list(comp.files) or "-")))
    return table


def all_files_text(report: ResumeReport) -> Text:
    """Every file of every component, one a line: what `f` shows."""
    text = Text()
    for kind, comp in report.components.items():
        if comp.files:
            text.append(f"{kind} ({plural(len(comp.files), 'file')})\n", style="bold")
            text.append("".join(f"  {printable(f)}\n" for f in comp.files))
    return text


def files_left_out(report: ResumeReport) -> int:
    """How many files the compact lists leave out (0: every name is shown)."""
    return sum(len(c.files) for c in report.components.values() if compacted(c.files))


def finding_text(f) -> Text:
    where = f"{f.file}: " if f.file else ""
    return Text.assemble((f"{f.severity.upper():8}", SEVERITY_STYLE.get(f.severity, "bold")),
                         (f"{f.component:<10}", "bold"), printable(where + f.message))


class ResumeScreen(CloseableModal[Finding | None]):
    """Returns the chosen Finding through dismiss(), or None. Opened before the training
    state is read (`report` None), it says so and fills in when the browser calls `show`."""

    also_closes = ("r",)
    BINDINGS = [("f", "all_files", "All files")]

    def __init__(self, report: ResumeReport | None, waiting: str = READING) -> None:
        super().__init__()
        self.report = report
        self.waiting = waiting

    async def show(self, report: ResumeReport | None, waiting: str = READING) -> None:
        self.report, self.waiting = report, waiting
        await self.recompose()
        self._focus_findings()

    def compose(self) -> ComposeResult:
        r = self.report
        if r is None:
            with Vertical(id="resume-box", classes="modal-box"):
                yield Static(Text(self.waiting, style="bold"), id="resume-verdict")
            return
        shard = shard_of(r.path)
        if shard is not None:  # no verdict for a piece of a checkpoint
            with Vertical(id="resume-box", classes="modal-box"):
                yield Static(Text(shard.sentence(), style="bold"), id="resume-verdict")
                yield Static(Text(f"{printable(os.path.basename(r.path))} is shard "
                                  f"{shard.index} of {shard.total}: its tensors are browsable "
                                  "here; the resume check needs the index and every shard."))
            return
        with Vertical(id="resume-box", classes="modal-box"):
            yield Static(verdict_text(r), id="resume-verdict")
            step = f"step {r.step}" if r.step is not None else "step unknown"
            ranks = f", {plural(r.ranks, 'rank')}" if r.ranks else ""
            yield Static(Text(f"{r.format}, {step}{ranks}", style="dim"))
            yield Static(components_table(r), id="resume-components")
            if files_left_out(r):
                yield Static(Text(f"f lists all {plural(files_left_out(r), 'file')} by name",
                                  style="dim"), id="resume-files-hint")
            if r.findings:
                yield Static(Text("Findings (Enter shows the file)", style="bold"))
                yield OptionList(*[Option(finding_text(f), id=str(i))
                                   for i, f in enumerate(r.findings)], id="resume-findings")
            else:
                yield Static(Text("No findings."), id="resume-findings-none")

    def on_mount(self) -> None:
        self._focus_findings()

    def _focus_findings(self) -> None:
        for findings in self.query(OptionList):  # none while reading, or for a lone shard
            findings.focus()

    def action_all_files(self) -> None:
        if self.report is not None:
            self.app.push_screen(TextModal("Every file, by component", all_files_text(self.report),
                                           closes=("f",), box_id="resume-files",
                                           body_id="resume-files-body"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.report.findings[int(event.option.id)])
