"""`ckpt-browser quiz` in a plain terminal, driven through stdin (no TTY)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from ckpt_browser.quiz.bank import BANK_PATH, load_bank, parse_bank
from ckpt_browser.quiz.session import Session

from .helpers import REPO, RUN6
from .quiz_helpers import write_bank


@pytest.fixture
def env(tmp_path):
    """Never the real home: progress goes under tmp_path."""
    e = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), PYTHONIOENCODING="utf-8")
    e.pop("CKPT_BROWSER_DEBUG", None)
    return e


def quiz(env, *args, stdin="", timeout=60):
    return subprocess.run([sys.executable, "-m", "ckpt_browser", "quiz", *args], input=stdin,
                          capture_output=True, text=True, encoding="utf-8", env=env, cwd=REPO,
                          timeout=timeout)


def expected(bank_path, seed=1, count=3):
    """The same session the command will run (same seed, no weights)."""
    return Session(load_bank(bank_path), count, seed).shown


def test_answers_feedback_score_and_review(tmp_path, env):
    bank = write_bank(tmp_path)
    shown = expected(bank)
    first, second, third = (s.answer for s in shown)
    wrong = "abcd"[(second + 1) % 4]
    stdin = f"{first + 1}\n{wrong}\n{'ABCD'[third]}\n"
    r = quiz(env, "--bank", str(bank), "--seed", "1", "--count", "3", "--no-save", stdin=stdin)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Question 1 of 3" in out and "Question 3 of 3" in out
    assert out.count("RIGHT.") == 2 and out.count("WRONG:") == 2  # feedback + review
    assert shown[1].question.en.explanation in out
    assert shown[1].question.en.why[shown[1].order[(second + 1) % 4]] in out
    assert "Quiz over. Score: 2/3" in out
    review = out.split("Review of misses:")[1]
    assert shown[1].question.en.question in review and shown[0].question.en.question not in review
    assert not (tmp_path / "state").exists()  # --no-save


def test_eof_mid_quiz_exits_0_with_the_score_so_far(tmp_path, env):
    bank = write_bank(tmp_path)
    first = expected(bank)[0].answer
    r = quiz(env, "--bank", str(bank), "--seed", "1", "--count", "3", "--no-save",
             stdin=f"{first + 1}\n")
    assert r.returncode == 0 and r.stderr == ""
    assert "Question 2 of 3" in r.stdout and "Question 3 of 3" not in r.stdout
    assert r.stdout.rstrip().endswith("No misses.")
    assert "Stopped. Score: 1/1" in r.stdout


def test_bad_input_asks_again_and_q_stops(tmp_path, env):
    bank = write_bank(tmp_path)
    r = quiz(env, "--bank", str(bank), "--seed", "1", "--count", "3", "--no-save",
             "--lang", "vi", stdin="7\nhello\nq\n")
    assert r.returncode == 0
    assert r.stdout.count("Gõ 1-4 hoặc a-d") == 2
    assert "Câu 1 / 3" in r.stdout and "vi question" in r.stdout and "en question" not in r.stdout
    assert "Đã dừng. Điểm: 0/0" in r.stdout


def test_ctrl_c_exits_0_with_the_score(tmp_path, env):
    bank = write_bank(tmp_path)
    first = expected(bank)[0].answer
    proc = subprocess.Popen([sys.executable, "-m", "ckpt_browser", "quiz", "--bank", str(bank),
                             "--seed", "1", "--count", "3", "--no-save"], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(f"{first + 1}\n".encode())
        proc.stdin.flush()
        seen, deadline = b"", time.monotonic() + 30
        while b"Question 2 of 3" not in seen or not seen.endswith(b"q stops): "):
            assert time.monotonic() < deadline, seen
            if select.select([proc.stdout], [], [], 0.5)[0]:
                seen += os.read(proc.stdout.fileno(), 4096)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert b"Stopped. Score: 1/1" in out and b"Traceback" not in err


def test_progress_is_saved_and_a_corrupt_file_is_replaced(tmp_path, env):
    bank = write_bank(tmp_path)
    shown = expected(bank)
    state = tmp_path / "state" / "ckpt-browser" / "quiz.json"
    wrong = (shown[0].answer + 1) % 4
    r = quiz(env, "--bank", str(bank), "--seed", "1", "--count", "3",
             stdin=f"{wrong + 1}\n{shown[1].answer + 1}\n")
    assert r.returncode == 0 and r.stderr == ""
    doc = json.loads(state.read_text())
    assert doc["questions"] == {shown[0].question.id: {"seen": 1, "missed": 1, "due": 1},
                                shown[1].question.id: {"seen": 1, "missed": 0, "due": 0}}
    state.write_text("{garbage")
    r = quiz(env, "--bank", str(bank), "--seed", "1", "--count", "3", stdin="1\n")
    assert r.returncode == 0
    assert "starting fresh" in r.stderr and len(r.stderr.splitlines()) == 1
    assert len(json.loads(state.read_text())["questions"]) == 1


def test_export_json_is_the_whole_bank(tmp_path, env):
    bank = write_bank(tmp_path, 5)
    r = quiz(env, "--bank", str(bank), "--export", "json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert [q.id for q in parse_bank(doc)] == [q.id for q in load_bank(bank)]
    assert doc == json.loads(bank.read_text())


def test_from_adds_questions_about_the_checkpoint(tmp_path, env):
    bank = write_bank(tmp_path, 2)
    r = quiz(env, "--bank", str(bank), "--from", str(RUN6), "--seed", "3", "--export", "json")
    assert r.returncode == 0
    ids = [q["id"] for q in json.loads(r.stdout)["questions"]]
    assert ids[:2] == ["q0", "q1"] and any(i.startswith("gen-shard-") for i in ids)
    assert any(i == "gen-verdict" for i in ids)


def test_a_missing_bank_is_one_line_and_exit_2(tmp_path, env):
    r = quiz(env, "--bank", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("ckpt-browser: ") and "question bank not found" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_count_must_be_positive(env):
    r = quiz(env, "--count", "0")
    assert r.returncode == 2 and "--count" in r.stderr


needs_bank = pytest.mark.skipif(not BANK_PATH.exists(), reason="bank.json not written yet")


@needs_bank
def test_the_packaged_bank_runs_and_exports(env):
    r = quiz(env, "--seed", "1", "--count", "3", "--no-save", stdin="1\nb\n")
    assert r.returncode == 0, r.stderr
    assert "Question 2 of 3" in r.stdout and "Stopped. Score:" in r.stdout
    r = quiz(env, "--export", "json")
    assert r.returncode == 0
    questions = parse_bank(json.loads(r.stdout))
    assert len(questions) == len(load_bank())
