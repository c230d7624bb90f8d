"""DCP folders: each tensor's chunks must tile its global shape exactly (no gap, no overlap),
and every rank file the metadata names must exist and hold its byte ranges (the reader checks
those; here they become findings). A damaged weight tensor breaks the checkpoint; a damaged
optimizer tensor leaves a warm start; anything else costs exactness."""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.analysis.roles import component_of
from ckpt_browser.model import ERROR, WARNING, TrainingState
from ckpt_browser.standins import DcpCheckpoint, DcpChunk

MAX_LISTED = 5  # tensors named one by one per folder; the rest are counted

CONSEQUENCE = {
    "weights": "torch.distributed.checkpoint cannot load the model, so nothing can resume from "
               "this checkpoint",
    "optimizer": "the optimizer state cannot be loaded, so only a warm start from the weights "
                 "is possible",
}
COPY = "copy the rank files again or resume from an earlier checkpoint."
EARLIER = "the metadata does not describe a whole tensor: resume from an earlier checkpoint."


def consequence(kind: str, fix: str) -> str:
    if kind in CONSEQUENCE:
        return f"{CONSEQUENCE[kind]}; {fix}"
    return (f"the {kind} state cannot be loaded (exclude it from loading to go on without it), "
            f"so the resume will not be bit-exact; {fix}")


def tiling_problem(shape: tuple[int, ...] | None, chunks: tuple[DcpChunk, ...]) -> str | None:
    """Why the chunks do not tile `shape` exactly, or None when they do. Near-linear in the
    chunks: the exact case is decided by their corners (`_tiles`), and only a map that does
    not tile is searched for an overlapping pair, within OVERLAP_WORK comparisons."""
    if shape is None:
        return "the metadata gives no global shape"
    got = _boxes_fast(shape, chunks) if len(chunks) > SMALL else None
    boxes, covered = got if got is not None else ([], 0)
    for c in chunks if got is None else ():
        if len(c.offsets) != len(shape) or len(c.sizes) != len(shape):
            return (f"a chunk at {list(c.offsets)} has {len(c.sizes)} dimensions, the tensor "
                    f"{len(shape)}")
        if any(o + s > d for o, s, d in zip(c.offsets, c.sizes, shape)):
            return (f"the chunk at {list(c.offsets)} of size {list(c.sizes)} reaches past the "
                    f"shape {list(shape)}")
        if all(s > 0 for s in c.sizes):
            boxes.append(c)
            covered += prod(c.sizes)
    total = prod(shape)
    if covered == total and _tiles(shape, boxes):
        return None
    pair = _overlap(boxes)
    if pair is not None and pair is not _GAVE_UP:
        a, b = pair
        return f"the chunks at {list(a.offsets)} and {list(b.offsets)} overlap"
    if covered < total:
        return (f"its chunks cover {covered:,} of its {total:,} elements, a gap of "
                f"{total - covered:,}")
    return (f"its {len(boxes):,} chunks cover {covered:,} elements where it has {total:,}: "
            "some overlap")


def _boxes_fast(shape: tuple[int, ...], chunks) -> tuple[list[DcpChunk], int] | None:
    """The chunks that hold elements and how many they hold, checked in numpy (1,000,000
    chunks in a fraction of a second); None when any chunk is wrong or its numbers do not fit
    in int64, and the plain loop says which."""
    import numpy as np

    try:
        off = np.array([c.offsets for c in chunks], dtype=np.int64).reshape(len(chunks), -1)
        size = np.array([c.sizes for c in chunks], dtype=np.int64).reshape(len(chunks), -1)
    except (ValueError, OverflowError, TypeError):  # ragged, or past int64
        return None
    if off.shape != size.shape or off.shape[1] != len(shape) or any(d >= 2**62 for d in shape):
        return None
    if (off >= 2**62).any() or (size >= 2**62).any() or (off + size > np.array(
            shape, dtype=np.int64)).any():
        return None
    full = (size > 0).all(axis=1)
    counts = size[full].prod(axis=1, dtype=np.float64)  # exact below 2**53 elements
    if not len(counts) or counts.sum() >= 2**53:
        return None
    return [c for c, keep in zip(chunks, full.tolist()) if keep], int(counts.sum())


MAX_CORNERS = 2**26  # corners counted for one tensor (chunks x 2**dimensions split)
OVERLAP_WORK = 1_000_000  # pairs of chunks compared while looking for an overlap
_GAVE_UP = object()


def _tiles(shape: tuple[int, ...], boxes: list[DcpChunk]) -> bool:
    """Whether the boxes cover `shape` exactly once. Each box's corners are counted with the
    sign (-1)**(how many of its coordinates are upper ends); those signed counts determine the
    sum of the boxes' indicators, so the boxes tile the shape exactly when the counts are the
    shape's own corners. Dimensions no chunk splits are left out; with too many corners to
    count, False (the caller then says what it finds)."""
    axes = [i for i in range(len(shape))
            if any(c.offsets[i] != 0 or c.sizes[i] != shape[i] for c in boxes)]
    if not axes:
        return len(boxes) == 1 or prod(shape) == 0 == len(boxes)
    if len(boxes) << len(axes) > MAX_CORNERS or any(shape[i] >= 2**62 for i in axes):
        return False
    radix = [1]
    for i in reversed(axes[1:]):
        radix.insert(0, radix[0] * (shape[i] + 1))
    if radix[0] * (shape[axes[0]] + 1) >= 2**62:  # the corner keys must fit in int64
        return False
    want = {}
    for bits in range(1 << len(axes)):
        key = sum(shape[i] * r for k, (i, r) in enumerate(zip(axes, radix)) if bits >> k & 1)
        want[key] = -1 if bin(bits).count("1") % 2 else 1
    count = _corners_numpy if len(boxes) > SMALL else _corners
    return count(boxes, axes, radix) == want


SMALL = 4096  # chunks counted in plain Python (a `check` of a few chunks never loads numpy)


def _corners(boxes: list[DcpChunk], axes: list[int], radix: list[int]) -> dict[int, int]:
    """Each corner's key (its coordinates in mixed radix) -> its signed count, zeros left out."""
    counts: dict[int, int] = {}
    for c in boxes:
        for bits in range(1 << len(axes)):
            key, sign = 0, 1
            for k, (i, r) in enumerate(zip(axes, radix)):
                if bits >> k & 1:
                    key += (c.offsets[i] + c.sizes[i]) * r
                    sign = -sign
                else:
                    key += c.offsets[i] * r
            counts[key] = counts.get(key, 0) + sign
    return {k: v for k, v in counts.items() if v}


def _corners_numpy(boxes: list[DcpChunk], axes: list[int], radix: list[int]) -> dict[int, int]:
    """`_corners` for many chunks: a million in about a second."""
    import numpy as np

    lo = np.array([c.offsets for c in boxes], dtype=np.int64)[:, axes]
    hi = lo + np.array([c.sizes for c in boxes], dtype=np.int64)[:, axes]
    weights = np.array(radix, dtype=np.int64)
    keys, signs = [], []
    for bits in range(1 << len(axes)):
        upper = np.array([(bits >> k) & 1 for k in range(len(axes))], dtype=bool)
        keys.append(np.where(upper, hi, lo) @ weights)
        signs.append(np.full(len(boxes), -1.0 if bin(bits).count("1") % 2 else 1.0))
    points, where = np.unique(np.concatenate(keys), return_inverse=True)
    counts = np.bincount(where, weights=np.concatenate(signs), minlength=len(points))
    kept = counts != 0  # exact: |counts| stay far below 2**53
    return {int(k): int(v) for k, v in zip(points[kept], counts[kept])}


def _overlap(boxes: list[DcpChunk]):
    """A pair of chunks that overlap, None when none does, or _GAVE_UP past OVERLAP_WORK
    comparisons. A sweep along the axis with the most distinct offsets: row-, column- and
    block-sharded tensors keep the set of boxes still open small."""
    if len(boxes) < 2:
        return None
    if not boxes[0].sizes:  # scalars: any two chunks overlap
        return boxes[0], boxes[1]
    axis = max(range(len(boxes[0].sizes)), key=lambda d: len({c.offsets[d] for c in boxes}))
    open_: list[DcpChunk] = []
    work = 0
    for c in sorted(boxes, key=lambda c: c.offsets[axis]):
        start = c.offsets[axis]
        work += 2 * len(open_)
        if work > OVERLAP_WORK:
            return _GAVE_UP
        open_ = [a for a in open_ if a.offsets[axis] + a.sizes[axis] > start]
        for a in open_:
            if all(ao < co + cs and co < ao + as_ for ao, as_, co, cs in
                   zip(a.offsets, a.sizes, c.offsets, c.sizes)):
                return a, c
        open_.append(c)
    return None


def check_dcp(draft: Draft, ts: TrainingState) -> None:
    for d in ts.files:
        if isinstance(d, DcpCheckpoint):
            _reader_problems(draft, ts, d)
            _tiling(draft, ts, d)


def _metadata(d: DcpCheckpoint) -> str:
    return f"{d.folder}/.metadata" if d.folder else ".metadata"


def _in_folder(ts: TrainingState, d: DcpCheckpoint) -> list[str]:
    """Components kept (at least partly) in this DCP folder's files."""
    prefix = f"{d.folder}/" if d.folder else ""

    def here(f: str) -> bool:
        rest = f[len(prefix):]
        return f.startswith(prefix) and "/" not in rest and rest.endswith((".metadata", ".distcp"))

    return [k for k, c in ts.components.items() if any(here(f) for f in c.files)]


def _holder(ts: TrainingState, d: DcpCheckpoint) -> str:
    kinds = {component_of(ts, _metadata(d), k) for k, e in d.entries.items() if e.kind == "tensor"}
    for kind in ("weights", "optimizer"):
        if kind in kinds:
            return kind
    inside = _in_folder(ts, d)
    return inside[0] if inside else "weights"


def _reader_problems(draft: Draft, ts: TrainingState, d: DcpCheckpoint) -> None:
    errors = [p for p in d.problems if p.severity == ERROR and not p.message.startswith("unsafe")]
    if not errors:
        return
    kind = _holder(ts, d)
    severity = ERROR if kind in CONSEQUENCE else WARNING
    covers = [k for k in _in_folder(ts, d) if ts.components[k].status not in ("ok", "unsafe")]
    for p in errors:
        if p.message.startswith("missing: "):
            text = f"{p.file} is missing ({p.message[len('missing: '):]})"
        elif p.file and p.message.startswith(p.file.rsplit("/", 1)[-1]):
            text = p.message
        else:
            text = f"{p.file or d.folder or '.'}: {p.message}"
        draft.add(severity, kind, p.file, f"{text}: {consequence(kind, COPY)}", covers)


def _tiling(draft: Draft, ts: TrainingState, d: DcpCheckpoint) -> None:
    meta = _metadata(d)
    bad: dict[str, list[tuple[str, str]]] = {}
    for key, e in d.entries.items():
        if e.kind == "tensor":
            why = tiling_problem(e.shape, e.chunks)
            if why:
                kind = component_of(ts, meta, key) or "weights"
                bad.setdefault("weights" if kind == "other" else kind, []).append((key, why))
    for kind, hits in bad.items():
        severity = ERROR if kind in CONSEQUENCE else WARNING
        for key, why in hits[:MAX_LISTED]:
            draft.add(severity, kind, meta,
                      f"tensor {key} in {meta}: {why}: {consequence(kind, EARLIER)}")
        if len(hits) > MAX_LISTED:
            draft.add(severity, kind, meta, f"{len(hits) - MAX_LISTED:,} more tensors in {meta} "
                      f"do not tile their shape either: {consequence(kind, EARLIER)}")
        c = draft.components.get(kind)
        if c is not None and c.status == "ok":
            draft.components[kind] = replace(
                c, status="damaged", detail=f"{len(hits):,} tensor{'s' if len(hits) != 1 else ''} "
                f"in {meta} do not tile their shape (first: {hits[0][0]}, {hits[0][1]}).")
