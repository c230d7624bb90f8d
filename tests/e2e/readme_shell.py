"""The shell commands a README shows its reader, as text: `$ ` lines in code blocks, plain
command lines in code blocks (a synopsis line loses its description), and inline code that
starts with a program. A line of several steps joined by `&&` is one command per step."""

from __future__ import annotations

import re

# Words that start a command. Inline code is mostly names (`inspect`, `optimizer.pt`), so a
# span is a command only when it starts with one of these, after any VAR=value settings.
PROGRAMS = {"ckpt-browser", "python", "python3", "pip", "pip3", "apt-get", "mypy", "ruff",
            "pytest", "hf", "gcloud", "touch", "git", "uv", "tmux", "bash", "sh", "du", "curl",
            "wget", ".ci/run", "."}
ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=\S*$")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)


def program(command: str) -> str | None:
    """The program a command line runs, or None when the line is not a command (text, output
    such as `ckpt-browser: x: no such file`, a bare setting such as `NO_COLOR=1`)."""
    words = command.split()
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[1:2] and words[1].endswith(":"):  # `hf cache: org/name`: output
        return None
    first = words[0]
    name = first if first in PROGRAMS else first.rsplit("/", 1)[-1]  # /tmp/venv/bin/pip
    return name if name in PROGRAMS else None


def steps(line: str) -> list[str]:
    return [part.strip() for part in line.split("&&") if part.strip()]


def _block_lines(block: str) -> list[str]:
    """A code block's command lines: the `$ ` lines when it has any (the rest is output);
    else every line, joined across a trailing backslash or a synopsis's indented options."""
    lines = block.split("\n")[1:-1]
    prompts = [line[2:] for line in lines if line.startswith("$ ")]
    if prompts:
        return prompts
    joined: list[str] = []
    for line in lines:
        if joined and (joined[-1].endswith("\\")
                       or line[:1].isspace() and line.lstrip()[:1] in "[-"):
            joined[-1] = joined[-1].rstrip("\\").rstrip() + " " + line.strip()
        else:
            joined.append(line)
    # a synopsis's description, or a comment, starts after two spaces
    return [re.split(r"\s{2,}|\s#\s", line.strip(), maxsplit=1)[0] for line in joined]


def commands(readme: str) -> list[str]:
    """Every command in the README, once each, in order of first appearance."""
    found: list[str] = []
    for block in FENCE.findall(readme):
        found += [step for line in _block_lines(block) for step in steps(line)]
    for span in re.findall(r"`([^`]+)`", FENCE.sub("", readme)):
        found += steps(" ".join(span.split()))
    return list(dict.fromkeys(c for c in found if program(c)))
