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
    """Why the chunks do not tile `shape` exactly, or None when they do."""
    if shape is None:
        return "the metadata gives no global shape"
    boxes = []
    for c in chunks:
        if len(c.offsets) != len(shape) or len(c.sizes) != len(shape):
            return (f"a chunk at {list(c.offsets)} has {len(c.sizes)} dimensions, the tensor "
                    f"{len(shape)}")
        if any(o + s > d for o, s, d in zip(c.offsets, c.sizes, shape)):
            return (f"the chunk at {list(c.offsets)} of size {list(c.sizes)} reaches past the "
                    f"shape {list(shape)}")
        if all(s > 0 for s in c.sizes):
            boxes.append(c)
    pair = _overlap(boxes)
    if pair is not None:
        a, b = pair
        return f"the chunks at {list(a.offsets)} and {list(b.offsets)} overlap"
    covered, total = sum(prod(c.sizes) for c in boxes), prod(shape)
    if covered < total:
        return (f"its chunks cover {covered:,} of its {total:,} elements, a gap of "
                f"{total - covered:,}")
    return None


def _overlap(boxes: list[DcpChunk]) -> tuple[DcpChunk, DcpChunk] | None:
    """A sweep along the axis with the most distinct offsets: row-, column- and block-sharded
    tensors keep the set of boxes still open small."""
    if len(boxes) < 2:
        return None
    if not boxes[0].sizes:  # scalars: any two chunks overlap
        return boxes[0], boxes[1]
    axis = max(range(len(boxes[0].sizes)), key=lambda d: len({c.offsets[d] for c in boxes}))
    open_: list[DcpChunk] = []
    for c in sorted(boxes, key=lambda c: c.offsets[axis]):
        start = c.offsets[axis]
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
