"""What one TorchScript source file reaches, read as text: never compiled, never run.

torch.jit.save writes each class and function as Python-syntax source, one file per qualifier
(class `__torch__.a.b.C` is `class C` in code/__torch__/a/b.py). torch.jit.load's importer
(torch/csrc/jit/serialization/import_source.cpp) resolves only a few names outside the code
itself: `torch.X` is the operator aten::X, `ops.ns.X` is ns::X, `__torch__.Y` another
definition of the archive or a custom C++ class; the rest (CONSTANTS, fork, annotate ...) are
TorchScript's own. So a file is searched for dotted names rooted at `torch`, `ops` and
`__torch__`, once its strings and comments are blanked the way TorchScript's lexer reads them
(a backslash escapes the next character, a one-quote string ends at its line, `#` to the end
of the line, ASCII names): nothing hides in what looks like a string. A name held in a variable
or given to getattr (`t = torch`, `getattr(torch, "save")`) is `torch` alone: any operator.

Speed: real archives hold megabytes of source, a hostile one 16 MiB. The regular expressions
skip the pure operators themselves (torch.add, ops.quantized.linear ...), so Python only sees
the names that matter; `ast` would cost about 100 MB and 1.5 s per MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ckpt_browser.readers.torchscript_ops import NOT_PURE, PURE_NAMESPACES, chain_words

_STRING = (r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*"""' r"|'''(?:[^'\\]|\\[\s\S]|'(?!''))*'''"
           r'|"(?:[^"\\\n]|\\[\s\S])*"' r"|'(?:[^'\\\n]|\\[\s\S])*'")
_LEXED = re.compile(rf"{_STRING}|#[^\n]*")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_GAP = r"(?:[ \t\f\r\n]|\\\r?\n)*"  # TorchScript joins lines inside brackets and after a \
_DOT = rf"{_GAP}\.{_GAP}"
_TAIL = rf"(?:{_DOT}{_NAME})*"
_NAMES = re.compile(_NAME)
_SPACE = frozenset(" \t\f\r\n\\")
MAX_USES = 200  # findings kept from one file; past them the file is unsafe anyway


def _not(names) -> str:
    return rf"(?!(?:{'|'.join(sorted(names))})\b)" if names else ""


def _pure_ops() -> str:
    """`.ns.name` for every pure operator: what may follow `ops` without a finding."""
    alternatives = []
    for ns in sorted(PURE_NAMESPACES):
        bad = [op for (n, op) in NOT_PURE if n == ns]
        alternatives.append(rf"{ns}\b{_DOT}{_not(bad)}{_NAME}")
    return rf"{_DOT}(?:{'|'.join(alternatives)})"


# torch or ops, not an attribute of something else, unless a pure operator follows
_FINDING = re.compile(
    rf"(?:torch(?<![\w.]torch)(?!{_DOT}{_not(w for n, w in NOT_PURE if n == 'aten')}{_NAME})"
    rf"|ops(?<![\w.]ops)(?!{_pure_ops()})){_TAIL}")
_TORCH_NAME = re.compile(rf"__torch__(?<![\w.]__torch__){_TAIL}")
_DEF = re.compile(rf"^(?:class|def)[ \t]+({_NAME})", re.M)
_METHOD = re.compile(rf"^[ \t]+def[ \t]+({_NAME})", re.M)


@dataclass(frozen=True)
class Use:
    """A name the code reaches that touches files or processes (or may: ANY_OP)."""

    spelled: str  # "torch.save", "ops.c10d.allreduce_"
    words: str  # what it does
    owner: str  # "S.__setstate__": the class and method, or function, it is in


@dataclass
class Source:
    """One file: what it names under __torch__ and what it reaches."""

    code: str = ""  # the text with strings and comments blanked
    refs: set[str] = field(default_factory=set)  # __torch__ names, dotted
    uses: list[Use] = field(default_factory=list)
    more: bool = False  # past MAX_USES
    any_definition: bool = False  # __torch__ held as a value: any definition of the archive

    def methods(self, cls: str) -> set[str]:
        """The methods of top-level class `cls`."""
        for d in _DEF.finditer(self.code):
            if d.group(1) == cls and self.code.startswith("class", d.start()):
                after = _DEF.search(self.code, d.end())
                end = after.start() if after else len(self.code)
                return {m.group(1) for m in _METHOD.finditer(self.code, d.end(), end)}
        return set()


def strip(text: str) -> str:
    """The code with each string literal and comment replaced by \\x01 (never part of a name)."""
    return _LEXED.sub("\x01", text)


def scan(text: str) -> Source:
    code = strip(text)
    out = Source(code)
    for chain in set(_TORCH_NAME.findall(code)):
        parts = _NAMES.findall(chain)
        if parts[1:3] == ["torch", "classes"]:  # a custom C++ class
            _use(out, parts, code.find(chain))
        elif len(parts) == 1:
            out.any_definition = True
        else:
            out.refs.add(".".join(parts))
    for m in _FINDING.finditer(code):
        if _after_dot(code, m.start()):  # x . torch: an attribute of something else
            continue
        if len(out.uses) == MAX_USES:
            out.more = True
            break
        _use(out, _NAMES.findall(m.group()), m.start())
    return out


SPELLED = {"torch": 2, "ops": 3, "__torch__": 5}  # torch.save, ops.ns.op, __torch__...ns.Class


def _use(out: Source, parts: list[str], at: int) -> None:
    words = chain_words(parts)
    if words is not None:
        out.uses.append(Use(".".join(parts[:SPELLED[parts[0]]]), words, _owner(out.code, at)))


def _after_dot(code: str, at: int) -> bool:
    i = at - 1
    while i >= 0 and code[i] in _SPACE:
        i -= 1
    return i >= 0 and code[i] == "."


def _owner(code: str, at: int) -> str:
    """The class and method, or the function, that position `at` is in."""
    top = max(code.rfind("\nclass ", 0, at), code.rfind("\ndef ", 0, at))
    head = 0 if code.startswith(("class ", "def ")) else None
    start = top + 1 if top >= 0 else head
    if start is None:
        return "(top level)"
    name = _DEF.match(code, start)
    owner = name.group(1) if name else "(top level)"
    j = at
    for _ in range(1000):  # the nearest "def" above `at` that starts an indented line
        j = code.rfind("def", start + 1, j)
        if j < 0:
            break
        line = code.rfind("\n", 0, j) + 1
        method = _METHOD.match(code, line) if line > start else None
        if method and method.start(1) > j:
            return f"{owner}.{method.group(1)}"
    return owner
