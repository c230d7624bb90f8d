"""What earlier quiz sessions got wrong: `$XDG_STATE_HOME/ckpt-browser/quiz.json`.

Per question id: times seen, times missed, and `due`, which a miss raises and a right answer
lowers. A missed question is drawn more often until it has been answered right again.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_browser.readers.regular import read_small

MAX_PROGRESS_BYTES = 2 * 1024 * 1024
MISS_WEIGHT = 3.0  # each unresolved miss adds this to a question's weight of 1


def state_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return Path(base) / "ckpt-browser" / "quiz.json"


@dataclass
class Progress:
    entries: dict[str, dict[str, int]] = field(default_factory=dict)
    note: str | None = None  # why an existing file was not used, to tell the user

    def record(self, qid: str, correct: bool) -> None:
        e = self.entries.setdefault(qid, {"seen": 0, "missed": 0, "due": 0})
        e["seen"] += 1
        if correct:
            e["due"] = max(0, e["due"] - 1)
        else:
            e["missed"] += 1
            e["due"] += 1

    def weights(self) -> dict[str, float]:
        """Question id -> draw weight (1 for a question never missed)."""
        return {qid: 1.0 + MISS_WEIGHT * e["due"] for qid, e in self.entries.items()
                if e["due"] > 0}


def load_progress(path: str | os.PathLike | None = None) -> Progress:
    """Never raises: a missing file is a fresh start, a damaged one too (with a note)."""
    path = Path(path) if path is not None else state_path()
    try:
        if path.stat().st_size > MAX_PROGRESS_BYTES:
            raise ValueError(f"larger than {MAX_PROGRESS_BYTES:,} bytes")
        doc = json.loads(read_small(str(path), MAX_PROGRESS_BYTES).decode("utf-8"))
        return Progress(_entries(doc))
    except FileNotFoundError:
        return Progress()
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return Progress(note=f"{path}: quiz progress unreadable ({e}); starting fresh")


def _entries(doc: object) -> dict[str, dict[str, int]]:
    if not isinstance(doc, dict) or doc.get("version") != 1 \
            or not isinstance(doc.get("questions"), dict):
        raise ValueError('expected {"version": 1, "questions": {...}}')
    entries = {}
    for qid, e in doc["questions"].items():
        if not isinstance(e, dict) or not all(type(e.get(k)) is int and e[k] >= 0
                                              for k in ("seen", "missed", "due")):
            raise ValueError(f"bad entry for {qid!r}")
        entries[qid] = {k: e[k] for k in ("seen", "missed", "due")}
    return entries


def save_progress(progress: Progress, path: str | os.PathLike | None = None) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename."""
    path = Path(path) if path is not None else state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "questions": progress.entries}
    fd, tmp = tempfile.mkstemp(prefix=".quiz-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
