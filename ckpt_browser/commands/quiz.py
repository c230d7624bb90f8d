"""`ckpt-browser quiz`: the bilingual quiz on stdin, optionally about a checkpoint."""

from __future__ import annotations

import json
import sys

from ckpt_browser.diagnostics import ExitCode, note


def cmd_quiz(args) -> int:
    from ckpt_browser.quiz.bank import export_doc, load_bank

    questions = load_bank(args.bank)
    if args.from_path:
        from ckpt_browser.analysis.opened import local_path, open_path
        from ckpt_browser.quiz.generated import questions_for

        # a folder of checkpoints: its newest, as inspect reads it (not all 5,000 as one)
        questions += questions_for(open_path(local_path(args.from_path, args), run=True),
                                   args.seed)
    if args.export:
        sys.stdout.write(json.dumps(export_doc(questions), ensure_ascii=False, indent=1) + "\n")
        return ExitCode.OK
    from ckpt_browser.quiz.progress import Progress as Record
    from ckpt_browser.quiz.progress import load_progress, save_progress
    from ckpt_browser.quiz.session import Session
    from ckpt_browser.quiz.terminal import run

    progress = Record() if args.no_save else load_progress()
    if progress.note:
        note(progress.note)
    session = Session(questions, args.count, args.seed, progress.weights())
    run(session, args.lang, sys.stdin, sys.stdout)
    if not args.no_save and session.answers:
        for qid, correct in session.results():
            progress.record(qid, correct)
        try:
            save_progress(progress)
        except OSError as e:
            note(f"quiz progress not saved: {e}")
    return ExitCode.OK
