"""A fuzz case: the files of one checkpoint, which reader family they are for, and how a case
is written to a scratch folder or kept as a regression file.

A case is a few files given by path relative to a scratch folder. The path handed to the
readers (`entry`) is derived, never stored: the case's only top-level file or folder when there
is exactly one (`model.safetensors`, `checkpoint-4/`), else the scratch folder itself.

On disk under `regressions/` a one-file case is kept as `<target>-<digest>--<file name>`, and a
case of several files as a folder `<target>-<digest>/` holding them, so the file name (and with
it the format detection) is exactly what the readers saw.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

TARGETS = ("safetensors", "index", "torch", "pickle", "dcp", "state")
REGRESSIONS = Path(__file__).resolve().parent / "regressions"


@dataclass(frozen=True)
class Case:
    target: str  # one of TARGETS: which readers the case is aimed at
    files: tuple[tuple[str, bytes], ...]  # (relative path, content), sorted by path

    @staticmethod
    def of(target: str, files: dict[str, bytes]) -> Case:
        assert target in TARGETS, target
        return Case(target, tuple(sorted(files.items())))

    @property
    def top(self) -> list[str]:
        return sorted({p.split("/", 1)[0] for p, _ in self.files})

    @property
    def entry(self) -> str:
        """What the readers are given, relative to the scratch folder ("" = the folder)."""
        top = self.top
        return top[0] if len(top) == 1 else ""

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.files)

    def digest(self) -> str:
        h = hashlib.sha256(self.target.encode())
        for path, data in self.files:
            h.update(path.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        return h.hexdigest()[:12]

    def write(self, folder: Path) -> Path:
        """Write the files under `folder`; return the entry path."""
        for rel, data in self.files:
            p = folder / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return folder / self.entry if self.entry else folder

    def __repr__(self) -> str:  # hypothesis prints it for a falsifying example: keep it short
        return f"<{self.describe()}>"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis's printer asks for this first
        p.text(repr(self))

    def describe(self) -> str:
        return f"{self.target} case {self.digest()} ({len(self.files)} file(s), " \
            f"{self.size:,} bytes: " + ", ".join(f"{p} {len(d):,}" for p, d in self.files[:6]) + ")"

    # -- regression files ---------------------------------------------------------------------

    def regression_name(self) -> str:
        if len(self.files) == 1 and "/" not in self.files[0][0]:
            return f"{self.target}-{self.digest()}--{self.files[0][0]}"
        return f"{self.target}-{self.digest()}"

    def save(self, folder: Path = REGRESSIONS) -> Path:
        """Keep the case under `folder` (nothing is overwritten: the name is its digest)."""
        dest = folder / self.regression_name()
        if dest.exists():
            return dest
        if len(self.files) == 1 and "/" not in self.files[0][0]:
            folder.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(self.files[0][1])
        else:
            self.write(dest)
        return dest


def load(path: Path) -> Case:
    """A regression file or folder back as a Case (the target is the name up to the first '-')."""
    target = path.name.split("-", 1)[0]
    if path.is_file():
        name = path.name.split("--", 1)[1]
        return Case.of(target, {name: path.read_bytes()})
    files = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = Path(root) / n
            files[p.relative_to(path).as_posix()] = p.read_bytes()
    return Case.of(target, files)


def regressions(folder: Path = REGRESSIONS) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.name.split("-", 1)[0] in TARGETS and (p.is_dir() or "--" in p.name))
