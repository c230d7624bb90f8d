"""TorchScript archives (torch.jit.save): told apart as torch.load does, and what torch.jit.load
would run named. Nothing is compiled or run.

torch.load hands a zip to torch.jit.load when its records include `constants.pkl`
(torch.serialization._is_torchscript_zip). torch.jit.load unpickles data.pkl and constants.pkl
with TorchScript's own unpickler: each `__torch__` class they name is compiled from its source
under code/ (every method of it, and what those name in turn), and an object rebuilt with a
state runs its class's scripted `__setstate__` when the class has one and a `__getstate__`
(torch/csrc/jit/serialization/import.cpp). That source is read here as text, bounded, from
the classes the pickles name and the names each file uses (torchscript_code.py): the
methods that run at load are named, and any operator or custom class that reaches files or
processes makes the file unsafe (torchscript_ops.py).
"""

from __future__ import annotations

import zipfile
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ckpt_browser.model import ERROR, WARNING, Problem
from ckpt_browser.readers.torchscript_code import MAX_USES, Source, Use, scan
from ckpt_browser.readers.torchscript_ops import class_words, operator_words
from ckpt_browser.readers.zipentries import read_member
from ckpt_browser.standins import Opaque

MAX_CODE_BYTES = 16 * 2**20  # source read from one archive (real models hold a few MB)
MAX_CODE_FILES = 4096
MAX_NODES = 5_000_000  # values looked at in the pickles for the classes they rebuild
SHOWN = 6  # uses named in one message


def torchscript_kind(names: list[str], root: str) -> str | None:
    """"exact": torch.load reads it as TorchScript (its records, which torch lists without the
    root folder, include constants.pkl); "case": only torch.jit.load does (it looks names up
    ignoring case); None: neither."""
    if f"{root}/constants.pkl" in names:
        return "exact"
    want = f"{root}/constants.pkl".lower()
    return "case" if any(n.lower() == want for n in names) else None


@dataclass
class Code:
    problems: list[Problem] = field(default_factory=list)
    unsafe: tuple[str, ...] = ()


def read_code(zf: zipfile.ZipFile, root: str, name: str, kind: str,
              pickled: list[Any] | None, operators: list[str]) -> Code:
    """What torch.jit.load compiles and runs. `pickled`: the objects of data.pkl and
    constants.pkl (None when one could not be read to its end: then every file is read);
    `operators`: those of the lite-interpreter bytecode."""
    rebuilt = _classes(pickled) if pickled is not None else None
    code = _Reader(zf, root)
    code.follow(rebuilt)
    custom = _custom(rebuilt or {})
    at_load = sorted(f"{q}.__setstate__" for q, state in (rebuilt or {}).items()
                     if state and {"__getstate__", "__setstate__"} <= code.methods(q))
    at_load += [u.owner for u in custom]
    uses = code.uses() + custom + _bytecode(operators)
    out = Code([Problem(WARNING, name, _warning(len(code.sources), at_load))])
    if kind == "case":
        out.problems.append(Problem(ERROR, name, "its constants record is not named "
                                    "constants.pkl: torch.load reads the file as a torch.save "
                                    "file, torch.jit.load (which ignores case) as TorchScript"))
    if code.cut:
        out.problems.append(Problem(ERROR, name, code.cut))
    if uses:
        message = _unsafe_message(uses, at_load, kind)
        if any(src.more for src in code.sources.values()):
            message += f"; past {MAX_USES:,} in one file the rest are not listed"
        out.problems.append(Problem(ERROR, name, message))
        out.unsafe = tuple(dict.fromkeys(_entry(u, at_load) for u in uses))
    return out


def custom_classes(obj: Any, name: str) -> Code:
    """A custom C++ class's object as torch._C._pickle_load_obj rebuilds it (a .pt2's
    `custom_obj_*` constant): unsafe unless the class is known to be inert."""
    rebuilt = _classes([obj]) if obj is not None else None
    uses = _custom(rebuilt or {})
    if not uses:
        return Code()
    return Code([Problem(ERROR, name, _unsafe_message(uses, [u.owner for u in uses], "bound"))],
                tuple(dict.fromkeys(f"{u.spelled}.__setstate__" for u in uses)))


def without_constants(obj: Any, name: str) -> Problem | None:
    """A torch.save zip whose pickle rebuilds TorchScript classes: torch.load (which reads it,
    as it has no constants.pkl) cannot import them."""
    classes = sorted(_classes([obj]) or {})
    if not classes:
        return None
    return Problem(WARNING, name, f"its pickle names TorchScript classes ({', '.join(classes[:3])}"
                   f"{' ...' if len(classes) > 3 else ''}) but the zip holds no constants.pkl: "
                   "torch.load reads it as a torch.save file and cannot import them (they exist "
                   "only inside torch.jit.load)")


def _warning(files: int, at_load: list[str]) -> str:
    when = (f"runs {', '.join(at_load[:SHOWN])}"
            f"{f' and {len(at_load) - SHOWN:,} more' if len(at_load) > SHOWN else ''} as it "
            "loads, the rest when the model is called") if at_load else \
        "runs it when the model is called (no __setstate__ runs at load)"
    return (f"a TorchScript archive (torch.jit.save): its tensors are listed; torch.jit.load "
            f"compiles the scripted code in its code/ folder ({files:,} file(s) it uses, read "
            f"here as text, never run) and {when}; torch.load(weights_only=True) refuses it")


def _entry(u: Use, at_load: list[str]) -> str:
    return f"{u.spelled}, in TorchScript {u.owner}" + (" at torch.jit.load" if u.owner in at_load
                                                      else "")


def _unsafe_message(uses: list[Use], at_load: list[str], kind: str) -> str:
    loader = "torch.export.load" if kind == "bound" else "torch.jit.load"
    shown = [f"{u.spelled} ({u.words}) in {u.owner}" + (f", which {loader} runs at load"
                                                          if u.owner in at_load else "")
             for u in uses[:SHOWN]]
    more = f" and {len(uses) - SHOWN:,} more" if len(uses) > SHOWN else ""
    loaders = {"exact": "torch.jit.load, and torch.load, which hands it to torch.jit.load,",
               "case": "torch.jit.load", "bound": "torch.export.load"}[kind]
    what = "custom C++ classes" if kind == "bound" else "TorchScript code"
    return (f"unsafe: its {what} reach{'' if kind == 'bound' else 'es'} files or processes: "
            f"{'; '.join(shown)}{more} (not run here; {loaders} would run it)")


def _bytecode(operators: list[str]) -> list[Use]:
    """The operators the lite interpreter (torch.jit.mobile) would run, as "ns::name"."""
    out = []
    for op in dict.fromkeys(operators):
        ns, _, opname = op.partition("::")
        opname = opname.split(".")[0]
        words = operator_words(ns, opname) if opname else None
        if words:
            spelled = f"torch.{opname}" if ns == "aten" else f"ops.{ns}.{opname}"
            out.append(Use(spelled, words, "the lite-interpreter bytecode (bytecode.pkl)"))
    return out


def _custom(rebuilt: dict[str, bool]) -> list[Use]:
    """Custom C++ classes the pickles rebuild: their C++ __setstate__ runs at load."""
    out = []
    for q, state in rebuilt.items():
        parts = q.split(".")
        if parts[1:3] == ["torch", "classes"] and len(parts) >= 5 and state:
            words = class_words(parts[3])
            if words:
                out.append(Use(q, words, f"{q}.__setstate__"))
    return out


def operators(bytecode: Any) -> list[str]:
    """The "ns::name" operators of lite-interpreter bytecode: its ("operators", ((name,
    overload, count) ...)) sections (torch/csrc/jit/serialization/export_bytecode.cpp)."""
    out: list[str] = []
    stack, budget = [bytecode], MAX_NODES
    while stack and budget:
        budget -= 1
        o = stack.pop()
        if type(o) is not tuple:
            continue
        if len(o) == 2 and o[0] == "operators" and type(o[1]) is tuple:
            out += [op[0] for op in o[1] if type(op) is tuple and op and type(op[0]) is str]
        else:
            stack.extend(o)
    return out


def _classes(objects: list[Any]) -> dict[str, bool] | None:
    """The __torch__ classes named in the pickled graphs -> whether an object of it is rebuilt
    with a state; None when the graphs are too large to look through."""
    out: dict[str, bool] = {}
    stack, seen, budget = list(objects), set(), MAX_NODES
    while stack:
        budget -= 1
        if not budget:
            return None
        o = stack.pop()
        kind = type(o)
        if kind is Opaque:
            if o.qualname.startswith("__torch__."):
                out[o.qualname] = out.get(o.qualname, False) or o.state is not None
            if id(o) not in seen:
                seen.add(id(o))
                stack.extend(o.args)
                stack.append(o.state)
        elif kind in (dict, list, tuple, set, frozenset) and id(o) not in seen:
            seen.add(id(o))
            stack.extend(o.values() if kind is dict else o)
    return out


class _Reader:
    """The code files torch.jit.load would compile, read as text within the budgets."""

    def __init__(self, zf: zipfile.ZipFile, root: str):
        self.zf = zf
        self.prefix = f"{root}/code/"
        self.files = {i.filename.lower(): i for i in zf.infolist()  # torch ignores case
                      if i.filename.lower().startswith(self.prefix.lower())
                      and i.filename.lower().endswith(".py")}
        self.sources: dict[str, Source] = {}  # file key -> what it holds
        self.qualifier: dict[str, str] = {}  # file key -> "__torch__.a.b"
        self.left, self.cut = MAX_CODE_BYTES, ""

    def key(self, qualifier: str) -> str:
        return f"{self.prefix}{qualifier.replace('.', '/')}.py".lower()

    def follow(self, rebuilt: dict[str, bool] | None) -> None:
        if rebuilt is None:  # what the pickles name is not known: every file
            pending = deque(self.files)
        else:
            pending = deque(self.key(q.rsplit(".", 1)[0]) for q in rebuilt)
        everything = rebuilt is None
        while pending:
            key = pending.popleft()
            if key in self.sources or key not in self.files:
                continue
            src = self._read(key)
            if src is None:
                break
            for ref in sorted(src.refs):  # __torch__.a.b.C: any of its prefixes may be a file
                parts = ref.split(".")
                pending.extend(self.key(".".join(parts[:k])) for k in range(1, len(parts)))
            if src.any_definition and not everything:  # __torch__ held as a value: any file
                everything = True
                pending.extend(self.files)

    def _read(self, key: str) -> Source | None:
        info = self.files[key]
        if len(self.sources) >= MAX_CODE_FILES or info.file_size > self.left:
            self.cut = (f"its code/ folder holds more than {MAX_CODE_FILES:,} files or "
                        f"{MAX_CODE_BYTES:,} bytes of source that torch.jit.load would compile "
                        f"(e.g. {info.filename}); the rest is not read, so what it runs is not "
                        "checked")
            return None
        try:
            data = read_member(self.zf, info, self.left, verify=False)
        except (zipfile.BadZipFile, EOFError, ValueError, zlib.error, NotImplementedError,
                RuntimeError, OSError) as e:
            self.cut = (f"{info.filename} cannot be read ({e}): what torch.jit.load would "
                        "compile from it is not checked")
            return None
        self.left -= len(data)
        src = self.sources[key] = scan(data.decode("utf-8", "replace"))
        self.qualifier[key] = info.filename[len(self.prefix):-3].replace("/", ".")
        return src

    def methods(self, qual: str) -> set[str]:
        qualifier, _, cls = qual.rpartition(".")
        src = self.sources.get(self.key(qualifier))
        return src.methods(cls) if src is not None else set()

    def uses(self) -> list[Use]:
        return [Use(u.spelled, u.words, f"{self.qualifier[key]}.{u.owner}")
                for key, src in self.sources.items() for u in src.uses]
