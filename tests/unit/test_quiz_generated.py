"""Questions about a checkpoint: answers checked against independent readings of the samples
(safetensors.safe_open, torch's DCP metadata reader), distractors distinct and wrong."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors import safe_open

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.analysis.resume import report_from, resume_report
from ckpt_browser.quiz.generated import generate, questions_for

from .helpers import DAMAGED, RUN6, SAMPLES

TITAN = SAMPLES / "torchtitan-run" / "checkpoint" / "step-10"
ACCEL = SAMPLES / "accelerate-state" / "step_4"
ALL = [RUN6, DAMAGED, TITAN, ACCEL, SAMPLES / "hf-multirank" / "checkpoint-4"]


def headers(folder):
    """tensor name -> (shard file, dtype, shape), read with the real library."""
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as sf:
            for name in sf.keys():
                s = sf.get_slice(name)
                out[name] = (f.name, s.get_dtype(), list(s.get_shape()))
    return out


def right(q, lang="en"):
    return q.text(lang).options[q.answer]


def asked(path, seeds: int) -> list:
    """The questions of `seeds` seeds about the checkpoint at `path`."""
    opened = open_path(str(path))
    return [q for seed in range(seeds) for q in questions_for(opened, seed)]


def by_kind(questions, kind):
    return [q for q in questions if q.id.split("-")[1] == kind]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_question_is_well_formed(path):
    for seed in range(5):
        for q in questions_for(open_path(str(path)), seed):
            assert q.source == "generated" and 0 <= q.answer < 4
            for lang in ("en", "vi"):
                t = q.text(lang)
                assert len(t.options) == len(set(t.options)) == 4  # distinct: never two right
                assert len(t.why) == 4 and all(t.why) and t.explanation and t.question
                assert t.why[q.answer].startswith(("Right", "Đúng"))
                assert not any(w.startswith(("Right", "Đúng"))
                               for i, w in enumerate(t.why) if i != q.answer)
            assert q.en.options == q.vi.options  # values, not words
            assert q.en.question != q.vi.question


def test_shard_dtype_shape_answers_match_safe_open():
    truth = headers(RUN6)
    qs = asked(RUN6, 8)
    shard, dtype, shape = by_kind(qs, "shard"), by_kind(qs, "dtype"), by_kind(qs, "shape")
    assert shard and dtype and shape
    for q in shard:
        name = q.id.removeprefix("gen-shard-")
        assert right(q) == truth[name][0]
        for wrong in set(q.en.options) - {right(q)}:  # real shard names or the index, all wrong
            assert wrong in {f for f, _, _ in truth.values()} | {"model.safetensors.index.json"}
    for q in dtype:
        name = q.id.removeprefix("gen-dtype-")
        assert right(q) == truth[name][1]
        assert truth[name][1] not in set(q.en.options) - {right(q)}
    for q in shape:
        name = q.id.removeprefix("gen-shape-")
        assert right(q) == str(truth[name][2])
        assert str(truth[name][2]) not in set(q.en.options) - {right(q)}


def test_module_parameter_counts_match_safe_open():
    truth = headers(RUN6)
    qs = by_kind(asked(RUN6, 8), "params")
    assert qs
    for q in qs:
        module = q.id.removeprefix("gen-params-")
        count = sum(math.prod(shape) for name, (_, _, shape) in truth.items()
                    if name.startswith(module + "."))
        assert right(q) == f"{count:,}"
        assert f"{count:,}" not in set(q.en.options) - {right(q)}


def test_dcp_chunk_files_match_torch_metadata():
    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(str(TITAN)).read_metadata()
    where = {(k.fqn, tuple(k.offset)): v.relative_path for k, v in meta.storage_data.items()
             if k.offset is not None}
    qs = by_kind(asked(TITAN, 6), "dcp")
    assert qs
    for q in qs:
        key, _, offsets = q.id.removeprefix("gen-dcp-").rpartition("@")
        offsets = tuple(int(n) for n in offsets.strip("[]").split(", ") if n)
        assert right(q) == where[(key, offsets)]
        for wrong in set(q.en.options) - {right(q)}:
            assert wrong != where[(key, offsets)] and wrong.endswith(".distcp")


@pytest.mark.parametrize("path, verdict, missing", [
    (RUN6, "exact", None), (TITAN, "inexact", "rng"), (ACCEL, "inexact", "data"),
    (DAMAGED, "broken", None)])
def test_verdict_and_missing_component(path, verdict, missing):
    assert resume_report(str(path)).verdict == verdict  # the command's own verdict
    qs = questions_for(open_path(str(path)), 0)
    (v,) = by_kind(qs, "verdict")
    assert right(v) == verdict and set(v.en.options) == {"exact", "inexact", "weights-only",
                                                         "broken"}
    found = by_kind(qs, "missing")
    if missing is None:
        assert not found  # nothing missing, or too few present parts to make three wrong options
    else:
        (m,) = found
        assert right(m) == missing
        report = resume_report(str(path))
        assert all(report.components[o].status == "ok" for o in m.en.options if o != missing)


def test_same_seed_same_questions():
    a = [q.to_dict() for q in questions_for(open_path(str(RUN6)), 5)]
    b = [q.to_dict() for q in questions_for(open_path(str(RUN6)), 5)]
    c = [q.to_dict() for q in questions_for(open_path(str(RUN6)), 6)]
    assert a == b and a != c


def test_a_single_shard_checkpoint_asks_no_shard_question():
    path = str(SAMPLES / "hf-multirank" / "checkpoint-4")
    opened = open_path(path)
    ckpt, training = opened.checkpoint, opened.training
    qs = generate(ckpt, training, report_from(ckpt, training), seed=0, per_kind=5)
    assert not by_kind(qs, "shard")  # one shard and no index: no three wrong shard names
    assert by_kind(qs, "dtype") and by_kind(qs, "shape")


def test_nothing_loaded_yet_gives_no_questions():
    assert generate(None, None, None) == []


def test_part_questions_answer_what_the_content_holds():
    """'What does optimizer_state_dict in model.pt hold?': the answer is what the content is,
    checked against the objects torch itself loads."""
    from ckpt_browser.quiz.generated import PART_WORDS

    path = SAMPLES / "projects" / "tutorial" / "model.pt"
    loaded = torch.load(path, weights_only=True)
    truth = {"model_state_dict": "weights", "optimizer_state_dict": "optimizer",
             "epoch": "progress"}
    assert set(truth) <= set(loaded) and "param_groups" in loaded["optimizer_state_dict"]
    qs = by_kind(asked(path, 12), "part")
    assert {q.id.rpartition(":")[2] for q in qs} <= set(truth) and qs
    for q in qs:
        key = q.id.rpartition(":")[2]
        assert right(q) == right(q, "vi") == truth[key]  # options are values, as everywhere
        assert set(q.en.options) <= set(PART_WORDS)
