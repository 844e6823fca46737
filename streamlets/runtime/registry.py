"""What the layers above the runtime plug into it, registered once at import (as kopf registers
handlers with a decorator instead of dispatching through an if-chain).

- Control-command handlers: `@command("savepoint")` registers `fn(runtime, streamlet, args,
  command_id) -> control.Outcome` for one of control.COMMANDS. The runtime's own commands
  (ping, stop, reload-config) register in streamlets.runtime.runner; the state commands
  (savepoint, dump-state) in streamlets.state.commands, imported by streamlets.state.
- The reader of imported state (`StreamletContext.initial_state`): registered by
  streamlets.state.commands as streamlets.state.export_files.read_export_stream.

The runtime never imports streamlets.state; a process that runs streamlets imports both (the
driver, the sandbox and the test kit do).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ..errors import StreamletError
from .control import COMMANDS, Outcome

# `fn(runtime, streamlet, args, command_id) -> Outcome`, runtime a runner.StreamletRuntime: not
# named here, as the runner imports this module (tests/unit/test_layers.py counts type-only imports).
Handler = Callable[..., Outcome]
H = TypeVar("H", bound=Handler)

_HANDLERS: dict[str, Handler] = {}
_READERS: dict[str, Callable[..., Any]] = {}


def command(name: str) -> Callable[[H], H]:
    """Register the decorated function as the handler of control command `name` (one of
    control.COMMANDS; ValueError otherwise). A second registration replaces the first."""
    if name not in COMMANDS:
        raise ValueError(f"unknown control command {name!r} (one of {', '.join(COMMANDS)})")

    def register(fn: H) -> H:
        _HANDLERS[name] = fn
        return fn

    return register


def handler(name: str) -> Handler:
    """The handler of `name`; StreamletError if none is registered (an unknown command, or a
    state command in a process that did not import streamlets.state)."""
    try:
        return _HANDLERS[name]
    except KeyError:
        raise StreamletError(f"unknown command {name!r}" if name not in COMMANDS else
                             f"command {name!r} is not available here (streamlets.state is not loaded)") from None


def registered() -> set[str]:
    """The names of the registered commands."""
    return set(_HANDLERS)


def initial_state_reader(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register `fn(spark, location, operator_id, source_name=...) -> DataFrame`, the reader of
    imported state (a streaming source named `source_name`)."""
    _READERS["initial_state"] = fn
    return fn


def read_initial_state(spark: Any, location: str, operator_id: int, source_name: str | None = None) -> Any:
    """Read imported state with the registered reader, as the streaming source `source_name`;
    StreamletError if none is registered."""
    reader = _READERS.get("initial_state")
    if reader is None:
        raise StreamletError("imported state cannot be read here: streamlets.state is not loaded")
    return reader(spark, location, operator_id, source_name=source_name)
