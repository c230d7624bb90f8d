"""What one TorchScript source file reaches, read as text: never compiled, never run.

torch.jit.save writes each class and function as Python-syntax source, one file per qualifier
(class `__torch__.a.b.C` is `class C` in code/__torch__/a/b.py). torch.jit.load's importer
(torch/csrc/jit/serialization/import_source.cpp) resolves only a few names outside the code
itself: `torch.X` is the operator aten::X, `ops.ns.X` is ns::X, `__torch__.Y` another
definition of the archive or a custom C++ class, the rest (CONSTANTS, fork, annotate ...) are
TorchScript's own. So a file is scanned for dotted names rooted at `torch`, `ops` and
`__torch__`, after its strings and comments are cut out the way TorchScript's lexer reads them
(a backslash escapes the next character, a one-quote string ends at its line, `#` to the end
of the line, ASCII names): nothing can hide in what looks like a string. Only
`getattr(torch, "save")` reads a string, as TorchScript does. `ast` is not used: it costs
about 100 MB and 1.5 s per MiB of source; these regular expressions scan it in milliseconds.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from ckpt_browser.readers.torchscript_ops import chain_words

_STRING = (r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*"""' r"|'''(?:[^'\\]|\\[\s\S]|'(?!''))*'''"
           r'|"(?:[^"\\\n]|\\[\s\S])*"' r"|'(?:[^'\\\n]|\\[\s\S])*'")
_LEXED = re.compile(rf"(?P<s>{_STRING})|(?P<c>#[^\n]*)")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_GAP = r"(?:[ \t\f\r\n]|\\\r?\n)*"  # TorchScript joins lines inside brackets and after a \
_CHAIN = re.compile(rf"(?P<dot>\.{_GAP})?(?P<chain>{_NAME}(?:{_GAP}\.{_GAP}{_NAME})*)")
_PLACE = "\x01"  # a string literal is cut down to \x01<index>\x01
_GETATTR = re.compile(rf"\bgetattr{_GAP}\({_GAP}(?P<chain>{_NAME}(?:{_GAP}\.{_GAP}{_NAME})*)"
                      rf"{_GAP},{_GAP}{_PLACE}(?P<lit>\d+){_PLACE}")
_DEF = re.compile(rf"^(?P<kind>class|def)[ \t]+(?P<name>{_NAME})", re.M)
_METHOD = re.compile(rf"^[ \t]+def[ \t]+(?P<name>{_NAME})", re.M)
ROOTS = ("torch", "ops", "__torch__")


@dataclass(frozen=True)
class Use:
    """A name the code reaches that touches files or processes (or may: ANY_OP)."""

    spelled: str  # "torch.save", "ops.c10d.allreduce_"
    words: str  # what it does
    owner: str  # "S.__setstate__": the class and method, or function, it is in


@dataclass
class Source:
    """One file: its top-level definitions and methods, and what it reaches."""

    defined: dict[str, set[str]] = field(default_factory=dict)  # class or def -> methods
    refs: set[str] = field(default_factory=set)  # __torch__ names, dotted
    uses: list[Use] = field(default_factory=list)
    any_definition: bool = False  # reaches __torch__ by a name it holds: any of them


def strip(text: str) -> tuple[str, list[str]]:
    """The code without comments, each string literal replaced by a numbered placeholder;
    the literals' text (quotes included)."""
    literals: list[str] = []

    def cut(m: re.Match) -> str:
        if m.group("c") is not None:
            return ""
        literals.append(m.group("s"))
        return f"{_PLACE}{len(literals) - 1}{_PLACE}"

    return _LEXED.sub(cut, text), literals


def scan(text: str) -> Source:
    code, literals = strip(text)
    out = Source()
    owners = _owners(code, out)
    aliased: dict[int, str] = {}  # where getattr(X, "name") names X.name
    for m in _GETATTR.finditer(code):
        name = _literal_name(literals[int(m.group("lit"))])
        if name is not None:
            aliased[m.start("chain")] = name
    for m in _CHAIN.finditer(code):
        if m.group("dot") is not None:  # an attribute of something else (x.torch)
            continue
        parts = re.findall(_NAME, m.group("chain"))
        if parts[0] not in ROOTS:
            continue
        extra = aliased.get(m.start("chain"))
        if extra is not None:
            parts.append(extra)
        _note(parts, owners(m.start()), out)
    return out


def _note(parts: list[str], owner: str, out: Source) -> None:
    if parts[0] == "__torch__" and parts[1:3] != ["torch", "classes"]:
        if len(parts) == 1:
            out.any_definition = True
        else:
            out.refs.add(".".join(parts))
        return
    words = chain_words(parts)
    if words is not None:
        out.uses.append(Use(".".join(parts[:SPELLED[parts[0]]]), words, owner))


SPELLED = {"torch": 2, "ops": 3, "__torch__": 5}  # torch.save, ops.ns.op, __torch__...ns.Class


def _literal_name(literal: str) -> str | None:
    body = literal[3:-3] if literal[:3] in ('"""', "'''") else literal[1:-1]
    return body if re.fullmatch(_NAME, body) else None


def _owners(code: str, out: Source):
    """Fill out.defined; a function from a position in `code` to its owner's name."""
    defs = list(_DEF.finditer(code))
    starts: list[int] = []
    names: list[str] = []
    for d, after in zip(defs, defs[1:] + [None]):
        end = after.start() if after is not None else len(code)
        name = d.group("name")
        methods = {m.group("name"): m.start() for m in _METHOD.finditer(code, d.end(), end)}
        out.defined[name] = set(methods)
        starts.append(d.start())
        names.append(name)
        for method, at in sorted(methods.items(), key=lambda kv: kv[1]):
            starts.append(at)
            names.append(f"{name}.{method}")

    def owner(pos: int) -> str:
        i = bisect_right(starts, pos) - 1
        return names[i] if i >= 0 else "(top level)"

    return owner
