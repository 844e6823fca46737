"""The root of the errors the blueprint side raises on purpose (spec, deployment, sandbox, CLIs):
catch BlueprintError to handle any of them. The SDK's and runtime's errors derive from
streamlets.errors.StreamletError, the state operations' from streamlets.state.errors.StateError."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import LoadProblem


class BlueprintError(Exception):
    """Base class of every error of the blueprint packages (BlueprintLoadError, BuildError,
    SandboxError, ...). The message names the file, field or resource at fault and what to do."""


class BlueprintLoadError(BlueprintError):
    """The blueprint file is not a valid blueprint. `str()` is `file:line:column: message`.

    `code` is the verifier's problem code (malformed-blueprint, missing-streamlets,
    empty-streamlets, wrong-type, ...); `problems` holds what the loader had found before it had
    to stop, so that a report can show everything at once.
    """

    def __init__(self, message: str, file: str | Path | None = None, line: int | None = None,
                 column: int | None = None, code: str = "malformed-blueprint",
                 problems: list[LoadProblem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column
        self.code = code
        self.problems = problems or []

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        return f"{where}: {self.message}" if where else self.message


class BlueprintReadError(BlueprintLoadError):
    """The blueprint file cannot be read at all (missing, a folder, unreadable, not UTF-8)."""
