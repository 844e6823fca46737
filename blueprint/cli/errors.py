"""The one error and exit-code contract of the `blueprint` and `kubectl streamlets` commands.

Exit codes: 0 done (EXIT_OK: sound, built, deployed), 1 refused or problems (EXIT_PROBLEMS: the
blueprint or config has errors, a state operation or the cluster said no), 2 usage or I/O error
(EXIT_USAGE). An error is one line `error: <message>` on stderr, never a traceback.

Command bodies raise CliError (or call `fail`) for what they refuse; `guard` runs a body and
turns CliError and the known error families into that line and the exit code:

- CliError: its message and code;
- streamlets.state.errors.StateError (savepoints, restore, repartition, export): exit 1;
- blueprint.deploy.build.BuildError from `render_application`: verify's problem report on
  stderr, then `error: nothing was built`, exit 1; its DeployInputError (a bad option, an
  unreadable file): exit 2;
- streamlets.kafka_security's KafkaSecurityError (a secret or certificate file the Kafka
  settings name cannot be read): exit 2; its ConnectionCheckError (the broker refuses or cannot
  be reached): exit 1;
- anything else (a bug of ours, Spark's failure): `explain` may turn it into a CliError
  (I/O errors, API errors), else one line from `internal` with exit 2.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import typer

from ..errors import BlueprintError

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
EXIT_SOUND = EXIT_OK  # `blueprint verify`: the blueprint is sound
EXIT_REFUSED = EXIT_PROBLEMS  # state commands: nothing to take, not a savepoint, a bad export

T = TypeVar("T")


def command_app(**settings) -> typer.Typer:
    """A Typer app (a command or a group of them) with the settings both command lines share:
    errors through `guard` (no pretty tracebacks), help when called bare, no shell-completion
    options, and Click's plain help: it wraps at the terminal's width or 80 columns when piped and
    never cuts a word (rich's help panels end long words in `…`)."""
    return typer.Typer(**{"add_completion": False, "no_args_is_help": True, "pretty_exceptions_enable": False,
                          "rich_markup_mode": None, **settings})


class CliError(BlueprintError):
    """A command refuses: `message` is the line after `error: `, `code` the exit status."""

    def __init__(self, message: str, code: int = EXIT_PROBLEMS) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = EXIT_PROBLEMS) -> NoReturn:
    """Print `error: <message>` on stderr and exit with `code`."""
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def internal_error(e: BaseException) -> str:
    """The line for an unexpected exception (a bug of ours): `internal error: <type>: <message>`."""
    return f"internal error: {type(e).__name__}: {e}"


def _is_a(e: BaseException, module: str, name: str) -> bool:
    # A family's module is imported only by the commands that use it: if it is not loaded, none
    # of its errors can have been raised (and verify/graph stay free of the state layer).
    cls = getattr(sys.modules.get(module), name, None)
    return cls is not None and isinstance(e, cls)


def _report_build(e: BaseException) -> int:
    from .report import print_problems

    problems = getattr(e, "problems", [])
    errors = sum(p.severity == "error" for p in problems)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the resource only
        print_problems(Path(getattr(e, "file", None) or ""), None, problems, errors, len(problems) - errors, True)
    print("error: nothing was built", file=sys.stderr)
    return EXIT_PROBLEMS


def guard(body: Callable[[], T], *, explain: Callable[[Exception], CliError | None] | None = None,
          internal: Callable[[Exception], str] = internal_error, families: bool = True) -> T:
    """Run a command body and return what it returns; on an error print one line (module
    docstring) and raise typer.Exit with its code. typer.Exit passes through; `families=False`
    leaves StateError and BuildError to `explain` and `internal` (`blueprint run`, where they
    are unexpected)."""
    try:
        return body()
    except typer.Exit:
        raise
    except CliError as e:
        fail(e.message, e.code)
    except Exception as e:
        if families and _is_a(e, "streamlets.state.errors", "StateError"):
            fail(str(e), EXIT_REFUSED)
        if families and _is_a(e, "blueprint.deploy.build", "BuildError"):
            raise typer.Exit(_report_build(e)) from None
        if families and _is_a(e, "blueprint.deploy.build", "DeployInputError"):
            fail(str(e), EXIT_USAGE)
        if families and _is_a(e, "streamlets.kafka_security", "KafkaSecurityError"):
            fail(str(e), EXIT_USAGE)
        if families and _is_a(e, "streamlets.kafka_security", "ConnectionCheckError"):
            fail(str(e), EXIT_PROBLEMS)
        explained = explain(e) if explain else None
        if explained is not None:
            fail(explained.message, explained.code)
        fail(internal(e), EXIT_USAGE)


def exit_with(body: Callable[[], int | None], **how: object) -> NoReturn:
    """`guard(body)`, then exit with the status it returned (None: EXIT_OK)."""
    code = guard(body, **how)  # type: ignore[arg-type]
    raise typer.Exit(EXIT_OK if code is None else code)
