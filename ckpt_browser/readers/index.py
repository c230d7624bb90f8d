"""`*.safetensors.index.json`: the weight_map gives the tree skeleton at once."""

from __future__ import annotations

import json
import os

from ckpt_browser import limits
from ckpt_browser.errors import ShardError
from ckpt_browser.model import IndexInfo
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.walk import MAX_ENTRIES
from ckpt_browser.standins import int_from_text


def read_index(path: str, name: str) -> IndexInfo:
    """Parse an index file; raise ShardError with a one-line reason."""
    try:
        size, most = os.path.getsize(path), limits.LIMITS.index_bytes
        if size > most:
            raise ShardError(f"index is {size:,} bytes, over the {most:,}-byte limit "
                             f"({limits.env('index_bytes')} raises it)")
        with open_regular(path) as f:
            doc = json.loads(f.read().decode("utf-8"), parse_int=int_from_text)
    except PermissionError:
        raise ShardError("cannot read the index: permission denied") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ShardError(f"index is not valid JSON: {e}") from None
    except OSError as e:
        raise ShardError(f"cannot read the index: {e.strerror or e}") from None
    if not isinstance(doc, dict):
        raise ShardError("index is not a JSON object")
    weight_map = doc.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(v, str) for v in weight_map.values()
    ):
        raise ShardError('index has no "weight_map" object mapping tensor names to file names')
    files = len(set(weight_map.values()))
    if files > MAX_ENTRIES:  # each is read (or found missing) in turn: bounded like a listing
        raise ShardError(f"index names {files:,} shard files, more than the {MAX_ENTRIES:,} "
                         "a folder is listed with; not read")
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    total = metadata.get("total_size")
    total = total if type(total) is int else None
    return IndexInfo(name, weight_map, total, metadata)
