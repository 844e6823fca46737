"""Errors raised by the streamlet SDK. Each message names the streamlet and the part at fault."""

from typing import NamedTuple


class StreamletError(Exception):
    """Base class of every error the SDK raises on purpose."""


class DefinitionProblem(NamedTuple):
    """One invalid declaration of a streamlet class: a verifier problem code and its message."""

    code: str
    message: str


class StreamletDefinitionError(StreamletError):
    """A streamlet class declares something invalid (bad schema, port name, parameter, mount).

    Raised when the class is defined, so a broken streamlet never reaches a blueprint.
    `problems` lists every invalid declaration (code and message); `str()` joins them.
    """

    def __init__(self, streamlet: str, problems: list[DefinitionProblem]) -> None:
        super().__init__(f"streamlet {streamlet}: " + "; ".join(p.message for p in problems))
        self.streamlet = streamlet
        self.problems = problems


class ConfigError(StreamletError):
    """A config-parameter value is missing, of the wrong type, or fails validation."""


class SchemaMismatchError(StreamletError):
    """A DataFrame written to an outlet does not fit the outlet's Avro schema."""
