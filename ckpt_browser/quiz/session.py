"""One quiz session as a pure state machine: no I/O, no clock; everything random comes from `seed`.

    s = Session(questions, count=10, seed=1, weights=progress.weights())
    while (shown := s.current) is not None:
        ... show shown.text(lang).question and shown.options(lang) ...
        feedback = s.answer(i, lang)   # i: index in the shown order
        s.next()
    s.score, s.review()
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ckpt_browser.quiz.bank import Question, Text


@dataclass(frozen=True)
class Shown:
    """A question with its options in the order shown: `order[i]` is the stored index."""

    question: Question
    order: tuple[int, ...]

    @property
    def answer(self) -> int:
        """The correct option's position in the shown order."""
        return self.order.index(self.question.answer)

    def text(self, lang: str) -> Text:
        return self.question.text(lang)

    def options(self, lang: str) -> list[str]:
        opts = self.question.text(lang).options
        return [opts[i] for i in self.order]

    def why(self, lang: str, shown_index: int) -> str:
        return self.question.text(lang).why[self.order[shown_index]]


@dataclass(frozen=True)
class Feedback:
    shown: Shown
    chosen: int  # shown index
    correct: bool
    answer: int  # shown index of the correct option
    explanation: str
    why: str  # why the chosen option is right or wrong
    lang: str

    def in_lang(self, lang: str) -> Feedback:
        return _feedback(self.shown, self.chosen, lang)


def _feedback(shown: Shown, chosen: int, lang: str) -> Feedback:
    return Feedback(shown, chosen, chosen == shown.answer, shown.answer,
                    shown.text(lang).explanation, shown.why(lang, chosen), lang)


def draw(questions: Sequence[Question], count: int | None, rng: random.Random,
         weights: Mapping[str, float] | None = None) -> list[Question]:
    """`count` distinct questions, weighted (Efraimidis-Spirakis: key u**(1/w), largest first)."""
    weights = weights or {}
    keyed = [(rng.random() ** (1.0 / max(weights.get(q.id, 1.0), 1e-6)), i)
             for i, q in enumerate(questions)]
    keyed.sort(reverse=True)
    n = len(questions) if count is None else max(0, min(count, len(questions)))
    return [questions[i] for _, i in keyed[:n]]


@dataclass
class Session:
    questions: Sequence[Question]
    count: int | None = None  # None: every question
    seed: int | None = None
    weights: Mapping[str, float] | None = None  # id -> draw weight, from the progress record
    shown: list[Shown] = field(init=False)
    answers: list[Feedback] = field(init=False, default_factory=list)
    position: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        picked = draw(self.questions, self.count, rng, self.weights)
        self.shown = [Shown(q, tuple(rng.sample(range(len(q.en.options)), len(q.en.options))))
                      for q in picked]

    @property
    def current(self) -> Shown | None:
        return self.shown[self.position] if self.position < len(self.shown) else None

    @property
    def answered(self) -> bool:
        """The current question has been answered (waiting for next())."""
        return len(self.answers) > self.position

    @property
    def done(self) -> bool:
        return self.position >= len(self.shown)

    @property
    def total(self) -> int:
        return len(self.shown)

    def answer(self, index: int, lang: str = "en") -> Feedback:
        shown = self.current
        if shown is None:
            raise RuntimeError("the session is over")
        if self.answered:
            raise RuntimeError("this question is already answered; call next()")
        if not 0 <= index < len(shown.order):
            raise ValueError(f"answer must be 0-{len(shown.order) - 1}, not {index}")
        fb = _feedback(shown, index, lang)
        self.answers.append(fb)
        return fb

    def next(self) -> Shown | None:
        if not self.answered:
            raise RuntimeError("answer the current question first")
        self.position += 1
        return self.current

    @property
    def score(self) -> tuple[int, int]:
        """(right, answered)."""
        return sum(f.correct for f in self.answers), len(self.answers)

    def review(self, lang: str = "en") -> list[Feedback]:
        """The missed questions, in the order asked, worded in `lang`."""
        return [f.in_lang(lang) for f in self.answers if not f.correct]

    def results(self) -> list[tuple[str, bool]]:
        """(question id, right?) per answer: what the progress record stores."""
        return [(f.shown.question.id, f.correct) for f in self.answers]
