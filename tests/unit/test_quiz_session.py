"""The quiz session (pure, seeded), the bank loader and the progress record."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ckpt_browser.quiz.bank import BankError, load_bank, parse_bank
from ckpt_browser.quiz.progress import Progress, load_progress, save_progress, state_path
from ckpt_browser.quiz.session import Session, draw
from ckpt_browser.quiz.words import parse_choice

from .quiz_helpers import bank, bank_doc, write_bank


def test_shuffle_keeps_the_right_answer_right_for_many_seeds():
    questions = bank(6)
    orders = set()
    for seed in range(200):
        s = Session(questions, seed=seed)
        for shown in s.shown:
            q = shown.question
            assert sorted(shown.order) == [0, 1, 2, 3]
            for lang in ("en", "vi"):
                assert shown.options(lang)[shown.answer] == q.text(lang).options[q.answer]
                assert shown.why(lang, shown.answer) == q.text(lang).why[q.answer]
            orders.add(shown.order)
    assert len(orders) == 24  # every permutation turns up: the options really are shuffled


def test_answer_feedback_score_and_review():
    s = Session(bank(4), count=3, seed=7)
    first = s.current
    fb = s.answer(first.answer, "en")
    assert fb.correct and fb.answer == first.answer
    assert fb.explanation == first.question.en.explanation
    assert fb.why == first.question.en.why[first.question.answer]
    with pytest.raises(RuntimeError):
        s.answer(0)  # once per question
    second = s.next()
    wrong = (second.answer + 1) % 4
    fb = s.answer(wrong, "vi")
    assert not fb.correct and fb.chosen == wrong and fb.answer == second.answer
    assert fb.why == second.question.vi.why[second.order[wrong]]
    assert fb.explanation == second.question.vi.explanation
    assert s.score == (1, 2)
    s.next()
    s.answer(s.current.answer)
    assert s.next() is None and s.done
    assert s.score == (2, 3)
    review = s.review("en")
    assert [f.shown.question.id for f in review] == [second.question.id]
    assert review[0].lang == "en" and review[0].explanation == second.question.en.explanation
    assert s.results() == [(first.question.id, True), (second.question.id, False),
                           (s.shown[2].question.id, True)]


def test_next_before_answering_and_bad_index_are_refused():
    s = Session(bank(2), seed=1)
    with pytest.raises(RuntimeError):
        s.next()
    with pytest.raises(ValueError):
        s.answer(4)


def test_same_seed_same_session_other_seed_differs():
    def run(seed):
        s = Session(bank(12), count=5, seed=seed)
        return [(x.question.id, x.order) for x in s.shown]

    assert run(3) == run(3)
    assert run(3) != run(4)
    assert len({qid for qid, _ in run(3)}) == 5


def test_count_larger_than_the_bank_asks_each_question_once():
    s = Session(bank(3), count=10, seed=0)
    assert sorted(x.question.id for x in s.shown) == ["q0", "q1", "q2"]


def test_missed_questions_come_back_more_often():
    questions = bank(10)
    progress = Progress()
    progress.record("q7", False)
    progress.record("q7", False)
    weights = progress.weights()
    assert weights == {"q7": 7.0}
    drawn = Counter()
    plain = Counter()
    for seed in range(400):
        drawn.update(x.question.id
                     for x in Session(questions, count=3, seed=seed, weights=weights).shown)
        plain.update(x.question.id for x in Session(questions, count=3, seed=seed).shown)
    assert drawn["q7"] > 300  # weight 7 among nine of weight 1, three drawn
    assert plain["q7"] < 160  # ~3/10 of 400 without the weight
    # a right answer later lowers the weight again
    progress.record("q7", True)
    progress.record("q7", True)
    assert progress.weights() == {}
    assert progress.entries["q7"] == {"seen": 4, "missed": 2, "due": 0}


def test_draw_without_weights_is_uniform_enough():
    import random

    counts = Counter(q.id for seed in range(300)
                     for q in draw(bank(4), 1, random.Random(seed)))
    assert set(counts) == {"q0", "q1", "q2", "q3"} and min(counts.values()) > 40


def test_progress_round_trip_and_default_location(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_path() == tmp_path / "ckpt-browser" / "quiz.json"
    p = load_progress()
    assert p.entries == {} and p.note is None
    p.record("a", False)
    p.record("b", True)
    written = save_progress(p)
    assert written == state_path()
    assert [f.name for f in written.parent.iterdir()] == ["quiz.json"]  # no temporary left
    again = load_progress()
    assert again.entries == p.entries and again.note is None
    assert again.weights() == {"a": 4.0}


@pytest.mark.parametrize("content", ["{not json", '{"version": 1, "questions": {"a": 3}}',
                                     '[1, 2]', '{"version": 9, "questions": {}}'])
def test_corrupt_progress_starts_fresh_and_says_so(tmp_path, content):
    path = tmp_path / "quiz.json"
    path.write_text(content)
    p = load_progress(path)
    assert p.entries == {} and "starting fresh" in p.note and str(path) in p.note
    p.record("x", False)
    save_progress(p, path)
    assert json.loads(path.read_text())["questions"]["x"]["due"] == 1


def test_parse_choice():
    assert [parse_choice(t) for t in ("1", "4", "a", "D", " b) ", "c.")] == [0, 3, 0, 3, 1, 2]
    assert [parse_choice(t) for t in ("0", "5", "e", "", "12", "ab")] == [None] * 6


# -- the bank --------------------------------------------------------------------------
def test_load_bank_reads_a_valid_file(tmp_path):
    questions = load_bank(write_bank(tmp_path, 3))
    assert [q.id for q in questions] == ["q0", "q1", "q2"]
    assert questions[1].answer == 1 and questions[1].vi.options[1] == "vi option 1.1"


def _broken(change):
    doc = bank_doc(2)
    change(doc)
    return doc


@pytest.mark.parametrize("change, says", [
    (lambda d: d["questions"][1].update(id="q0"), "appears twice"),
    (lambda d: d["questions"][0].update(answer=4), "answer must be 0-3"),
    (lambda d: d["questions"][0]["vi"]["options"].pop(), "'options' must be 4"),
    (lambda d: d["questions"][0]["en"].update(explanation=""), "'explanation'"),
    (lambda d: d["questions"][0].pop("vi"), "vi: missing"),
    (lambda d: d["questions"][0].update(topic="cooking"), "topic 'cooking'"),
    (lambda d: d.update(version=2), "unsupported bank version"),
    (lambda d: d["questions"][0]["en"]["options"].__setitem__(1, "en option 0.0"),
     "two options"),
])
def test_bank_errors_are_one_precise_line(change, says):
    with pytest.raises(BankError, match=says) as err:
        parse_bank(_broken(change), "bank.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("bank.json")


def test_bank_file_errors(tmp_path, monkeypatch):
    with pytest.raises(BankError, match="not found"):
        load_bank(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(BankError, match="line 1"):
        load_bank(bad)
    monkeypatch.setattr("ckpt_browser.quiz.bank.MAX_BANK_BYTES", 3)
    with pytest.raises(BankError, match="the limit is 3"):
        load_bank(bad)
