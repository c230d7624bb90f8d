"""`ckpt-browser check`: the resume verdict as text and as JSON (schema in the README's `check`
section)."""

from __future__ import annotations

import os

from ckpt_browser.escape import printable
from ckpt_browser.model import ResumeReport, ResumeTimeline
from ckpt_browser.report.words import (
    file_list,
    plural,
    shown_status,
    verdict_sentence,
    verdict_word,
)


def resume_doc(report: ResumeReport) -> dict:
    return {
        "path": report.path,
        "format": report.format,
        "verdict": report.verdict,
        "step": report.step,
        "ranks": report.ranks,
        "components": {k: {"status": c.status, "files": list(c.files), "detail": c.detail}
                       for k, c in report.components.items()},
        "findings": [{"severity": f.severity, "component": f.component, "file": f.file,
                      "message": f.message} for f in report.findings],
    }


def verdict_line(report: ResumeReport) -> str:
    """The headline: the verdict and its meaning, or, when some file would run code, the
    verdict and those files called UNSAFE."""
    unsafe = unsafe_files(report)
    if not unsafe:
        return verdict_sentence(report.verdict)
    names = ", ".join(unsafe[:3]) + (" ..." if len(unsafe) > 3 else "")
    weights = report.components.get("weights")
    if report.verdict == "broken" and weights is not None and weights.status == "unsafe":
        return (f"{verdict_word(report.verdict)}: the weights are UNSAFE: {names} would run "
                "code when loaded; nothing can resume from here")
    said = f"{names} {'is' if len(unsafe) == 1 else 'are'} UNSAFE (would run code when loaded)"
    if report.verdict == "broken":
        return f"{verdict_sentence(report.verdict)}; {said}"
    return f"{verdict_word(report.verdict)}: {said}: trust only the files that hold no code"


def unsafe_files(report: ResumeReport) -> list[str]:
    """Files whose pickle would run code: they decide the headline."""
    files = [f for c in report.components.values() if c.status == "unsafe" for f in c.files]
    files += [f.file for f in report.findings
              if f.severity == "error" and f.file and "unsafe: its pickle" in f.message]
    return list(dict.fromkeys(files))


def resume_text(report: ResumeReport) -> str:
    about = [report.format]
    if report.step is not None:
        about.append(f"step {report.step}")
    if report.ranks:
        about.append(plural(report.ranks, "rank"))
    lines = [verdict_line(report), f"path     {report.path} ({', '.join(about)})", "",
             "components"]
    lines += component_lines(report.components, shown=None)
    lines += ["", f"findings ({len(report.findings)})" if report.findings else "findings: none"]
    for f in report.findings:
        lines.append(f"  {f.severity:<7} {f.component:<10} {f.message}")
    return "\n".join(printable(line) for line in lines)


def component_lines(components, shown: int | None = 3) -> list[str]:
    """One row per component (its files compacted by `file_list`), and each detail sentence
    once: components in a row that share one ("a weights-only folder: ...") show it after
    the last of them, as "these 5: ..."."""
    comps = list(components.items())
    lines = []
    for i, (kind, c) in enumerate(comps):
        lines.append(f"  {kind:<10} {shown_status(c.status):<11} "
                     f"{file_list(c.files, shown) or '-'}")
        if not c.detail or (i + 1 < len(comps) and comps[i + 1][1].detail == c.detail):
            continue
        run = 1
        while run <= i and comps[i - run][1].detail == c.detail:
            run += 1
        lines.append(f"  {'':<10} {f'these {run}: ' if run > 1 else ''}{c.detail}")
    return lines


def unchecked_words(timeline: ResumeTimeline) -> str:
    return (f"{os.path.relpath(timeline.unchecked[0], timeline.path)} and older are not "
            f"checked, only the newest {len(timeline.reports)} are (check one by its path)")


def timeline_resume_text(timeline: ResumeTimeline) -> str:
    def name(r: ResumeReport) -> str:
        return os.path.relpath(r.path, timeline.path)

    reports, older = timeline.reports, timeline.unchecked
    exact = timeline.newest_exact
    newest = reports[0]
    head = f"{name(newest)} (the newest of {len(reports) + len(older):,}) is " \
        f"{verdict_line(newest)}"
    best = (f"newest checkpoint that resumes exactly: {name(exact)}" if exact is not None else
            "no checkpoint here resumes exactly" if not older else
            f"none of the newest {len(reports)} resumes exactly")
    width = max(len(name(r)) for r in reports)
    lines = [head, best, ""]
    for r in reports:
        step = f"step {r.step}" if r.step is not None else ""
        lines.append(f"  {name(r):<{width}}  {r.verdict:<12}  {step:<10}  {r.format}")
    if older:
        lines.append(f"  and {len(older):,} older: {unchecked_words(timeline)}")
    text = "\n".join(printable(line) for line in lines)
    details = [resume_text(newest)]
    if exact is not None and exact is not newest:
        details.append(resume_text(exact))
    return text + "\n\n" + "\n\n".join(details)
