"""The quiz's own words in both languages, shared by the plain terminal and the TUI."""

from __future__ import annotations

LETTERS = "abcd"

WORDS = {
    "en": {"question": "Question {n} of {total}", "right": "RIGHT.",
           "wrong": "WRONG: the answer is {answer}.", "why": "Why", "score": "Score: {right}/{n}",
           "review": "Review of misses", "no_misses": "No misses.", "prompt":
           "Answer (1-4 or a-d, q stops): ", "retry": "Type 1-4 or a-d (q stops).",
           "next": "Enter: next question", "last": "Enter: see the score", "done": "Quiz over.",
           "stopped": "Stopped.", "chose": "you chose {chosen}",
           "mark_answer": "<- correct answer", "mark_choice": "<- your choice",
           "hint": "1-4 or a-d answer · Enter next · l tiếng Việt · Esc close",
           "not_saved": "Quiz progress not saved: {error}"},
    "vi": {"question": "Câu {n} / {total}", "right": "ĐÚNG.",
           "wrong": "SAI: đáp án là {answer}.", "why": "Vì sao", "score": "Điểm: {right}/{n}",
           "review": "Xem lại các câu sai", "no_misses": "Không sai câu nào.", "prompt":
           "Trả lời (1-4 hoặc a-d, q để dừng): ", "retry": "Gõ 1-4 hoặc a-d (q để dừng).",
           "next": "Enter: câu tiếp theo", "last": "Enter: xem điểm", "done": "Hết bài.",
           "stopped": "Đã dừng.", "chose": "bạn chọn {chosen}",
           "mark_answer": "<- đáp án đúng", "mark_choice": "<- bạn đã chọn",
           "hint": "1-4 hoặc a-d trả lời · Enter tiếp · l English · Esc đóng",
           "not_saved": "Chưa lưu được tiến độ bài trắc nghiệm: {error}"},
}


def word(lang: str, key: str, **kw) -> str:
    return WORDS.get(lang, WORDS["en"])[key].format(**kw)


def parse_choice(text: str) -> int | None:
    """'1'-'4' or 'a'-'d' (any case, a trailing '.' or ')' allowed) -> 0-3; else None."""
    t = text.strip().lower().rstrip(".)")
    if len(t) == 1 and t in "1234":
        return int(t) - 1
    if len(t) == 1 and t in LETTERS:
        return LETTERS.index(t)
    return None
