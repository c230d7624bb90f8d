"""UNSAFE or damaged: the words for what is wrong with a file or a checkpoint, written once.

A problem is unsafe when its message starts with "unsafe": a reader found code that loading
the file the usual way would run (every reader and builder words it so). Every other
error-level problem is damage (truncated, corrupt, unreadable, or built so readers disagree).
A file can be both, and then says both; an unsafe file is never called damaged for being
unsafe. Ground floor: duck-typed on `severity`, `file` and `message`, it imports nothing.
"""

from __future__ import annotations

PREFIX = "unsafe"


def is_unsafe(problem) -> bool:
    return problem.message.startswith(PREFIX)


def errors(problems) -> list:
    """The error-level problems once each, unsafe ones first (they matter most)."""
    found = list(dict.fromkeys(p for p in problems if p.severity == "error"))
    return [p for p in found if is_unsafe(p)] + [p for p in found if not is_unsafe(p)]


def words(problems, unsafe: bool = False) -> tuple[str, ...]:
    """("UNSAFE",), ("DAMAGED",), ("UNSAFE", "DAMAGED") or (). `unsafe`: known unsafe
    another way (a reader's list of code-running globals)."""
    found = errors(problems)
    out = ()
    if unsafe or any(is_unsafe(p) for p in found):
        out += ("UNSAFE",)
    if any(not is_unsafe(p) for p in found):
        out += ("DAMAGED",)
    return out


def phrase(problems, unsafe: bool = False) -> str:
    """"UNSAFE", "damaged", "UNSAFE and damaged" or "": said of a checkpoint in a sentence."""
    said = words(problems, unsafe)
    return " and ".join(w if w == "UNSAFE" else w.lower() for w in said)


def title(problems, unsafe: bool = False) -> str:
    """"UNSAFE", "Damaged", "UNSAFE and damaged" or "": a notice's title."""
    text = phrase(problems, unsafe)
    return text[:1].upper() + text[1:]


def message(problem) -> str:
    """The message shown after the word UNSAFE: without its own leading "unsafe: "."""
    text = problem.message
    if is_unsafe(problem):
        text = text[len(PREFIX):].lstrip(":").lstrip() or text
    return text


def word(problem) -> str:
    """The problem's word in a list: UNSAFE, else its severity (ERROR, WARNING, INFO)."""
    return "UNSAFE" if is_unsafe(problem) else problem.severity.upper()


def by_file(problems) -> dict[str, str]:
    """file -> "UNSAFE", "DAMAGED" or "UNSAFE, DAMAGED", for each file an error names."""
    found: dict[str, list] = {}
    for p in errors(problems):
        if p.file:
            found.setdefault(p.file, []).append(p)
    return {name: ", ".join(words(ps)) for name, ps in found.items()}
