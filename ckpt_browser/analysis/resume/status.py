"""A finding for every component whose status no specific check explained: the component's own
sentence (what is missing and why) plus what that means for the resumed run.

Components with the same sentence (one unreadable file holding all of them) share one finding.
An unsafe file counts as missing: its state is never used.
"""

from __future__ import annotations

from ckpt_browser.analysis.resume.verdict import Draft, needed
from ckpt_browser.model import COMPONENTS, ERROR, INFO, WARNING, Component, TrainingState
from ckpt_browser.producers import PRODUCERS

NOT_EXACT = "the resume will not be bit-exact."
AFTER = {
    "weights": "Nothing can resume from this checkpoint: restore the weights from where the run "
               "saved them, or resume from an earlier checkpoint.",
    "optimizer": "Only a warm start from the weights is possible: expect a loss spike while "
                 "Adam's moments rebuild; for a true resume use a checkpoint with usable "
                 "optimizer state.",
    "scheduler": "The learning rate after the resume differs from the original run's, so "
                 + NOT_EXACT,
    "rng": f"So {NOT_EXACT[:-1]}; save the RNG states yourself if it must be.",
    "data": f"So {NOT_EXACT}",
    "progress": "Pass the step to the resumed run yourself, or the schedule, logging and "
                f"stopping point restart from 0; {NOT_EXACT}",
    "scaler": f"So {NOT_EXACT}",
}
UNSAFE = "It counts as missing: its contents are never used."


def check_statuses(draft: Draft) -> None:
    groups: dict[str, list[Component]] = {}
    for kind in COMPONENTS:
        c = draft.components[kind]
        if not draft.explained(c):
            groups.setdefault(c.detail, []).append(c)
    for detail, comps in groups.items():
        first = comps[0]
        severity = ERROR if any(needed(c) == ERROR for c in comps) else WARNING
        text = detail.rstrip()
        if text and not text.endswith("."):
            text += "."
        if first.status == "unsafe":
            text += " " + UNSAFE
        if len(comps) > 1:
            text += f" (This holds for {', '.join(c.kind for c in comps)}.)"
        draft.add(severity, first.kind, _file(first), f"{text} {AFTER[first.kind]}",
                  [c.kind for c in comps[1:]])


def _file(c: Component) -> str | None:
    named = c.facts.get("file")
    if isinstance(named, str):
        return named
    return c.files[0] if c.files else None


# files that name the checkpoint a producer's resume loads
MARKERS = tuple(m for p in PRODUCERS for m in p.pointers)


def check_markers(draft: Draft, ts: TrainingState) -> None:
    """A producer's pointer file (Producer.pointers) must name a checkpoint that exists: its
    resume loads whatever it names."""
    for p in ts.problems:
        if p.severity == ERROR and p.file in MARKERS:
            covers = [k for k in COMPONENTS if not draft.explained(draft.components[k])]
            text = p.message if p.message.startswith(p.file) else f"{p.file}: {p.message}"
            draft.add(ERROR, "weights", p.file, f"{text}: the framework loads what {p.file} "
                      "names, so the resume fails; point it at a checkpoint that exists, or name "
                      "one explicitly when resuming.", covers)


def check_other_problems(draft: Draft, ts: TrainingState) -> None:
    """Errors and warnings the readers found in a component's file that no finding names yet:
    information, since the component's status already carries what the resume needs; except
    an unsafe pickle (a training_args.bin that would run code ...), which is an error wherever
    it is: a checkpoint holding one is not a checkpoint to resume from as it is."""
    named = set(draft.named())
    seen = set()
    for p in ts.problems:
        if p.severity == INFO or not p.file or p.file in named or (p.file, p.message) in seen:
            continue
        owner = next((k for k in COMPONENTS if p.file in draft.components[k].files), None)
        if p.message.startswith("unsafe"):  # the component it makes unsafe, if one says so
            owner = next((k for k in COMPONENTS if draft.components[k].status == "unsafe"
                          and p.file in draft.components[k].files), owner)
        if owner is None and p.message.startswith("unsafe"):
            owner = "data"  # training_args.bin: the run's settings, which the data order follows
        if owner is None:
            continue
        seen.add((p.file, p.message))
        if p.message.startswith("unsafe") and p.severity == ERROR:
            draft.add(ERROR, owner, p.file, f"{p.file}: {p.message}. Whoever loads it the usual "
                      "way runs that code: someone made or changed this checkpoint to attack "
                      "its user. Resume only from files that hold no code (safetensors weights), "
                      "after deleting this one.")
            named.add(p.file)  # one such finding a file: its reader and its component both say it
        else:
            draft.add(INFO, owner, p.file, f"{p.file}: {p.message}.")
