"""The format knowledge lives in ckpt_browser/readers/FORMATS.md, and comments cite it (or an
upstream source), never a document that is not in the repository.

Two checks over every comment and docstring in ckpt_browser/, tests/ and benchmarks/ (and their
Markdown files):

- each `FORMATS.md "Heading"` names a heading FORMATS.md has (several may follow one
  `FORMATS.md`: `FORMATS.md "HF Trainer", "accelerate"`);
- none cites the notes the code was first written from, which are not in the repository: the
  resume-state catalog ("catalog section 4"), the content-signatures notes ("A.4", "B.15",
  "C#18"), the project's issue tracker ("issue 13") or the style guide's habits ("Habit 1").
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ROOT / "ckpt_browser" / "readers" / "FORMATS.md"
SCANNED = ("ckpt_browser", "tests", "benchmarks")
THIS = Path(__file__).resolve()

DEAD = [
    re.compile(r"\bcatalog\b|content-signatures|\bissue\s*#?\s*\d+\b|\bhabit\s+\d+\b", re.I),
    re.compile(r"\b[AB]\.\d+(?:\.\d+)*\b|\bC#\d+\b|\bPart [ABC]\b"),  # content-signatures sections
]
CITATION = re.compile(r'FORMATS\.md((?:\s*(?:,|and)?\s*"[^"]+")+)')
SEE = re.compile(r'\bsee\s+"([^"]+)"')

# Files that still hold dead citations because someone else was editing them when the rest were
# replaced. The replacements are written out in /work/main/.citations_todo.md (not committed);
# whoever applies them removes the file from here. The goal is an empty dict.
ALLOWED: dict[str, str] = {}


def headings() -> set[str]:
    text = FORMATS.read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@functools.cache
def files() -> tuple[Path, ...]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.suffix in (".py", ".md") and path.is_file() and path != THIS
                    and "__pycache__" not in path.parts and "expected" not in path.parts):
                found.append(path)
    return tuple(found)


@functools.cache
def prose(path: Path) -> str:
    """The comments and docstrings of a Python file, each with its whitespace collapsed (a
    comment's continuation lines joined); a Markdown file whole. Tokenizing is the slow part, so
    a file whose text has neither a citation nor a dead one is skipped."""
    text = path.read_text(encoding="utf-8")
    if "FORMATS.md" not in text and not dead(text):
        return ""
    if path.suffix == ".md":
        return " ".join(text.split())
    comments = [tok.string.lstrip("#") for tok in
                tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT]
    docs = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return " ".join(" ".join(part.split()) for part in [" ".join(comments), *docs])


def cited(text: str) -> list[str]:
    return [name for m in CITATION.finditer(text) for name in re.findall(r'"([^"]+)"', m.group(1))]


def dead(text: str) -> list[str]:
    return [m.group(0) for rx in DEAD for m in rx.finditer(text)]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_cited_heading_exists():
    known = headings()
    missing = {f"{rel(p)}: {name!r}" for p in files() for name in cited(prose(p))
               if name not in known}
    assert not missing, f"FORMATS.md has no such heading: {sorted(missing)}"


def test_formats_md_refers_only_to_its_own_headings():
    text = " ".join(FORMATS.read_text(encoding="utf-8").split())
    assert set(SEE.findall(text)) <= headings()


def test_formats_md_is_cited():
    assert sum(len(cited(prose(p))) for p in files()) >= 20


def test_no_comment_cites_a_document_that_is_not_in_the_repository():
    found = {rel(p): dead(prose(p)) for p in files()}
    bad = {path: hits for path, hits in found.items() if hits and path not in ALLOWED}
    assert not bad, ("cite FORMATS.md \"Heading\" or the upstream source instead: "
                     f"{bad}")


def test_the_allow_list_only_holds_files_that_still_need_it():
    stale = [path for path in ALLOWED if not dead(prose(ROOT / path))]
    assert not stale, f"no dead citations left: remove {stale} from ALLOWED"
