"""Errors with one-line, actionable messages naming the file.

`CheckpointError` stops a command (exit code 2, `diagnostics.ExitCode.USAGE`: nothing
readable at that path). Damage inside a checkpoint is not an exception: readers record it as a
`Problem` on the shard so every other shard stays browsable.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """A path that cannot be opened as a checkpoint at all."""

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
