"""The weights' integrity: the safetensors header and index checks `load_checkpoint` ran.

`training_state` lists safetensors shards by name only; an error in a header (truncated,
bad offsets) or the index (a shard it names is missing) makes the weights unloadable.
"""

from __future__ import annotations

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import ERROR, INFO, WARNING, Checkpoint, Component
from ckpt_browser.parts.common import name_list

MISSING = "file does not exist"
AFTER = ("the model cannot be loaded without it, so nothing can resume from this checkpoint; "
         "copy it again from where the run saved it, or resume from an earlier checkpoint.")


def weight_files(draft: Draft, ckpt: Checkpoint) -> set[str | None]:
    """The files the weights are in: shards and their index, and the torch files whose content
    holds the weights. Other files' problems belong to their own components; DCP folders
    have a check of their own (tiling)."""
    names: set[str | None] = {None, *ckpt.layout.shards}
    names.update(f.name for f in ckpt.files if f.name.endswith(".safetensors.index.json"))
    if draft.components["weights"].status == "ok":  # else its status already says why
        names.update(draft.components["weights"].files)
        names.update(f.name for f in ckpt.files if f.format not in ("dcp-metadata", "dcp-rank")
                     and any(t.component == "weights" for t in f.tensors))
    dcp = {f.name for f in ckpt.files if f.format in ("dcp-metadata", "dcp-rank")}
    return names - dcp


def check_weights(draft: Draft, ckpt: Checkpoint | None) -> None:
    """One error finding per unreadable weight file; the weights component says so too."""
    if ckpt is None:
        return
    ours = weight_files(draft, ckpt)
    by_file: dict[str | None, list[str]] = {}
    for p in ckpt.problems:
        if p.file not in ours:
            continue
        if p.severity == ERROR:
            by_file.setdefault(p.file, []).append(p.message)
        elif p.severity == WARNING:
            where = f"{p.file}: " if p.file else ""
            draft.add(INFO, "weights", p.file, f"{where}{p.message}; the weights still load.")
    if not by_file:
        _checked(draft, ckpt)
        return
    for file, messages in by_file.items():
        draft.add(ERROR, "weights", file, _message(file, messages))
    old = draft.components["weights"]
    gone = [f for f, ms in by_file.items() if any(m == MISSING for m in ms)]
    unsafe = [f for f, ms in by_file.items() if any(m.startswith("unsafe") for m in ms)]
    status = "incomplete" if len(gone) == len(by_file) else "unsafe" if unsafe else "damaged"
    named = [f for f in by_file if f]
    what = "would run code when loaded" if status == "unsafe" else "cannot be read"
    draft.components["weights"] = Component(
        "weights", status, tuple(unsafe) if status == "unsafe" else old.files or tuple(named),
        f"{len(named)} weight file{'s' if len(named) != 1 else ''} {what} "
        f"({name_list(named)}): the model cannot be loaded.",
        {**old.facts, "unreadable": named})


def _message(file: str | None, messages: list[str]) -> str:
    if file is None:
        return f"{'; '.join(messages)}: {AFTER}"
    if MISSING in messages:
        rest = [m for m in messages if m != MISSING]
        why = f" ({'; '.join(rest)})" if rest else ""
        return f"{file} is missing{why}: {AFTER}"
    unsafe = [m.startswith("unsafe") for m in messages]  # both: "is UNSAFE and damaged"
    said = " and ".join(w for w, on in (("UNSAFE", any(unsafe)), ("damaged", not all(unsafe)))
                        if on)
    return f"{file} is {said} ({'; '.join(messages)}): {AFTER}"


def _checked(draft: Draft, ckpt: Checkpoint) -> None:
    """Weights listed by name in the training state, now with their headers read."""
    old = draft.components["weights"]
    apart = ckpt.layout.apart
    shards = [f for f in ckpt.shards if f.name not in apart]
    if old.status != "ok" or not shards or any(
            f.format not in ("safetensors", "json") for f in ckpt.files if f.name in old.files):
        return
    n, tensors = len(shards), ckpt.totals.tensors
    checked = "every header and the index check out" if ckpt.layout.index else \
        "every header checks out"
    what = (f"{shards[0].name}: {tensors:,} tensors; its header checks out" if n == 1 else
            f"{n} safetensors shards, {tensors:,} tensors; {checked}")
    if apart:
        what += f"; an EMA copy is kept apart in {name_list(apart)}"
    draft.components["weights"] = Component("weights", "ok", old.files, what + ".", old.facts)
