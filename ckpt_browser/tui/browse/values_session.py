"""Which tensor a tree node stands for, where its bytes are, and the values computed so far.

Plain Python (no Textual, no torch): the values panel asks for a node's key on the UI thread
(cheap) and for its TensorLoc in a worker thread (may build a shard's or the training state's
locations once).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ckpt_browser.model import Checkpoint, TensorInfo
from ckpt_browser.standins import (
    DcpCheckpoint,
    DcpChunk,
    DcpEntry,
    NumpyArray,
    PickleFile,
    TensorRef,
)
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref

Key = tuple[str, str, str]  # ("weights" | "state", file, tensor name) as values.locate names them


def tensor_key(ref: Ref | None) -> Key | None:
    """The tensor a node stands for, or None when it is not a tensor with readable values."""
    if ref is None:
        return None
    if ref.kind == "tensor" and isinstance(ref.tensor, TensorInfo):
        return ("weights", ref.tensor.file, ref.tensor.name)
    if ref.kind == "value" and isinstance(ref.value, TensorRef) and \
            isinstance(ref.file, PickleFile):
        return ("state", ref.file.name, ref.path)
    if ref.kind == "dcp-entry" and isinstance(ref.value, DcpEntry) and ref.value.kind == "tensor":
        return ("state", dcp_metadata(ref.file), ref.path)
    return None


def dcp_metadata(dcp: DcpCheckpoint) -> str:
    """How values.locate names a DCP tensor's file: its folder's .metadata."""
    return f"{dcp.folder}/.metadata" if dcp.folder else ".metadata"


def not_a_tensor(ref: Ref | None) -> str:
    """Why `v` does nothing here, in one line."""
    if ref is not None and ref.kind == "value" and isinstance(ref.value, DcpChunk):
        return "This is one chunk of a DCP tensor: highlight its entry (Left goes up to it) to " \
               "read the whole tensor."
    if ref is not None and ref.kind == "value" and isinstance(ref.value, NumpyArray):
        return "Values of numpy arrays are not read: only torch and safetensors tensors."
    if ref is not None and ref.kind == "tensor" and isinstance(ref.tensor, str):
        return "This tensor's shard header has not been read (or is unreadable): no values."
    return "Highlight a tensor (a weight, or a tensor in the training state) to see its values."


def within_budget(loc, scale=None) -> str | None:
    """Why `v` does not read this tensor, as `stats` would say it (values.budget), or None.
    With FP8 block scales their tensor is read too (and the weight a second time)."""
    from ckpt_browser.values.budget import plan

    return plan([(loc,)] if scale is None else [(loc,), (scale,)]).message()


@dataclass(eq=False)
class StatsJob:
    """One running computation; `cancel` stops its worker between blocks."""

    key: Key
    name: str
    cancel: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    total: int = 0


class ValuesSession:
    """Everything `v` knows about one open checkpoint: results, notes, the running job."""

    def __init__(self, model: BrowseModel) -> None:
        self.model = model
        self.results: dict[Key, object] = {}  # Key -> values.stats.Stats, for the session
        self.notes: dict[Key, str] = {}  # Key -> "cancelled" or the error, until run again
        self.job: StatsJob | None = None
        self._shard_locs: dict[str, dict] = {}  # shard name -> {tensor name: TensorLoc}
        self._state_locs: tuple = (None, {})  # (checkpoint, {(file, name): TensorLoc})

    def locate(self, key: Key):
        """The TensorLoc of a key; raises ValuesError. Call from a worker: the first call for a
        shard (or for the training state) builds its locations, later calls look them up."""
        from ckpt_browser.values.read import ValuesError

        kind, file, name = key
        loc = self._weights(file).get(name) if kind == "weights" else None
        if loc is None:  # a tensor of a torch file or DCP folder, in any view
            loc = self._state().get((file, name))
        if loc is None:
            raise ValuesError(f"{file}: {name}: not among the tensors read from it")
        return loc

    def scale_of(self, key: Key, loc):
        """An FP8 weight's block scales (`X.weight_scale_inv`) in the same file, or None.
        Call from a worker, like locate."""
        from ckpt_browser.values.dequant import scale_name

        name = scale_name(loc)
        if name is None:
            return None
        kind, file, _ = key
        return (self._weights(file) if kind == "weights" else {}).get(name) or \
            self._state().get((file, name))

    def _weights(self, shard_name: str) -> dict:
        locs = self._shard_locs.get(shard_name)
        if locs is None:
            from ckpt_browser.values.locate import safetensors_locs

            shard = self.model.shards.get(shard_name)
            if shard is None or shard.format != "safetensors":
                return {}
            one = Checkpoint(self.model.layout, (shard,), ())
            locs = {loc.name: loc for loc in safetensors_locs(one)}
            self._shard_locs[shard_name] = locs
        return locs

    def _state(self) -> dict:
        ckpt = self.model.checkpoint
        if ckpt is None:
            return {}
        if self._state_locs[0] is not ckpt:
            from ckpt_browser.values.locate import state_locs

            self._state_locs = (ckpt, {(loc.file, loc.name): loc for loc in state_locs(ckpt)})
        return self._state_locs[1]
