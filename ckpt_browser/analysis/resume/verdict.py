"""The verdict, read off the findings, and the findings a verdict needs.

Severities carry the verdict (FORMATS.md "Resume verdict"): an error on the weights makes the
checkpoint `broken`; an error on any other component means no usable optimizer state, so
`weights-only`; a warning means training continues but not bit-for-bit, so `inexact`; info
changes nothing. Every component that is not `ok` or `not-needed` gets a finding at least as
severe as its status demands, so the verdict and the findings can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckpt_browser.model import COMPONENTS, ERROR, INFO, WARNING, Component, Finding

FINE = ("ok", "not-needed")
_RANK = {ERROR: 2, WARNING: 1, INFO: 0}


def needed(c: Component) -> str | None:
    """The least severity a finding about this component must have."""
    if c.status in FINE:
        return None
    return ERROR if c.kind in ("weights", "optimizer") else WARNING


def verdict_of(findings) -> str:
    if any(f.severity == ERROR and f.component == "weights" for f in findings):
        return "broken"
    if any(f.severity == ERROR for f in findings):
        return "weights-only"
    if any(f.severity == WARNING for f in findings):
        return "inexact"
    return "exact"


@dataclass
class Draft:
    """Findings gathered by each check, and which components they account for."""

    components: dict[str, Component]
    findings: list[Finding] = field(default_factory=list)
    covers: dict[str, int] = field(default_factory=dict)  # component -> most severe finding

    def add(self, severity: str, component: str, file: str | None, message: str,
            covers=()) -> None:
        self.findings.append(Finding(severity, component, file, message))
        for kind in (component, *covers):
            self.covers[kind] = max(self.covers.get(kind, -1), _RANK[severity])

    def extend(self, findings) -> None:
        for f in findings:
            self.add(f.severity, f.component, f.file, f.message)

    def explained(self, c: Component) -> bool:
        need = needed(c)
        return need is None or self.covers.get(c.kind, -1) >= _RANK[need]

    def named(self) -> set[str]:
        return {f.file for f in self.findings if f.file}

    def sorted(self) -> tuple[Finding, ...]:
        """Errors first, then warnings, then info; within each, in component order."""
        order = {k: i for i, k in enumerate(COMPONENTS)}
        return tuple(sorted(self.findings, key=lambda f: (-_RANK[f.severity],
                                                         order.get(f.component, 99))))
