"""Pilot tests: the Quiz screen, opened with `z` from anywhere."""

from __future__ import annotations

import json

import pytest

from ckpt_browser.tui.common.quiz import QuizScreen
from tests.tui.conftest import loaded, plain
from tests.unit.quiz_helpers import write_bank


@pytest.fixture
def quiz_env(tmp_path, monkeypatch):
    """A small bank in place of the packaged one, progress under tmp_path."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("ckpt_browser.quiz.bank.BANK_PATH", write_bank(tmp_path, 4))
    return tmp_path / "state" / "ckpt-browser" / "quiz.json"


def text(screen, wid):
    return plain(screen.query_one(wid))


async def test_open_answer_next_switch_language_close(sample_app, quiz_env):
    app = sample_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("z")
        screen = app.screen
        assert isinstance(screen, QuizScreen)
        s = screen.session
        assert s.total == 10  # 4 from the bank + questions about the open checkpoint
        assert any(x.question.source == "generated" for x in s.shown)
        assert "Question 1 of 10" in text(screen, "#quiz-status")
        shown = s.current
        assert shown.text("en").question in text(screen, "#quiz-question")
        wrong = (shown.answer + 1) % 4
        await pilot.press("abcd"[wrong])
        feedback = text(screen, "#quiz-feedback")
        assert "WRONG: the answer is" in feedback
        assert shown.text("en").explanation in feedback
        options = text(screen, "#quiz-options")
        assert "<- correct answer" in options and "<- your choice" in options
        assert "Score: 0/1" in text(screen, "#quiz-status")
        await pilot.press("1")  # already answered: ignored
        assert s.score == (0, 1)

        await pilot.press("l")
        assert "SAI: đáp án là" in text(screen, "#quiz-feedback")
        assert shown.text("vi").explanation in text(screen, "#quiz-feedback")
        assert "Câu 1 / 10" in text(screen, "#quiz-status")

        await pilot.press("enter")
        second = s.current
        assert second is not shown and "Câu 2 / 10" in text(screen, "#quiz-status")
        assert second.text("vi").question in text(screen, "#quiz-question")
        assert text(screen, "#quiz-feedback").strip() == ""
        await pilot.press(str(second.answer + 1))
        assert "ĐÚNG." in text(screen, "#quiz-feedback")
        await pilot.press("l")
        assert "RIGHT." in text(screen, "#quiz-feedback")

        await pilot.press("escape")
        assert not isinstance(app.screen, QuizScreen)
    saved = json.loads(quiz_env.read_text())["questions"]
    assert saved[shown.question.id]["missed"] == 1 and saved[second.question.id]["missed"] == 0


async def test_the_end_shows_score_and_review(sample_app, quiz_env):
    app = sample_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("z")
        screen = app.screen
        s = screen.session
        missed = []
        for n in range(s.total):
            cur = s.current
            if n % 3 == 0:
                missed.append(cur)
                await pilot.press(str((cur.answer + 1) % 4 + 1))
            else:
                await pilot.press("abcd"[cur.answer])
            await pilot.press("enter")
        assert s.done
        assert "Quiz over" in text(screen, "#quiz-status")
        right = s.total - len(missed)
        assert f"Score: {right}/{s.total}" in text(screen, "#quiz-question")
        review = text(screen, "#quiz-options")
        assert "Review of misses" in review
        for cur in missed:
            assert cur.text("en").question in review
        await pilot.press("q")  # closes the quiz, does not quit the app
        assert not isinstance(app.screen, QuizScreen) and app.is_running


async def test_quiz_is_in_footer_and_command_palette(sample_app, quiz_env):
    app = sample_app()
    async with app.run_test(size=(120, 30)) as pilot:  # 80 columns: under "? All keys"
        await loaded(app, pilot)
        assert "z Quiz" in app.screen._compositor.render_strips()[-1].text
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Quiz" in titles


async def test_vietnamese_mode_has_no_english_words_of_its_own(sample_app, quiz_env):
    """The marks beside the options and the key hint were English in Vietnamese mode."""
    from ckpt_browser.quiz.words import WORDS

    app = sample_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("z", "l")
        screen = app.screen
        shown = screen.session.current
        await pilot.press("abcd"[(shown.answer + 1) % 4])  # a wrong answer: both marks show
        on_screen = "\n".join(text(screen, w) for w in
                              ("#quiz-status", "#quiz-options", "#quiz-feedback", "#quiz-hint"))
        assert "<- đáp án đúng" in on_screen and "<- bạn đã chọn" in on_screen
        assert "1-4 hoặc a-d trả lời" in on_screen
        for english in ("correct answer", "your choice", "answer ·", "close", "Question",
                        "Score", "WRONG", "Enter: next"):
            assert english not in on_screen, english
        assert set(WORDS["en"]) == set(WORDS["vi"])  # every word has its translation
