"""One shard of a sharded checkpoint opened alone (`model-00002-of-00003.safetensors`).

A shard is a weights file to browse, not a checkpoint to resume from: no resume verdict is made
for it. What is certain is the name: transformers writes `{stem}-{i:05d}-of-{n:05d}{ext}` and
its index `{stem}{ext}.index.json` beside them. When that folder holds the index and every
shard, the file is part of the folder (`check` checks the folder); otherwise it is a lone shard.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ckpt_browser.readers.walk import list_folder

_SHARD = re.compile(r"^(?P<stem>.+)-(?P<i>\d+)-of-(?P<n>\d+)(?P<ext>\.safetensors|\.bin)$")


@dataclass(frozen=True)
class ShardOf:
    path: str
    index: int
    total: int
    folder: str
    folder_complete: bool  # the index and all `total` shards are beside it

    def sentence(self) -> str:
        return f"one shard of {self.total}: open the folder for the resume check"


def shard_of(path: str) -> ShardOf | None:
    """The shard a file path names, or None (not a file, or not named as one shard of 2+)."""
    m = _SHARD.match(os.path.basename(path))
    if not m or not os.path.isfile(path):
        return None
    index, total = int(m["i"]), int(m["n"])
    if total < 2 or not 1 <= index <= total:
        return None
    folder = os.path.dirname(path) or "."
    return ShardOf(path, index, total, folder, _complete(folder, m))


def _complete(folder: str, m: re.Match) -> bool:
    try:
        names = set(list_folder(folder).names)
    except OSError:
        return False
    total = int(m["n"])
    if f"{m['stem']}{m['ext']}.index.json" not in names or total > len(names):
        return False  # a name cannot claim more shards than the folder can hold
    width = len(m["i"])
    return all(f"{m['stem']}-{k:0{width}d}-of-{m['n']}{m['ext']}" in names
               for k in range(1, total + 1))
