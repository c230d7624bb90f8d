"""Cross-checks between an index and its shards, and between shards."""

from __future__ import annotations

from collections import defaultdict

from ckpt_browser.escape import printable
from ckpt_browser.model import ERROR, WARNING, FileInfo, IndexInfo, Layout, Problem

SHOW = 5  # names quoted per problem before "and N more"


def _names(names: list[str]) -> str:
    shown = ", ".join(printable(n) for n in names[:SHOW])
    return shown + (f" and {len(names) - SHOW:,} more" if len(names) > SHOW else "")


def cross_check(layout: Layout, shards: list[FileInfo]) -> list[Problem]:
    problems = _duplicates_across(shards)
    if layout.index is not None:
        problems += _against_index(layout, layout.index, shards)
    return problems


def _duplicates_across(shards: list[FileInfo]) -> list[Problem]:
    where: dict[str, str] = {}
    clashes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for shard in shards:
        for t in shard.tensors:
            first = where.setdefault(t.name, shard.name)
            if first != shard.name:
                clashes[(first, shard.name)].append(t.name)
    return [Problem(ERROR, b, f"{len(names):,} tensor names also appear in {a} "
                    f"(which copy loads depends on load order): {_names(names)}")
            for (a, b), names in clashes.items()]


def _against_index(layout: Layout, index: IndexInfo, shards: list[FileInfo]) -> list[Problem]:
    expected: dict[str, list[str]] = defaultdict(list)
    for tname, fname in index.weight_map.items():
        expected[fname].append(tname)
    problems: list[Problem] = []
    all_ok = True
    total = 0
    for shard in shards:
        want = expected.get(shard.name, [])
        all_ok = all_ok and shard.ok
        total += sum(t.nbytes for t in shard.tensors)
        if shard.header_bytes is None:  # unreadable: its own problem says why
            if want:
                problems.append(Problem(ERROR, shard.name, f"the index maps {len(want):,} tensors "
                                        f"to this file; none can be read: {_names(want)}"))
            continue
        have = {t.name for t in shard.tensors}
        missing = [n for n in want if n not in have]
        if missing:
            problems.append(Problem(ERROR, shard.name, f"{len(missing):,} tensors the index maps "
                                    f"here are not in the file: {_names(missing)}"))
        extra = [t.name for t in shard.tensors if index.weight_map.get(t.name) != shard.name]
        if extra:
            problems.append(Problem(WARNING, shard.name, f"{len(extra):,} tensors in this file are "
                                    f"not mapped to it by the index (loaders skip them): "
                                    f"{_names(extra)}"))
    for name in layout.unlisted:
        problems.append(Problem(WARNING, name, f"shard file not named by {index.name}; "
                                "loaders ignore it"))
    if all_ok and index.total_size is not None and index.total_size != total:
        problems.append(Problem(WARNING, index.name,
                                f"metadata.total_size says {index.total_size:,} "
                                f"bytes but the shard headers add up to {total:,}"))
    return problems
