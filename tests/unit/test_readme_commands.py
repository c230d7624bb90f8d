"""The README's quick start and .ci/run stay one set-up: command 1 installs only what the app
needs (no test extra) and opens the bundled sample; command 2 adds the test extra and runs the
lint, the type check and the tests; .ci/run runs each of those steps."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def ci_lines() -> list[str]:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def steps(command: str) -> list[str]:
    return [part.strip() for part in command.split("&&")]


def test_command_1_installs_only_the_app_and_opens_the_sample():
    first, _ = quick_start()
    parts = steps(first)
    assert "pip install torch==2.13.0 ." in parts and "[test]" not in first
    assert parts[-1] == "ckpt-browser"  # no PATH: the bundled sample


def test_ci_runs_the_readme_steps():
    first, second = quick_start()
    ci = [line.replace(" -q ", " ") for line in ci_lines()]
    wanted = [p for p in steps(first) if p.startswith("pip ")] + \
        [p for p in steps(second) if not p.startswith(". ")]
    assert "pip install '.[test]'" in wanted
    for step in wanted:
        assert step in ci, f"{step!r} is in the README's quick start but not in .ci/run"
