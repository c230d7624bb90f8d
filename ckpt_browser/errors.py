"""Errors with one-line, actionable messages naming the file.

`CheckpointError` stops a command (exit code 2: nothing readable at that path).
Damage inside a checkpoint is not an exception: readers record it as a
`Problem` on the shard so every other shard stays browsable.
"""

from __future__ import annotations

# Exit codes shared by every subcommand (documented in the README).
EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_DAMAGED = 5

# `check`: one exit code per resume verdict (0 and 5 shared with the codes above).
EXIT_INEXACT = 3
EXIT_WEIGHTS_ONLY = 4
VERDICT_EXIT = {"exact": EXIT_OK, "inexact": EXIT_INEXACT, "weights-only": EXIT_WEIGHTS_ONLY,
                "broken": EXIT_DAMAGED}


class CheckpointError(Exception):
    """A path that cannot be opened as a checkpoint at all."""

    exit_code = EXIT_USAGE

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class PathNotFound(CheckpointError):
    pass


class NotACheckpoint(CheckpointError):
    pass


class UsageError(CheckpointError):
    """The command line asks for something the path does not have."""


class ShardError(Exception):
    """Raised inside a shard reader; caught and turned into a shard problem."""
