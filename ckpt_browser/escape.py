"""Names come from the files: never let one drive the terminal or break a line."""

from __future__ import annotations


def printable(text: str) -> str:
    """Escape control and other non-printable characters (\\n, ESC ...) as Python does."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
