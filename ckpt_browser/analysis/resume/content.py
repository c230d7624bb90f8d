"""Checks on what the files hold, for checkpoints read by content (custom loops and popular
projects' single files): the counters agree, the weights are the raw weights and not only an EMA
copy (FORMATS.md "Resume verdict"), a pickled module names its class, and a custom loop is told
what its own resume code must restore.
"""

from __future__ import annotations

import re

from ckpt_browser.analysis.resume.verdict import Draft
from ckpt_browser.model import INFO, WARNING, TrainingState
from ckpt_browser.parts.projects import PROJECTS
from ckpt_browser.producers import reads_by_names

NAMED = re.compile(r"(?:^|[^a-z])(epoch|ep|step|steps|iter|iteration|it|checkpoint|ckpt|model|"
                   r"recovery)[-_=]?(\d{1,9})(?!\d)", re.I)


def check_content(draft: Draft, ts: TrainingState, path: str, ckpt=None) -> None:
    _adapters(draft, ckpt)
    if reads_by_names(ts.framework):  # read by names: the checks below are for content
        return
    _ema_only(draft)
    _module_classes(draft)
    _counters(draft, ts, path)
    project = PROJECTS.get(ts.framework)
    if project is not None and project.own_loop:
        held = [k for k, c in draft.components.items() if c.status == "ok"]
        draft.add(INFO, "progress", None,
                  f"a custom training loop: the resume is your own code, so it is only as exact "
                  f"as that code is complete: it must restore every part found here "
                  f"({', '.join(held)}) before the first step, the RNG last (torch.set_rng_state "
                  "and its numpy and random peers), after building the data loader.")


def _adapters(draft: Draft, ckpt) -> None:
    """PEFT saves only the adapter: the resume needs the base model it names (FORMATS.md
    "PEFT adapters")."""
    if ckpt is None:
        return
    adapters = [f for f in ckpt.files if f.name.rsplit("/", 1)[-1].startswith("adapter_model.")]
    if not adapters or draft.components["weights"].status != "ok":
        return
    base = _base_model(ckpt, adapters[0].name)
    draft.add(INFO, "weights", adapters[0].name,
              f"{adapters[0].name} holds only the adapter (PEFT): the resume must load the same "
              f"base model first ({base}), and the optimizer covers only the adapter's tensors.")


def _base_model(ckpt, adapter: str) -> str:
    import json
    import os

    from ckpt_browser.readers.regular import open_regular

    config = os.path.join(ckpt.layout.root, os.path.dirname(adapter), "adapter_config.json")
    try:
        with open_regular(config) as f:
            doc = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return "adapter_config.json, which names it, is not readable"
    name = doc.get("base_model_name_or_path") if isinstance(doc, dict) else None
    return f"{name}, as adapter_config.json names it" if isinstance(name, str) and name else \
        "adapter_config.json does not name it"


def _ema_only(draft: Draft) -> None:
    w = draft.components["weights"]
    if w.status == "ok" and w.facts.get("ema") and not w.facts.get("roots"):
        draft.add(WARNING, "weights", w.files[0] if w.files else None,
                  "only an EMA copy of the weights is saved, not the raw weights: the resume "
                  "starts the model from the EMA (as Ultralytics does by design), so training "
                  "does not continue from the weights it had; the resume will not be bit-exact.")


def _module_classes(draft: Draft) -> None:
    w = draft.components["weights"]
    classes = [c for c in w.facts.get("classes") or [] if not c.startswith("__torch__.")]
    if w.status == "ok" and classes:  # (a TorchScript archive says so on its own)
        modules = sorted({c.rsplit(".", 1)[0] for c in classes})
        draft.add(INFO, "weights", w.files[0] if w.files else None,
                  f"the weights are pickled {', '.join(classes[:3])} objects (torch.save(model)): "
                  f"torch.load needs {', '.join(modules[:3])} importable, with the same code, and "
                  "runs it to rebuild them; weights_only=True refuses the file. Nothing was "
                  "imported here.")


def _counters(draft: Draft, ts: TrainingState, path: str) -> None:
    """Every counter the files hold, the optimizer's own step count and the number in the
    file or folder name: any disagreement is a resume bug waiting to happen."""
    progress = draft.components["progress"].facts
    opt = draft.components["optimizer"]
    step, epoch = ts.step, ts.epoch
    adam = [v for v in (opt.facts.get("step") or []) if isinstance(v, (int, float))]
    file = opt.files[0] if opt.files else None
    if adam and step is not None and opt.status == "ok":
        top = int(max(adam))
        scaled = draft.components["scaler"].status == "ok"
        where = progress.get("step_from", "the step counter")
        if top > step + 1:
            draft.add(WARNING, "progress", file,
                      f"the optimizer has taken {top:,} steps (Adam's step) but {where} says "
                      f"{step:,}: the counter lags the optimizer, so a schedule or stopping point "
                      "computed from it is off; the resume will not be bit-exact.")
        elif top < step - 1:
            if top and step % top == 0 and step // top > 1:
                draft.add(INFO, "progress", file,
                          f"{where} is {step:,} and the optimizer has taken {top:,} steps: "
                          f"{step // top} counts per optimizer step (gradient accumulation?).")
            elif scaled:
                draft.add(INFO, "progress", file,
                          f"the optimizer has taken {top:,} steps and {where} says {step:,}: "
                          "the GradScaler skipped the others (inf or NaN gradients).")
            else:
                draft.add(WARNING, "progress", file,
                          f"{where} says {step:,} but the optimizer has taken only {top:,} "
                          "steps (Adam's step), with no GradScaler to skip any: the counters "
                          "disagree; the resume will not be bit-exact.")
    sched = draft.components["scheduler"]
    last = sched.facts.get("last_epoch")
    counted = [v for v in (step, int(max(adam)) if adam else None) if v is not None]
    if isinstance(last, int) and sched.status == "ok" and counted and last > max(counted) + 1:
        draft.add(WARNING, "scheduler", sched.files[0] if sched.files else None,
                  f"the LR scheduler has stepped {last:,} times (last_epoch) but the run has "
                  f"taken {max(counted):,} steps: it was stepped twice per step or restored "
                  "from another run; the learning rate after the resume is not the run's.")
    _name_number(draft, path, step, epoch)


def _name_number(draft: Draft, path: str, step, epoch) -> None:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    m = NAMED.search(name)
    if m is None or (step is None and epoch is None):
        return
    n = int(m.group(2))
    close = [v for v in (step, epoch) if isinstance(v, (int, float)) and abs(v - n) <= 1]
    if close:
        return
    said = ", ".join(f"{k} {v:,}" for k, v in (("step", step), ("epoch", epoch)) if v is not None)
    draft.add(WARNING, "progress", None,
              f"the name {name} says {m.group(1)} {n:,} but the counters inside say {said}: "
              "a resume that trusts the name (as some scripts do) starts from the wrong step.")
