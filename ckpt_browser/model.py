"""Plain data shared by readers, analysis, reports, CLI and TUI."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

if TYPE_CHECKING:
    from ckpt_browser.standins import DcpCheckpoint, PickleFile

# safetensors dtype -> bits per element: all 22 strings of safetensors' Dtype enum
# (FORMATS.md "Safetensors").
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

Severity = Literal["error", "warning", "info"]
Status = Literal["ok", "missing", "incomplete", "damaged", "unsafe", "not-needed"]
Verdict = Literal["exact", "inexact", "weights-only", "broken"]

ERROR: Final = "error"  # Final: a type checker sees the Literal, not str
WARNING: Final = "warning"
INFO: Final = "info"


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity  # ERROR | WARNING | INFO
    file: str | None  # relative to the checkpoint folder
    message: str

    def line(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{self.severity}: {where}{self.message}"


# what a file holds, read from its content (its name is only a hint)
FORMATS = ("safetensors", "torch-zip", "torch-legacy", "pickle", "dcp-metadata", "dcp-rank",
           "torchscript", "export", "json", "other")
# what a tensor belongs to: the seven resume components, EMA copies of the weights, and the rest
TENSOR_KINDS = ("weights", "ema", "optimizer", "scheduler", "scaler", "rng", "data", "progress",
                "other")


class TensorInfo(NamedTuple):
    """A tensor as its file describes it. A NamedTuple: 94,000 of these must be cheap."""

    name: str  # the full path inside its file: a header key, a dotted path through a pickle
    dtype: str | None  # None: a DCP entry whose metadata gives no dtype (readers/load.py)
    shape: tuple[int, ...]
    file: str
    # safetensors: offsets in the data section, as in the header; other formats: absolute
    # offsets in the file, or (0, nbytes) when the file does not say where (`located` False)
    begin: int
    end: int
    numel: int
    component: str = "weights"  # one of TENSOR_KINDS
    located: bool = True
    # a 0-element stand-in at the real shape: ZeRO-3 keeps the values in the optimizer's
    # partitions, and every rank's file holds the same placeholders
    placeholder: bool = False

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


_COMPONENT = itemgetter(7)  # TensorInfo.component


class DtypeTotal(NamedTuple):
    tensors: int = 0
    params: int = 0
    bytes: int = 0

    # only ever added to another DtypeTotal: tuple's concatenation is not wanted here
    def __add__(self, other: DtypeTotal) -> DtypeTotal:  # type: ignore[override]
        return DtypeTotal(self.tensors + other.tensors, self.params + other.params,
                          self.bytes + other.bytes)


@dataclass(frozen=True)
class Totals:
    tensors: int = 0
    params: int = 0
    bytes: int = 0
    by_dtype: dict[str | None, DtypeTotal] = field(default_factory=dict)

    @classmethod
    def of(cls, tensors, component: str | None = None) -> Totals:
        """Totals of `tensors`, or of those belonging to one component."""
        by: dict[str | None, list[int]] = {}
        for _, dtype, _, _, begin, end, numel, kind, _, _ in tensors:
            if component is not None and kind != component:
                continue
            row = by.get(dtype)
            if row is None:
                row = by[dtype] = [0, 0, 0]
            row[0] += 1
            row[1] += numel
            row[2] += end - begin
        return cls._from_rows(by)

    @classmethod
    def _from_rows(cls, by: dict[str | None, list[int]]) -> Totals:
        by_dtype = {k: DtypeTotal(*v) for k, v in sorted(by.items(), key=lambda kv: str(kv[0]))}
        return cls(sum(v.tensors for v in by_dtype.values()),
                   sum(v.params for v in by_dtype.values()),
                   sum(v.bytes for v in by_dtype.values()), by_dtype)

    @classmethod
    def sum(cls, many) -> Totals:
        """The totals of many Totals, added up by dtype once (`+` on each sorts a new dict)."""
        by: dict[str | None, list[int]] = {}
        for t in many:
            for k, v in t.by_dtype.items():
                row = by.setdefault(k, [0, 0, 0])
                row[0], row[1], row[2] = row[0] + v.tensors, row[1] + v.params, row[2] + v.bytes
        return cls._from_rows(by)

    def __add__(self, other: Totals) -> Totals:
        merged = dict(self.by_dtype)
        for k, v in other.by_dtype.items():
            merged[k] = merged.get(k, DtypeTotal()) + v
        return Totals(self.tensors + other.tensors, self.params + other.params,
                      self.bytes + other.bytes,
                      dict(sorted(merged.items(), key=lambda kv: str(kv[0]))))


@dataclass(frozen=True)
class Part:
    """A subtree of a pickled file recognised by its content: the optimizer's state_dict under
    `optimizer_state_dict`, the weights at the root of a plain state dict ..."""

    kind: str  # one of TENSOR_KINDS, or "config" (args, hyper-parameters)
    path: str  # dotted path of the subtree in its file; "" is the whole file
    what: str = ""  # how it was recognised, for people: "torch optimizer state_dict"


@dataclass(frozen=True)
class FileInfo:
    """One file of a checkpoint, whatever its format, as far as it could be read."""

    name: str  # relative to the checkpoint folder
    path: str
    size: int | None = None  # file size; None when the file could not be stat'ed
    header_bytes: int | None = None  # safetensors: N, without the 8-byte length prefix
    metadata: dict[str, str] | None = None
    tensors: tuple[TensorInfo, ...] = ()
    problems: tuple[Problem, ...] = ()
    format: str = "safetensors"  # one of FORMATS, from the content
    detail: str = ""  # one line on what else it holds ("TorchScript archive", "4 pickled values")
    source: object = None  # what the analysis reads: a PickleFile, a DcpCheckpoint ...
    parts: tuple[Part, ...] = ()  # pickles: the components found in it, by content

    @property
    def error(self) -> str | None:
        errors = [p.message for p in self.problems if p.severity == ERROR]
        return "; ".join(errors) if errors else None

    @property
    def ok(self) -> bool:
        return self.error is None

    @cached_property
    def totals(self) -> Totals:
        return Totals.of(self.tensors)

    @cached_property
    def all_weights(self) -> bool:
        return set(map(_COMPONENT, self.tensors)) <= {"weights"}  # C speed: 94,000 tensors


@dataclass(frozen=True)
class IndexInfo:
    name: str  # relative to the checkpoint folder
    weight_map: dict[str, str]  # tensor name -> shard file name
    total_size: int | None
    metadata: dict = field(default_factory=dict)

    @property
    def files(self) -> list[str]:
        """Shard files in order of first appearance."""
        return list(dict.fromkeys(self.weight_map.values()))


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key so that layers.2 < layers.10."""
    parts = _DIGITS.split(name)
    # int() refuses over 4,300 digits; a hostile name may have more
    return tuple((int(p) if len(p) < 4000 else int(p[:4000])) if i % 2 else p
                 for i, p in enumerate(parts))


@dataclass(frozen=True)
class Layout:
    """What a path holds, found from the listing and the index, before any file is read."""

    path: str  # as the user gave it
    root: str  # the folder that file names are relative to
    # "safetensors" | "safetensors-index" | "safetensors-folder" when the weights are
    # safetensors, else "files": any other set of files, read by content
    format: str
    files: tuple[str, ...]  # every file to read, in natural order: shards and all the others
    index: IndexInfo | None = None
    unlisted: tuple[str, ...] = ()  # shard-like files the index does not name
    problems: tuple[Problem, ...] = ()
    # the files that should be safetensors (the index's, *.safetensors)
    shards: tuple[str, ...] = ()
    dcp: tuple[str, ...] = ()  # DCP folders, relative to root ("" the root itself)
    detection: object = None  # what the file and folder names say (producers.base.Detection)
    shown_as: str = ""  # how screens name it when not by its path (the bundled sample)
    # how producers name a file (or a folder on its path) for one rank: such files are read in
    # full only up to limits.rank_files (re.Patterns, Producer.rank_names)
    rank_names: tuple = ()
    # weights files kept apart from the model's (an EMA copy in its own folder): not shards of
    # it, so not cross-checked with them
    apart: tuple[str, ...] = ()

    @cached_property
    def shard_names(self) -> frozenset[str]:
        """`shards` for `in`: an index may name 100,000 files, asked once per file."""
        return frozenset(self.shards)


@dataclass(frozen=True)
class Checkpoint:
    layout: Layout
    files: tuple[FileInfo, ...]  # every file, in the layout's order
    problems: tuple[Problem, ...]

    @property
    def shards(self) -> tuple[FileInfo, ...]:
        return tuple(f for f in self.files if f.format == "safetensors")

    @cached_property
    def totals(self) -> Totals:
        """The weights' totals: every tensor that belongs to the model weights."""
        return self.totals_of("weights")

    def totals_of(self, component: str) -> Totals:
        total = Totals()
        copies = self._placeholder_copies
        for f in self.files:
            if not f.tensors:
                continue
            if f.name in copies:
                total = total + Totals.of(self._own(f, copies), component)
                continue
            total = total + (f.totals if component == "weights" and f.all_weights
                             else Totals.of(f.tensors, component))
        return total

    @cached_property
    def _placeholder_copies(self) -> dict[str, frozenset[str]]:
        """Per file, the placeholders that repeat an earlier file's (every ZeRO-3 rank saves
        the same ones): listed with their file, counted once."""
        seen: set[str] = set()
        out = {}
        for f in self.files:
            if f.format == "safetensors" or f.format == "dcp-metadata":
                continue
            names = [t.name for t in f.tensors if t.placeholder]
            again = frozenset(n for n in names if n in seen)
            seen.update(names)
            if again:
                out[f.name] = again
        return out

    @staticmethod
    def _own(f: FileInfo, copies: dict[str, frozenset[str]]) -> list[TensorInfo]:
        again = copies[f.name]
        return [t for t in f.tensors if not (t.placeholder and t.name in again)]

    @cached_property
    def component_totals(self) -> dict[str, Totals]:
        """Totals of every other component that holds tensors (optimizer, ema, rng ...)."""
        kinds = {t.component for f in self.files if not f.all_weights for t in f.tensors}
        return {k: self.totals_of(k) for k in TENSOR_KINDS if k in kinds and k != "weights"}

    @property
    def tensors(self):
        """Every tensor of every file, whatever component it belongs to."""
        for f in self.files:
            yield from f.tensors

    @property
    def weights(self):
        """The model's weights: the tensors the content analysis put in the weights."""
        copies = self._placeholder_copies
        for f in self.files:
            if f.name in copies:
                yield from (t for t in self._own(f, copies) if t.component == "weights")
            elif f.all_weights:
                yield from f.tensors
            else:
                yield from (t for t in f.tensors if t.component == "weights")

    def file(self, name: str) -> FileInfo | None:
        return next((f for f in self.files if f.name == name), None)

    @property
    def damaged(self) -> bool:
        return any(p.severity == ERROR for p in self.problems)


COMPONENTS = ("weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")


@dataclass(frozen=True)
class Component:
    """One part of training state, as found on disk (`check --json` shows the first three)."""

    kind: str  # one of COMPONENTS
    status: Status
    files: tuple[str, ...] = ()
    detail: str = ""  # one human sentence: what it holds, or what is missing and why it matters
    facts: dict = field(default_factory=dict)  # structured: param groups, per-rank RNG, step ...


@dataclass(frozen=True)
class TrainingState:
    """What a checkpoint holds beside the weights, per the framework that wrote it."""

    framework: str  # a producer's id (producers.PRODUCERS: "hf-trainer" ...), "unknown", or a
    #                 project found by content (parts.projects: "nanogpt", ... "custom")
    step: int | None = None
    epoch: float | None = None
    ranks: int | None = None
    components: dict[str, Component] = field(default_factory=dict)
    files: tuple[PickleFile | DcpCheckpoint, ...] = ()  # every state file read
    problems: tuple[Problem, ...] = ()
    root: str = ""  # the folder the files' names are relative to
    # file -> tensor path -> component, for every file that is not safetensors
    kinds: dict[str, dict[str, str]] = field(default_factory=dict)
    project: str = ""  # who wrote a single-file checkpoint, for people ("nanoGPT (train.py)")
    parts: dict[str, tuple[Part, ...]] = field(default_factory=dict)  # file -> what it holds


VERDICTS = ("exact", "inexact", "weights-only", "broken")


@dataclass(frozen=True)
class Finding:
    """One reason behind a resume verdict: what is wrong, where, what it means on resume."""

    severity: Severity  # ERROR | WARNING | INFO
    component: str  # one of COMPONENTS
    file: str | None
    message: str


@dataclass(frozen=True)
class ResumeReport:
    """`ckpt-browser check`: one verdict for one checkpoint (what `check --json` prints)."""

    path: str
    format: str
    verdict: Verdict  # one of VERDICTS
    step: int | None
    ranks: int | None
    components: dict[str, Component]
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class ResumeTimeline:
    """`ckpt-browser check` on a folder of checkpoints: every one's report, newest first."""

    path: str
    reports: tuple[ResumeReport, ...]  # newest first, as the timeline orders them
    newest_exact: ResumeReport | None = None  # the newest checkpoint that resumes exactly
    unchecked: tuple[str, ...] = ()  # the older ones past the newest CHECKED: listed only
