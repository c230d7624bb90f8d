"""What the browser knows so far: the layout at once, each file's contents as they arrive.

Plain Python (no Textual) so it can be unit-tested and reused.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from ckpt_browser import alarms
from ckpt_browser.analysis.modules import ModuleNode, build_modules
from ckpt_browser.model import (
    Checkpoint,
    FileInfo,
    Layout,
    Problem,
    ResumeReport,
    TensorInfo,
    Totals,
    TrainingState,
    natural_key,
)
from ckpt_browser.tui.common.filter import name_matcher


class Matched(NamedTuple):
    tensors: int
    total: int  # tensors in the checkpoint
    files: int  # files with a match
    params: int
    bytes: int
    unread: int  # matches known only by name (the index's), not yet summed


@dataclass(eq=False)  # one model per load, compared by identity (the load token)
class BrowseModel:
    layout: Layout
    shards: dict[str, FileInfo] = field(default_factory=dict)  # every file read so far, by name
    checkpoint: Checkpoint | None = None  # set once every file is read
    modules: ModuleNode | None = None  # the whole module tree, built off the UI thread
    training: TrainingState | None = None  # read after the weights' headers
    resume: ResumeReport | None = None  # the verdict, from the weights and the training state
    pattern: str = ""
    failed: dict[str, str] = field(default_factory=dict)  # worker group -> why it stopped
    errors_told: int = 0  # errors the last "press p" notice counted
    match_at: int | None = None  # which of the filter's matches n / N last went to
    match_count: int = 0  # of how many, in the view on screen
    # NaN / Inf found by reading values (`v`, the values check): (file, tensor) -> problem
    values_found: dict[tuple[str, str], Problem] = field(default_factory=dict)

    def __repr__(self) -> str:
        # @work describes each worker by repr(args): the dataclass repr of 92,000 tensors
        # took 0.9 s on the UI thread at each `s` in the table
        return f"BrowseModel({self.layout.path!r}, {len(self.shards)} files read)"

    def __post_init__(self) -> None:
        self._shown: dict[tuple[str, str, bool], list] = {}  # (pattern, shard, read) -> items
        self._module_cache: tuple = (None, None)  # ((pattern, headers read), tree)
        self._paths_cache: tuple = (None, [])  # ((pattern, mode, headers read, ...), paths)
        self._index_names: dict[str, list[str]] = defaultdict(list)
        self._memos: dict[str, tuple] = {}  # what -> (state it was made in, value)
        if self.layout.index is not None:
            for tname, fname in self.layout.index.weight_map.items():
                self._index_names[fname].append(tname)

    # -- loading ---------------------------------------------------------
    def add(self, batch: list[FileInfo]) -> None:
        for shard in batch:
            self.shards[shard.name] = shard

    @property
    def done(self) -> int:
        return len(self.shards)

    @property
    def total(self) -> int:
        return len(self.layout.files)

    @property
    def loaded(self) -> bool:
        return self.checkpoint is not None

    @property
    def training_failure(self) -> str | None:
        """Why the training state will never arrive (a reader raised), if it will not."""
        return self.failed.get("training") or self.failed.get("load")

    # -- what to show ----------------------------------------------------
    def _memo(self, what: str, make):
        """make() once per state of the load (files read, checkpoint, training): each batch
        redraws every file's state and the summary, so 10,000 files were quadratic."""
        state = (len(self.shards), id(self.checkpoint), id(self.training),
                 len(self.values_found))
        got = self._memos.get(what)
        if got is None or got[0] != state:
            got = self._memos[what] = (state, make())
        return got[1]

    @property
    def problems(self):
        return self._memo("problems", self._problems)

    def found_in_values(self, file: str, name: str, wrong: list[str]) -> bool:
        """Record that reading a tensor's values found `wrong` ("3 NaN"); True when new.
        A warning, not an error: the file is whole, its values are suspect."""
        if not wrong or (file, name) in self.values_found:
            return False
        self.values_found[(file, name)] = Problem(
            "warning", file, f"values of {name}: {', '.join(wrong)} (found by reading them)")
        return True

    def _problems(self):
        extra = tuple(self.training.problems) if self.training is not None else ()
        extra += tuple(self.values_found.values())
        if self.checkpoint is not None:
            return tuple(dict.fromkeys(self.checkpoint.problems + tuple(extra)))
        found = list(self.layout.problems)
        for shard in self.shards.values():
            found.extend(shard.problems)
        return tuple(dict.fromkeys(tuple(found) + tuple(extra)))

    def totals(self) -> Totals:
        """The weights read so far."""
        return self._memo("totals", self._totals)

    def _totals(self) -> Totals:
        return Totals.sum(f.totals if f.all_weights else Totals.of(f.tensors, "weights")
                          for f in self.shards.values() if f.tensors)

    def others(self) -> dict[str, Totals]:
        """Tensors of the other components read so far (optimizer, rng ...)."""
        if self.checkpoint is not None:
            return self.checkpoint.component_totals
        return self._memo("others", self._others)

    def _others(self) -> dict[str, Totals]:
        kinds: dict[str, Totals] = {}
        for f in self.shards.values():
            if not f.all_weights:
                for kind in {t.component for t in f.tensors} - {"weights"}:
                    kinds[kind] = kinds.get(kind, Totals()) + Totals.of(f.tensors, kind)
        return kinds

    def index_tensor_count(self) -> int | None:
        return len(self.layout.index.weight_map) if self.layout.index else None

    def shard_problems(self, name: str):
        return list(self._memo("by_file", self._by_file).get(name, ()))

    def _by_file(self) -> dict[str | None, list]:
        found: dict[str | None, list] = defaultdict(list)
        for p in self.problems:
            found[p.file].append(p)
        return found

    def shard_state(self, name: str) -> str:
        """'reading', 'ok', 'missing', 'damaged', 'unsafe', 'unsafe-damaged' or 'warning'."""
        if name not in self.shards:
            return "unread" if "load" in self.failed else "reading"
        f = self.shards[name]
        if f.size is None:
            return "missing"
        problems = self.shard_problems(name)
        said = alarms.words(problems, bool(getattr(f.source, "unsafe", ())))
        if said:
            return "-".join(said).lower()
        severities = {p.severity for p in problems} - {"info"}
        return "warning" if severities else "ok"

    def tensors_of(self, name: str, pattern: str | None = None) -> list[TensorInfo | str]:
        """A shard's tensors (from its header), else the names the index maps to it,
        filtered and in natural order. Cached: a keystroke in the filter asks for all."""
        pattern = self.pattern if pattern is None else pattern
        shard = self.shards.get(name)
        key = (pattern, name, shard is not None)
        items = self._shown.get(key)
        if items is None:
            if len(self._shown) > 4 * max(self.total, 1):
                self._shown.clear()
            items = list(shard.tensors) if shard and shard.tensors else \
                list(self._index_names.get(name, []))
            match = name_matcher(pattern)
            items = [i for i in items if match(i if isinstance(i, str) else i.name)]
            items.sort(key=lambda i: natural_key(i if isinstance(i, str) else i.name))
            self._shown[key] = items
        return items

    def module_tree(self, pattern: str | None = None) -> ModuleNode:
        """The module hierarchy of the tensors read so far that match the filter."""
        pattern = self.pattern if pattern is None else pattern
        if not pattern and self.modules is not None:
            return self.modules
        key = (pattern, self.done)
        if self._module_cache[0] != key:
            tensors = [t for name in self.layout.files for t in self.tensors_of(name, pattern)
                       if not isinstance(t, str)]
            self._module_cache = (key, build_modules(tensors))
        return self._module_cache[1]

    def prepare(self, pattern: str, modules: bool) -> None:
        """Do a filter's work ahead (from a worker thread) so applying it is instant."""
        for name in self.layout.files:
            self.tensors_of(name, pattern)
        if modules:
            self.module_tree(pattern)
        self.match_paths("module" if modules else "file", pattern)

    def match_paths(self, mode: str, pattern: str | None = None) -> list[tuple[str, ...]]:
        """Where each tensor matching the filter sits in the tree, in the tree's order: the
        keys from the top node down (file then tensor; modules then tensor), for n and N."""
        pattern = self.pattern if pattern is None else pattern
        if not pattern or mode not in ("file", "module"):
            return []
        key = (pattern, mode, self.done, self.modules is not None)
        cached = self._paths_cache
        if cached[0] != key:
            cached = self._paths_cache = (key, self._walk_paths(mode, pattern))
        return cached[1]

    def _walk_paths(self, mode: str, pattern: str) -> list[tuple[str, ...]]:
        if mode == "file":
            return [(name, t if isinstance(t, str) else t.name)
                    for name in self.layout.files for t in self.tensors_of(name, pattern)]
        paths: list[tuple[str, ...]] = []

        def walk(node: ModuleNode, above: tuple[str, ...]) -> None:
            for child in node.sorted_children():  # the tree shows child modules first
                walk(child, (*above, child.name))
            paths.extend((*above, t.name) for t in node.sorted_tensors())

        walk(self.module_tree(pattern), ())  # dotted names nest a few levels: no deep recursion
        return paths

    def match_counts(self) -> Matched:
        """What the filter matched, summed, for the filter line."""
        hits = total = files = params = nbytes = unread = 0
        seen: set[str] = set()  # ZeRO-3 placeholders: every rank's file holds the same ones
        for name in self.layout.files:
            shard = self.shards.get(name)
            items = self.tensors_of(name)
            hits, files = hits + len(items), files + bool(items)
            total += len(shard.tensors) if shard and shard.tensors else \
                len(self._index_names.get(name, []))
            for t in items:
                if isinstance(t, str):
                    unread += 1  # a name from the index: its header is not read yet
                elif not t.placeholder or t.name not in seen:
                    seen.update((t.name,) if t.placeholder else ())
                    params, nbytes = params + t.numel, nbytes + t.end - t.begin
        return Matched(hits, total, files, params, nbytes, unread)
