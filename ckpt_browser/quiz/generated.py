"""Questions about the checkpoint on screen, with answers computed from it.

Distractors are real values of the same checkpoint where it has enough (other shard names, other
module counts, other rank files), else other real values of the same kind (dtypes, verdicts). A
distractor is never equal to the answer; a question without three distinct wrong options is skipped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from ckpt_browser.analysis.modules import ModuleNode, build_modules
from ckpt_browser.model import (
    DTYPE_BITS,
    VERDICTS,
    Checkpoint,
    ResumeReport,
    TrainingState,
    natural_key,
)
from ckpt_browser.quiz.bank import Question, Text
from ckpt_browser.report.words import GOOD_STATUSES, STATUS_VI, VERDICT_MEANING

if TYPE_CHECKING:
    from ckpt_browser.analysis.opened import Opened

COMMON_DTYPES = ("BF16", "F16", "F32", "F64", "I64", "I32", "U8", "F8_E4M3", "BOOL")


@dataclass(frozen=True)
class Opt:
    value: str
    why_en: str
    why_vi: str


def make(qid: str, topic: str, q: tuple[str, str], explanation: tuple[str, str], right: Opt,
         wrong: list[Opt], rng: random.Random) -> Question | None:
    """A question with the right option and three distinct wrong ones, or None."""
    seen, distinct = {right.value}, []
    for o in wrong:
        if o.value not in seen:
            seen.add(o.value)
            distinct.append(o)
    if len(distinct) < 3:
        return None
    opts = [right, *rng.sample(distinct, 3)]
    rng.shuffle(opts)
    texts = [Text(q[i], tuple(o.value for o in opts),
                  tuple(o.why_en if i == 0 else o.why_vi for o in opts), explanation[i])
             for i in (0, 1)]
    return Question(qid, topic, "generated", opts.index(right), *texts)


def generate(ckpt: Checkpoint | None, training: TrainingState | None = None,
             resume: ResumeReport | None = None, seed: int | None = 0,
             per_kind: int = 2) -> list[Question]:
    """Questions about one checkpoint; the same seed gives the same questions."""
    rng = random.Random(seed)
    found: list[Question | None] = []
    if ckpt is not None:
        tensors = _unique_tensors(ckpt)
        if len(ckpt.layout.shards) > 1:  # which shard: only where the weights are sharded
            sharded = [t for t in tensors if t.file in ckpt.layout.shard_names]
            found += [shard_question(ckpt, t, rng) for t in _pick(rng, sharded, per_kind)]
        found += [dtype_question(ckpt, t, rng) for t in _pick(rng, tensors, per_kind)]
        found += [shape_question(ckpt, t, rng) for t in _pick(rng, tensors, per_kind)]
        found.extend(module_questions(build_modules(_weights(ckpt)), rng, per_kind))
        found.extend(part_questions(ckpt, rng, per_kind))
    if resume is not None:
        found.append(missing_question(resume, rng))
        found.append(verdict_question(resume, rng))
    if training is not None:
        found.extend(dcp_questions(training, rng, per_kind))
    return [q for q in found if q is not None]


def questions_for(opened: Opened, seed: int | None = 0) -> list[Question]:
    """Read an opened checkpoint (headers and state files only) and generate."""
    from ckpt_browser.analysis.resume import report_from

    ckpt, training = opened.checkpoint, opened.training
    return generate(ckpt, training, report_from(ckpt, training), seed)


_NAME = itemgetter(0)  # TensorInfo.name
MAX_OPTIONS = 8  # wrong answers drawn before make() keeps three (not one per module or shape)


def _pick(rng: random.Random, items: list, n: int) -> list:
    return rng.sample(items, min(n, len(items)))


def _weights(ckpt: Checkpoint) -> list:
    return list(ckpt.weights)


def _unique_tensors(ckpt: Checkpoint) -> list:
    """Weights whose name is in exactly one file and where the index (if any) agrees."""
    weights = _weights(ckpt)
    counts: dict[str, int] = {}
    for t in weights:
        counts[t.name] = counts.get(t.name, 0) + 1
    wmap = ckpt.layout.index.weight_map if ckpt.layout.index else {}
    ok = [t for t in weights if counts[t.name] == 1 and wmap.get(t.name, t.file) == t.file]
    return sorted(ok, key=_NAME)  # by plain name: natural_key costs 10 us a tensor


def _record(ckpt: Checkpoint, t) -> tuple[str, str]:
    """Where a tensor's dtype and shape are written: a header, or the pickle's records."""
    if t.file in ckpt.layout.shard_names or t.file.endswith(".safetensors"):
        return f"The header of {t.file}", f"Header của {t.file}"
    return f"The pickled records of {t.file}", f"Bản ghi pickle của {t.file}"


def shard_question(ckpt: Checkpoint, t, rng: random.Random) -> Question | None:
    layout = ckpt.layout
    wrong = [Opt(f, f"{f} does not hold {t.name}: its header does not list it.",
                 f"{f} không chứa {t.name}: header của nó không liệt kê tensor này.")
             for f in (*layout.shards, *layout.unlisted) if f != t.file]
    if layout.index is not None:
        idx = layout.index.name
        wrong.append(Opt(idx, f"{idx} is the index: it maps names to shards but holds no "
                         "tensor bytes.", f"{idx} là file index: nó chỉ ánh xạ tên tensor tới "
                         "shard, không chứa byte nào của tensor."))
    lead = (f"The header of {t.file} lists {t.name} with its dtype, shape and byte offsets.",
            f"Header của {t.file} liệt kê {t.name} cùng dtype, shape và offset byte.")
    right = Opt(t.file, f"Right: {lead[0]}", f"Đúng: {lead[1]}")
    return make(f"gen-shard-{t.name}", "sharding",
                (f"Which shard holds the tensor {t.name}?",
                 f"Tensor {t.name} nằm trong shard nào?"),
                lead, right, wrong, rng)


def dtype_question(ckpt: Checkpoint, t, rng: random.Random) -> Question | None:
    real = sorted({str(x.dtype) for x in _weights(ckpt)})
    others = [d for d in (*real, *COMMON_DTYPES) if d != t.dtype]
    where, where_vi = _record(ckpt, t)
    wrong = [Opt(d, f"{where} records {t.dtype} for this tensor, not {d}.",
                 f"{where_vi} ghi {t.dtype} cho tensor này, không phải {d}.")
             for d in dict.fromkeys(others)]
    bits = DTYPE_BITS.get(t.dtype)
    size = f"; {bits} bits per element" if bits else ""
    size_vi = f"; {bits} bit mỗi phần tử" if bits else ""
    lead = (f"{where} says {t.name} has dtype {t.dtype}{size}.",
            f"{where_vi} ghi {t.name} có dtype {t.dtype}{size_vi}.")
    return make(f"gen-dtype-{t.name}", "safetensors",
                (f"What is the dtype of {t.name}?", f"Tensor {t.name} có dtype gì?"), lead,
                Opt(t.dtype, f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong[:6], rng)


def _shape(shape) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def shape_question(ckpt: Checkpoint, t, rng: random.Random) -> Question | None:
    shapes = sorted({tuple(x.shape) for x in _weights(ckpt) if len(x.shape) == len(t.shape)})
    candidates = [*rng.sample(shapes, min(len(shapes), MAX_OPTIONS)), tuple(reversed(t.shape))]
    right = _shape(t.shape)
    where, where_vi = _record(ckpt, t)
    wrong = [Opt(_shape(s), f"{where} records {right} for {t.name}, not {_shape(s)}.",
                 f"{where_vi} ghi {right} cho {t.name}, không phải {_shape(s)}.")
             for s in candidates]
    lead = (f"{where} says {t.name} has shape {right}: {t.numel:,} elements.",
            f"{where_vi} ghi {t.name} có shape {right}: {t.numel:,} phần tử.")
    return make(f"gen-shape-{t.name}", "safetensors",
                (f"What is the shape of {t.name}?", f"Tensor {t.name} có shape nào?"), lead,
                Opt(right, f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong, rng)


def _modules(root: ModuleNode) -> list[ModuleNode]:
    """Every module below the root, each before its children, siblings by name."""
    out, stack = [], sorted(root.children.items(), reverse=True)
    while stack:
        node = stack.pop()[1]
        out.append(node)
        stack.extend(sorted(node.children.items(), reverse=True))
    return out


def _sizes(modules: list[ModuleNode]) -> dict[int, tuple[int, int]]:
    """(parameters, tensors) of each module by id, added up from the deepest in one pass
    (each module's own totals walk its whole subtree: quadratic over 400,000 modules)."""
    sizes: dict[int, tuple[int, int]] = {}
    for m in reversed(modules):  # children come after their parent in `modules`
        p, k = sum(t.numel for t in m.tensors), len(m.tensors)
        for c in m.children.values():
            cp, ck = sizes[id(c)]
            p, k = p + cp, k + ck
        sizes[id(m)] = (p, k)
    return sizes


def module_questions(root: ModuleNode, rng: random.Random, n: int) -> list[Question | None]:
    every = _modules(root)
    modules = [m for m in every if m.children]  # a module, not a lone tensor's parent
    if not modules:
        return []
    sizes = _sizes(every)
    counts = sorted({p for p, _ in sizes.values()})
    out = []
    for m in _pick(rng, modules, n):
        p, k = sizes[id(m)]
        others = [c for c in counts if c != p]
        wrong = [Opt(f"{c:,}", f"{c:,} is another module's count, not {m.path}'s.",
                     f"{c:,} là số tham số của module khác, không phải của {m.path}.")
                 for c in rng.sample(others, min(len(others), MAX_OPTIONS))]
        lead = (f"The {k} tensor(s) under {m.path} hold {p:,} elements in all.",
                f"{k} tensor dưới {m.path} có tổng cộng {p:,} phần tử.")
        out.append(make(f"gen-params-{m.path}", "sharding",
                        (f"How many parameters does the module {m.path} have?",
                         f"Module {m.path} có bao nhiêu tham số?"), lead,
                        Opt(f"{p:,}", f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong, rng))
    return out


PART_WORDS = {
    "weights": ("the model weights (a state_dict)", "trọng số mô hình (một state_dict)"),
    "ema": ("an EMA copy of the weights", "bản EMA của trọng số"),
    "optimizer": ("the optimizer state (moments, param groups)",
                  "trạng thái optimizer (moment, param group)"),
    "scheduler": ("the LR scheduler's position", "vị trí của LR scheduler"),
    "scaler": ("the fp16 loss scaler (GradScaler)", "bộ scale loss fp16 (GradScaler)"),
    "rng": ("random number generator states", "trạng thái bộ sinh số ngẫu nhiên (RNG)"),
    "data": ("the data loader's position", "vị trí của data loader"),
    "progress": ("a step or epoch counter", "bộ đếm bước hoặc epoch"),
    "config": ("the run's settings (args, config)", "cấu hình của lượt chạy (args, config)"),
}


def part_questions(ckpt: Checkpoint, rng: random.Random, n: int) -> list[Question | None]:
    """What a key of a pickled file holds, read from its content (the name may not say)."""
    parts = [(f, p) for f in ckpt.files for p in f.parts if p.path and p.kind in PART_WORDS]
    out = []
    for f, p in _pick(rng, parts, n):
        right = PART_WORDS[p.kind]
        why = (f"{p.path} in {f.name} is {p.what}: that is {right[0]}.",
               f"{p.path} trong {f.name} là {p.what}: đó là {right[1]}.")
        wrong = [Opt(k, f"Not {k} ({en}): its content is {p.what}.",
                     f"Không phải {k} ({vi}): nội dung của nó là {p.what}.")
                 for k, (en, vi) in PART_WORDS.items() if k != p.kind]
        rng.shuffle(wrong)
        out.append(make(f"gen-part-{f.name}:{p.path}", "verify",
                        (f"What does {p.path} in {f.name} hold, read by its content (not its "
                         "name)?", f"Đọc theo nội dung (không theo tên), {p.path} trong {f.name} "
                         "chứa gì?"), why,
                        Opt(p.kind, f"Right: {why[0]}", f"Đúng: {why[1]}"), wrong, rng))
    return out


def missing_question(r: ResumeReport, rng: random.Random) -> Question | None:
    missing = sorted(k for k, c in r.components.items() if c.status == "missing")
    if not missing:
        return None
    kind = rng.choice(missing)
    wrong = [Opt(k, f"{k} is present ({', '.join(c.files) or 'found'}).",
                 f"{k} có mặt ({', '.join(c.files) or 'đã tìm thấy'}).")
             for k, c in sorted(r.components.items()) if c.status == "ok"]
    detail = r.components[kind].detail
    lead = (f"No file of this checkpoint holds the {kind} state. {detail}".strip(),
            f"Không file nào của checkpoint này chứa trạng thái {kind}.")
    return make(f"gen-missing-{kind}", "verify",
                ("Which part of the training state is missing from this checkpoint?",
                 "Thành phần nào của trạng thái huấn luyện bị thiếu trong checkpoint này?"),
                lead, Opt(kind, f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong, rng)


def verdict_question(r: ResumeReport, rng: random.Random) -> Question | None:
    bad = [(k, c.status) for k, c in r.components.items() if c.status not in GOOD_STATUSES]
    because = ", ".join(f"{k}: {s}" for k, s in bad) or "every component is there"
    because_vi = ", ".join(f"{k}: {STATUS_VI.get(s, s)}" for k, s in bad) or "đủ mọi thành phần"
    lead = (f"The verdict is {r.verdict} ({because}): {VERDICT_MEANING[r.verdict][0]}.",
            f"Kết luận là {r.verdict} ({because_vi}): {VERDICT_MEANING[r.verdict][1]}.")
    wrong = [Opt(v, f"Not {v}: that would mean {VERDICT_MEANING[v][0]}.",
                 f"Không phải {v}: {v} nghĩa là {VERDICT_MEANING[v][1]}.")
             for v in VERDICTS if v != r.verdict]
    return make("gen-verdict", "verify",
                ("What does `ckpt-browser check` say about resuming from this checkpoint?",
                 "`ckpt-browser check` kết luận gì về việc tiếp tục huấn luyện từ checkpoint này?"),
                lead, Opt(r.verdict, f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong, rng)


def _dcp_chunks(dcp) -> list[tuple[str, tuple, str]]:
    """(key, offsets, rank file) of chunks whose offsets are unique within their tensor."""
    out = []
    for key, e in dcp.entries.items():
        if e.kind != "tensor":
            continue
        offs = [c.offsets for c in e.chunks]
        out.extend((key, c.offsets, c.file) for c in e.chunks
                   if c.file and offs.count(c.offsets) == 1)
    return out


def _rank_files(files: list[str], right: str) -> list[str]:
    """The other real rank files; under three of them, padded with the names the next ranks'
    files would have (not on disk, so never right)."""
    others = [f for f in files if f != right]
    r = len(files)
    while len(others) < 3:
        name = f"__{r}_0.distcp"
        if name not in files:
            others.append(name)
        r += 1
    return others


def dcp_questions(training: TrainingState, rng: random.Random, n: int) -> list[Question | None]:
    out = []
    for dcp in (f for f in training.files if type(f).__name__ == "DcpCheckpoint"):
        files = sorted(dcp.files, key=natural_key)
        where = f" ({dcp.folder})" if dcp.folder else ""
        for key, offsets, file in _pick(rng, _dcp_chunks(dcp), n):
            at = _shape(offsets)
            wrong = [Opt(f, f"The .metadata does not place this chunk in {f}.",
                         f".metadata không đặt chunk này trong {f}.")
                     for f in _rank_files(files, file)]
            lead = (f"The DCP .metadata{where} maps the chunk of {key} at offsets {at} to "
                    f"{file}; each rank writes its own chunks to its own file.",
                    f".metadata của DCP{where} ánh xạ chunk của {key} tại offset {at} tới {file}; "
                    "mỗi rank ghi các chunk của mình vào file riêng.")
            out.append(make(f"gen-dcp-{dcp.folder + '/' if dcp.folder else ''}{key}@{at}", "dcp",
                            (f"Which rank file holds the chunk of {key} that starts at offsets "
                             f"{at}?", f"Chunk của {key} bắt đầu tại offset {at} nằm trong file "
                             "rank nào?"), lead,
                            Opt(file, f"Right: {lead[0]}", f"Đúng: {lead[1]}"), wrong, rng))
    return out
