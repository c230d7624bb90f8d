"""`ckpt-browser quiz` without the TUI: questions on stdout, answers from stdin (no TTY needed)."""

from __future__ import annotations

from typing import TextIO

from ckpt_browser.escape import printable
from ckpt_browser.quiz.session import Feedback, Session, Shown
from ckpt_browser.quiz.words import parse_choice, word

STOP = -1


def show_question(shown: Shown, n: int, total: int, lang: str) -> str:
    text = shown.text(lang)
    lines = [word(lang, "question", n=n, total=total), printable(text.question)]
    lines += [f"  {i + 1}) {printable(o)}" for i, o in enumerate(shown.options(lang))]
    return "\n".join(lines)


def show_feedback(fb: Feedback) -> str:
    lang, options = fb.lang, fb.shown.options(fb.lang)
    answer = f"{fb.answer + 1}) {options[fb.answer]}"
    head = word(lang, "right") if fb.correct else word(lang, "wrong", answer=answer)
    lines = [printable(head)]
    if not fb.correct:
        lines.append(printable(f"{word(lang, 'chose', chosen=fb.chosen + 1)}: {fb.why}"))
    lines.append(printable(fb.explanation))
    return "\n".join(lines)


def show_end(session: Session, lang: str) -> str:
    right, n = session.score
    lines = [word(lang, "score", right=right, n=n)]
    misses = session.review(lang)
    if n:
        lines.append(word(lang, "review") + ":" if misses else word(lang, "no_misses"))
    for fb in misses:
        lines += ["", printable(fb.shown.text(lang).question), show_feedback(fb)]
    return "\n".join(lines)


def _read_choice(inp: TextIO, out: TextIO, lang: str) -> int | None:
    """The chosen shown index, STOP for 'q', None at end of input."""
    while True:
        out.write(word(lang, "prompt"))
        out.flush()
        line = inp.readline()
        if not line:
            out.write("\n")
            return None
        if line.strip().lower() in ("q", "quit"):
            return STOP
        choice = parse_choice(line)
        if choice is not None:
            return choice
        out.write(word(lang, "retry") + "\n")


def run(session: Session, lang: str, inp: TextIO, out: TextIO) -> None:
    """Ask until the end, end of input, 'q' or Ctrl-C; then print the score and the review."""
    stopped = False
    try:
        while (shown := session.current) is not None:
            out.write("\n" + show_question(shown, session.position + 1, session.total, lang) + "\n")
            choice = _read_choice(inp, out, lang)
            if choice is None or choice == STOP:
                stopped = True
                break
            out.write(show_feedback(session.answer(choice, lang)) + "\n")
            session.next()
    except KeyboardInterrupt:
        stopped = True
        out.write("\n")
    out.write("\n" + word(lang, "stopped" if stopped else "done") + " " + show_end(session, lang)
              + "\n")
    out.flush()
