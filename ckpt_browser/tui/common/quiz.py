"""`z`: the quiz. Keyboard only: 1-4 or a-d answer, Enter next, l switches language, Esc closes.

Right and wrong are said in words (RIGHT / WRONG, "correct answer", "your choice"), so the screen
reads the same without colour; every word of it is in the quiz's language (quiz/words.py).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from ckpt_browser.escape import printable
from ckpt_browser.quiz.progress import Progress, save_progress
from ckpt_browser.quiz.session import Feedback, Session
from ckpt_browser.quiz.words import LETTERS, word
from ckpt_browser.report.styles import ALERT, GOOD
from ckpt_browser.tui.common.modals import CloseableModal

COUNT = 10


class QuizScreen(CloseableModal[None]):
    BINDINGS = [
        *(Binding(k, f"answer({i})", show=False) for i, k in enumerate("1234")),
        *(Binding(k, f"answer({i})", show=False) for i, k in enumerate(LETTERS)),
        Binding("enter", "next", "Next", show=False),
        Binding("l", "switch_lang", "Language", show=False),
    ]

    def __init__(self, questions, *, count: int = COUNT, seed: int | None = None,
                 lang: str = "en", progress: Progress | None = None) -> None:
        super().__init__()
        self.session = Session(questions, count, seed, progress.weights() if progress else None)
        self.lang = lang
        self.progress = progress  # None: nothing is saved
        self.feedback: Feedback | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="quiz-box", classes="modal-box"):
            yield Static(id="quiz-status")
            yield Static(id="quiz-question")
            yield Static(id="quiz-options")
            yield Static(id="quiz-feedback")
            yield Static(id="quiz-hint", classes="dim-note")

    def on_mount(self) -> None:
        self.refresh_quiz()

    # -- actions --------------------------------------------------------------------------
    def action_answer(self, index: int) -> None:
        s = self.session
        if s.current is None or s.answered:
            return
        self.feedback = s.answer(index, self.lang)
        self.refresh_quiz()

    def action_next(self) -> None:
        if self.session.current is not None and self.session.answered:
            self.feedback = None
            self.session.next()
            self.refresh_quiz()

    def action_switch_lang(self) -> None:
        self.lang = "vi" if self.lang == "en" else "en"
        if self.feedback is not None:
            self.feedback = self.feedback.in_lang(self.lang)
        self.refresh_quiz()

    def action_close(self) -> None:
        self._save()
        self.dismiss(None)

    def _save(self) -> None:
        if self.progress is None or not self.session.answers:
            return
        for qid, correct in self.session.results():
            self.progress.record(qid, correct)
        try:
            save_progress(self.progress)
        except OSError as e:
            self.app.notify(word(self.lang, "not_saved", error=e), severity="warning",
                            timeout=6)
        self.progress = None  # saved once

    # -- rendering ------------------------------------------------------------------------
    def refresh_quiz(self) -> None:
        s, lang = self.session, self.lang
        right, n = s.score
        where = (word(lang, "question", n=s.position + 1, total=s.total) if not s.done
                 else word(lang, "done"))
        status = f"{where} · {word(lang, 'score', right=right, n=n)} · {lang.upper()}"
        self.query_one("#quiz-status", Static).update(Text(status, style="bold"))
        self.query_one("#quiz-hint", Static).update(word(lang, "hint"))
        if s.done:
            self._show_review()
            return
        shown = s.current
        self.query_one("#quiz-question", Static).update(printable(shown.text(lang).question))
        self.query_one("#quiz-options", Static).update(self._options())
        self.query_one("#quiz-feedback", Static).update(self._feedback())

    def _options(self) -> Text:
        shown, fb = self.session.current, self.feedback
        out = Text()
        for i, option in enumerate(shown.options(self.lang)):
            mark, style = "", ""
            if fb is not None and i == fb.answer:
                mark, style = "  " + word(self.lang, "mark_answer"), GOOD
            elif fb is not None and i == fb.chosen:
                mark, style = "  " + word(self.lang, "mark_choice"), ALERT
            out.append(f"{i + 1}/{LETTERS[i]}) {printable(option)}{mark}\n", style=style)
        return out

    def _feedback(self) -> Text:
        fb = self.feedback
        if fb is None:
            return Text("")
        shown_answer = f"{fb.answer + 1}) {fb.shown.options(fb.lang)[fb.answer]}"
        head = word(fb.lang, "right") if fb.correct else word(fb.lang, "wrong",
                                                               answer=shown_answer)
        out = Text(printable(head) + "\n", style=GOOD if fb.correct else ALERT)
        if not fb.correct:
            out.append(printable(f"{word(fb.lang, 'chose', chosen=fb.chosen + 1)}: {fb.why}")
                       + "\n")
        out.append(printable(fb.explanation) + "\n")
        key = "next" if self.session.position + 1 < self.session.total else "last"
        out.append(word(fb.lang, key), style="dim")
        return out

    def _show_review(self) -> None:
        lang, misses = self.lang, self.session.review(self.lang)
        right, n = self.session.score
        self.query_one("#quiz-question", Static).update(
            Text(word(lang, "score", right=right, n=n), style="bold"))
        review = Text(word(lang, "review") + ":\n" if misses else word(lang, "no_misses") + "\n")
        for fb in misses:
            answer = fb.shown.options(lang)[fb.answer]
            review.append(f"\n{printable(fb.shown.text(lang).question)}\n", style="bold")
            review.append(printable(f"{word(lang, 'wrong', answer=f'{fb.answer + 1}) {answer}')}")
                          + "\n")
            review.append(printable(fb.explanation) + "\n")
        self.query_one("#quiz-options", Static).update(review)
        self.query_one("#quiz-feedback", Static).update("")
