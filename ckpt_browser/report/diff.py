"""`diff --json` (schema in the README) and the plain-text diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_browser import alarms
from ckpt_browser.escape import printable
from ckpt_browser.report.words import json_float, shown_status
from ckpt_browser.values.diff import DiffResult, Row, summary

if TYPE_CHECKING:
    from ckpt_browser.values.state_diff import StateDiff, StepCounters


def _side(loc) -> dict | None:
    if loc is None:
        return None
    return {"dtype": loc.dtype, "shape": list(loc.shape), "file": loc.file}


def row_doc(r: Row) -> dict:
    v = r.values
    doc = {"name": r.name, "status": r.status, "a": _side(r.a), "b": _side(r.b),
           "max_abs_diff": json_float(v.max_abs_diff) if v else None,
           "mean_abs_diff": json_float(v.mean_abs_diff) if v else None,
           "rel_l2": json_float(v.rel_l2) if v else None,
           "cosine": json_float(v.cosine) if v else None,
           "bitwise_equal": v.bitwise_equal if v else None}
    if v is not None and v.nonfinite_mismatch:
        doc["nonfinite_mismatch"] = v.nonfinite_mismatch
    if any(side is not None and side.name != r.name for side in (r.a, r.b)):
        doc["names"] = {"a": r.a.name if r.a else None, "b": r.b.name if r.b else None}
    if r.error:
        doc["error"] = r.error
    return doc


def diff_doc(d: DiffResult, rows: bool = True) -> dict:
    state = d.state.to_doc() if d.state is not None else {}
    state["summary"] = summary(d.state_rows, d.options.values)
    if rows:
        state["tensors"] = [row_doc(r) for r in d.state_rows]
    return {"a": d.a.path, "b": d.b.path,
            "summary": summary(d.rows, d.options.values),
            "tensors": [row_doc(r) for r in d.rows] if rows else None,
            "state": state,
            "options": {"values": d.options.values, "rtol": d.options.rtol,
                        "atol": d.options.atol, "strip_prefix_a": d.options.strip_a,
                        "strip_prefix_b": d.options.strip_b,
                        "include": list(d.options.include), "exclude": list(d.options.exclude),
                        "weights_only": d.options.weights_only},
            "problems": {"a": [p.line() for p in d.a.problems],
                         "b": [p.line() for p in d.b.problems]},
            "notes": d.notes,
            "differs": d.differs}


def write_diff_json(d: DiffResult, out) -> None:
    """diff_doc, written row by row: 94,000 rows never exist as dicts all at once."""
    import json

    head = diff_doc(d, rows=False)
    state = head.pop("state")
    state_rows = d.state_rows
    out.write(json.dumps({k: head[k] for k in ("a", "b", "summary")})[:-1] + ', "tensors": ')
    _rows(d.rows, out)
    out.write(', "state": ' + json.dumps(state)[:-1] + ', "tensors": ')
    _rows(state_rows, out)
    rest = {k: v for k, v in head.items() if k not in ("a", "b", "summary", "tensors")}
    out.write("}, " + json.dumps(rest)[1:] + "\n")


def _rows(rows: list[Row], out) -> None:
    import json

    out.write("[")
    for i, r in enumerate(rows):
        out.write((", " if i else "") + json.dumps(row_doc(r)))
    out.write("]")


def _shape(loc) -> str:
    return f"{loc.dtype} {list(loc.shape)}"


def _line(r: Row) -> str:
    if r.status == "only_in_a":
        return f"  - {r.name}  {_shape(r.a)}"
    if r.status == "only_in_b":
        return f"  + {r.name}  {_shape(r.b)}"
    if r.status in ("shape_changed", "dtype_changed"):
        text = f"  ~ {r.name}  {_shape(r.a)} -> {_shape(r.b)}"
    else:
        text = f"  ~ {r.name}  {_shape(r.a)}"
    v = r.values
    if v is not None and not v.bitwise_equal:
        text += (f"  max|d| {_g(v.max_abs_diff)}  mean|d| {_g(v.mean_abs_diff)}  "
                 f"rel_l2 {_g(v.rel_l2)}  cos {_g(v.cosine)}")
        if v.nonfinite_mismatch:
            text += f"  NaN/Inf mismatched: {v.nonfinite_mismatch:,}"
    if r.error:
        text += f"  (values unreadable: {r.error})"
    return text


def _g(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _counts(s: dict) -> str:
    parts = [f"{s['only_in_a']:,} only in A", f"{s['only_in_b']:,} only in B",
             f"{s['shape_changed']:,} shape changed", f"{s['dtype_changed']:,} dtype changed"]
    if s["values_changed"] is None:  # "unchanged" would read as "the values are the same"
        parts.append(f"{s['unchanged']:,} with the same shape and dtype (values not compared: "
                     "--values compares them)")
    else:
        parts += [f"{s['values_changed']:,} values changed", f"{s['unchanged']:,} unchanged"]
    if s.get("errors"):
        parts.append(f"{s['errors']:,} unreadable")
    return ", ".join(parts)


def _section(title: str, rows: list[Row], values: bool, limit: int) -> list[str]:
    out = [f"{title}: {_counts(summary(rows, values))}"]
    changed = [r for r in rows if r.status != "unchanged" or r.error]
    out += [printable(_line(r)) for r in changed[:limit]]
    if len(changed) > limit:
        out.append(f"  ... and {len(changed) - limit:,} more (--json lists them all)")
    return out


def diff_text(d: DiffResult, limit: int = 200) -> str:
    out = [f"A: {printable(d.a.path)}", f"B: {printable(d.b.path)}", ""]
    out += _section("weights", d.rows, d.options.values, limit)
    if d.state_rows:
        out += [""] + _section("state tensors", d.state_rows, d.options.values, limit)
    out += _state_lines(d.state)
    for side, s in (("A", d.a), ("B", d.b)):
        errors = alarms.errors(s.problems)
        if errors:
            out.append(printable(f"{side} is {alarms.phrase(errors)}: {len(errors)} error(s); "
                                 f"first: {errors[0].line()}"))
    out += [printable(f"note: {n}") for n in d.notes]
    return "\n".join(out)


def _state_lines(state: StateDiff | None) -> list[str]:
    if state is None:
        return []
    out = ["", "training state:"]
    for text, role in state_lines(state):
        out.append(printable(f"  {'! ' if role == 'flag' else 'note: ' if role == 'note' else ''}"
                             f"{text}"))
    return out


def state_lines(state: StateDiff, every_component: bool = False) -> list[tuple[str, str]]:
    """The training-state comparison, one fact a line, as (text, role): role is "" for a fact,
    "flag" for a telling case, "note" for what could not be found."""
    a, b = state.a, state.b
    out = [(f"{key:<10} {_v(x)} -> {_v(y)}", "") for key, x, y in (
        ("framework", a.framework, b.framework), ("step", a.step, b.step),
        ("epoch", a.epoch, b.epoch), ("ranks", a.ranks, b.ranks))]
    out += [(f"lr[{g.group}]{'':<5} {_v(g.a)} -> {_v(g.b)}", "") for g in state.lr]
    steps = state.optimizer_steps
    if steps.a is not None or steps.b is not None:
        out.append((f"optimizer step counters  {_range(steps.a)} -> {_range(steps.b)}", ""))
    last = state.scheduler_last_epoch
    if last.a is not None or last.b is not None:
        out.append((f"scheduler last_epoch     {_v(last.a)} -> {_v(last.b)}", ""))
    for kind, c in state.components.items():
        same = c.a == c.b
        if every_component or not same:
            out.append((f"{kind:<10} {shown_status(c.a)} -> {shown_status(c.b)}"
                        f"{'' if same else '  (differs)'}", ""))
    out += [(f.message, "flag") for f in state.flags]
    out += [(n, "note") for n in state.notes]
    return out


def _v(x) -> str:
    if x is None:
        return "?"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _range(s: StepCounters | None) -> str:
    if s is None:
        return "none"
    return _v(s.min) if s.min == s.max else f"{_v(s.min)}..{_v(s.max)}"
