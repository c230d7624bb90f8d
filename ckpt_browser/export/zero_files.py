"""The files of one DeepSpeed tag folder that zero_to_fp32.py reads, read by the safe reader.

zero_to_fp32 globs `*_model_states.pt` and `*_optim_states.pt` in the tag folder and sorts them
naturally; the first model_states file gives the names and shapes, the optim_states files (one
per data-parallel rank, in rank order) the fp32 partitions.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ckpt_browser.errors import CheckpointError
from ckpt_browser.model import ERROR, Checkpoint, FileInfo, natural_key
from ckpt_browser.parts.common import fields
from ckpt_browser.producers.deepspeed import DS_MODEL, DS_OPTIM
from ckpt_browser.standins import PickleFile

_RANK = re.compile(r"zero_pp_rank_\d+_")


@dataclass(frozen=True)
class TagFiles:
    model: list[PickleFile]  # natural order, as zero_to_fp32 sorts them
    model_paths: list[str]
    optim: list[PickleFile]  # by data-parallel rank
    optim_paths: list[str]
    ranks: list[int]  # the rank of each optim file

    def check_ranks(self, world: int) -> None:
        """One optim_states file for each rank 0 .. world - 1, and no other."""
        for r in range(world):
            if r not in self.ranks:
                name = _RANK.sub(f"zero_pp_rank_{r}_", self.optim[0].name, count=1)
                raise CheckpointError(name, f"missing: partition_count says {world} ranks, and "
                                      "zero_to_fp32 needs the fp32 partition of each")
        for pf, r in zip(self.optim, self.ranks):
            if r >= world:
                raise CheckpointError(pf.name, f"rank {r}, but partition_count says {world} "
                                      "ranks: a file of another save")

    def check_model_ranks(self) -> None:
        """ZeRO-3 frozen parameters: a fragment in each rank's model_states file."""
        want = len(self.optim)
        names = [pf.name for pf in self.model]
        for r in range(want):
            name = _RANK.sub(f"zero_pp_rank_{r}_", self.optim[0].name, count=1)
            name = name.replace("optim_states", "model_states").replace("bf16_", "", 1)
            if name not in names:
                raise CheckpointError(name, "missing: it holds this rank's fragments of the "
                                      "frozen parameters")
        if len(names) != want:
            raise CheckpointError(names[0], f"{len(names)} model_states files for {want} ranks")


def tag_files(ckpt: Checkpoint) -> TagFiles | None:
    """The ZeRO files of the checkpoint's tag folder; None when it has none."""
    infos = {f.name: f for f in ckpt.files}
    optim = [n for n in infos if DS_OPTIM.match(os.path.basename(n))]
    model = [n for n in infos if DS_MODEL.match(os.path.basename(n))]
    zero_model = [n for n in model if isinstance(fields(_source(infos[n])).get("param_shapes"),
                                                 list)]
    folders = sorted({os.path.dirname(n) for n in optim + zero_model})
    if not folders:
        return None
    folder = _folder(ckpt, folders)
    optim = sorted((n for n in optim if os.path.dirname(n) == folder), key=_rank)
    model = sorted((n for n in model if os.path.dirname(n) == folder), key=natural_key)
    where = folder or ckpt.layout.root
    if not model:
        raise CheckpointError(where, "holds no *_model_states.pt: zero_to_fp32 needs the "
                              "parameter names and shapes it holds")
    if not optim:
        raise CheckpointError(model[0], "no *_optim_states.pt next to this file: the fp32 "
                              "master weights are not in this checkpoint")
    _no_strangers(infos, folder)
    ranks = [_rank(n) for n in optim]
    for a, b in zip(optim, optim[1:]):
        if _rank(a) == _rank(b):
            raise CheckpointError(b, f"a second file for rank {_rank(b)} (with {a}): "
                                  "zero_to_fp32 converts one model-parallel rank's files")
    return TagFiles([_read(infos[n]) for n in model], [infos[n].path for n in model],
                    [_read(infos[n]) for n in optim], [infos[n].path for n in optim], ranks)


def _folder(ckpt: Checkpoint, folders: list[str]) -> str:
    if len(folders) == 1:
        return folders[0]
    tag = getattr(ckpt.layout.detection, "tag", "")
    if tag in folders:
        return tag
    raise CheckpointError(ckpt.layout.root, f"holds ZeRO files in {len(folders)} folders "
                          f"({', '.join(folders[:4])}): open one of them")


def _no_strangers(infos: dict, folder: str) -> None:
    """zero_to_fp32 counts every *_optim_states.pt (MoE expert files too) against the ranks."""
    for n in infos:
        leaf = os.path.basename(n)
        if os.path.dirname(n) == folder and leaf.endswith("_optim_states.pt") and \
                not DS_OPTIM.match(leaf):
            raise CheckpointError(n, "not a ZeRO rank file (an MoE expert's?): "
                                  "zero_to_fp32 refuses a folder with it")


def _rank(name: str) -> int:
    m = DS_OPTIM.match(os.path.basename(name))
    return int(m.group(1)) if m else -1


def _source(info: FileInfo):
    return info.source.obj if isinstance(info.source, PickleFile) else None


def _read(info: FileInfo) -> PickleFile:
    """The file's inert records: as the checkpoint read them, else (a rank file past the
    rank_files limit) read now."""
    pf = info.source
    if not isinstance(pf, PickleFile):
        from ckpt_browser.readers.torchfile import read_pickle_file

        pf = read_pickle_file(info.path, info.name)
    if pf.unsafe:
        raise CheckpointError(info.name, f"asks to run {pf.unsafe[0]} when unpickled: not "
                              "run, and not used")
    bad = [p.message for p in pf.problems if p.severity == ERROR]
    if bad or pf.obj is None:
        raise CheckpointError(info.name, bad[0] if bad else "could not be read")
    return pf
