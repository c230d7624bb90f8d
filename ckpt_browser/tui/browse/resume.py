"""`r`: can this checkpoint resume? The verdict in words, the seven components, the findings.

Choosing a finding closes the panel and shows its file in the tree.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ckpt_browser.escape import printable
from ckpt_browser.model import Finding, ResumeReport
from ckpt_browser.report.resume import verdict_line
from ckpt_browser.report.words import GOOD_STATUSES, SEVERITY_STYLE, VERDICT_STYLE, status_word
from ckpt_browser.tui.common.modals import CloseableModal

READING = "Reading the training state… the verdict shows here when it is read."


def verdict_text(report: ResumeReport) -> Text:
    """The same headline as `ckpt-browser check`."""
    return Text(printable(verdict_line(report)), style=VERDICT_STYLE.get(report.verdict, "bold"))


def components_table(report: ResumeReport) -> Table:
    table = Table(box=None, padding=(0, 1), show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for kind, comp in report.components.items():
        style = "" if comp.status in GOOD_STATUSES else "bold red"
        table.add_row(kind, Text(status_word(comp.status), style=style),
                      printable(", ".join(comp.files) or "-"))
    return table


def finding_text(f) -> Text:
    where = f"{f.file}: " if f.file else ""
    return Text.assemble((f"{f.severity.upper():8}", SEVERITY_STYLE.get(f.severity, "bold")),
                         (f"{f.component:<10}", "bold"), printable(where + f.message))


class ResumeScreen(CloseableModal[Finding | None]):
    """Returns the chosen Finding through dismiss(), or None. Opened before the training
    state is read (`report` None), it says so and fills in when the browser calls `show`."""

    also_closes = ("r",)

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
        with Vertical(id="resume-box", classes="modal-box"):
            yield Static(verdict_text(r), id="resume-verdict")
            step = f"step {r.step}" if r.step is not None else "step unknown"
            ranks = f", {r.ranks} rank(s)" if r.ranks else ""
            yield Static(Text(f"{r.format}, {step}{ranks}", style="dim"))
            yield Static(components_table(r), id="resume-components")
            if r.findings:
                yield Static(Text("Findings (Enter shows the file)", style="bold"))
                yield OptionList(*[Option(finding_text(f), id=str(i))
                                   for i, f in enumerate(r.findings)], id="resume-findings")
            else:
                yield Static(Text("No findings."), id="resume-findings-none")

    def on_mount(self) -> None:
        self._focus_findings()

    def _focus_findings(self) -> None:
        if self.report is not None and self.report.findings:
            self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.report.findings[int(event.option.id)])
