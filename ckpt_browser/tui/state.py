"""What the browser knows so far: the layout at once, shard headers as they arrive.

Plain Python (no Textual) so it can be unit-tested and reused.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ckpt_browser.analysis.filter import name_matcher
from ckpt_browser.model import ERROR, Checkpoint, Layout, ShardInfo, TensorInfo, Totals, natural_key


@dataclass
class BrowseState:
    layout: Layout
    shards: dict[str, ShardInfo] = field(default_factory=dict)
    checkpoint: Checkpoint | None = None  # set once every header is read
    pattern: str = ""

    def __post_init__(self) -> None:
        self._index_names: dict[str, list[str]] = defaultdict(list)
        if self.layout.index is not None:
            for tname, fname in self.layout.index.weight_map.items():
                self._index_names[fname].append(tname)

    # -- loading ---------------------------------------------------------
    def add(self, batch: list[ShardInfo]) -> None:
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

    # -- what to show ----------------------------------------------------
    @property
    def problems(self):
        if self.checkpoint is not None:
            return self.checkpoint.problems
        found = list(self.layout.problems)
        for shard in self.shards.values():
            found.extend(shard.problems)
        return tuple(found)

    def totals(self) -> Totals:
        total = Totals()
        for shard in self.shards.values():
            total = total + shard.totals
        return total

    def index_tensor_count(self) -> int | None:
        return len(self.layout.index.weight_map) if self.layout.index else None

    def shard_problems(self, name: str):
        return [p for p in self.problems if p.file == name]

    def shard_state(self, name: str) -> str:
        """'reading', 'ok', 'missing', 'damaged' or 'warning'."""
        if name not in self.shards:
            return "reading"
        if self.shards[name].size is None:
            return "missing"
        severities = {p.severity for p in self.shard_problems(name)}
        return "damaged" if ERROR in severities else "warning" if severities else "ok"

    def tensors_of(self, name: str) -> list[TensorInfo | str]:
        """A shard's tensors (from its header), else the names the index maps to it."""
        shard = self.shards.get(name)
        items: list[TensorInfo | str] = list(shard.tensors) if shard and shard.tensors else \
            list(self._index_names.get(name, []))
        match = name_matcher(self.pattern)
        items = [i for i in items if match(i if isinstance(i, str) else i.name)]
        return sorted(items, key=lambda i: natural_key(i if isinstance(i, str) else i.name))

    def visible_tensors(self) -> list[TensorInfo]:
        match = name_matcher(self.pattern)
        return [t for s in self.shards.values() for t in s.tensors if match(t.name)]

    def match_counts(self) -> tuple[int, int, int]:
        """(matching tensors, all tensors, files with a match) for the filter line."""
        match = name_matcher(self.pattern)
        hits = total = files = 0
        for name in self.layout.files:
            names = [t.name for t in self.shards[name].tensors] if name in self.shards and \
                self.shards[name].tensors else self._index_names.get(name, [])
            n = sum(1 for x in names if match(x))
            hits, total, files = hits + n, total + len(names), files + (n > 0)
        return hits, total, files
