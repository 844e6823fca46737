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


class StreamletRunError(StreamletError, RuntimeError):
    """A query of a streamlet under the test kit failed (streamlets.testkit.run_streamlet).

    The message is one line, first what matters: `streamlet <Class>, query <name>: ` then the
    user's exception with its file and line, or what a known Spark error means and its fix
    (streamlets.runtime.failures.user_exception). `query` is the query's name; the Spark
    exception (`StreamingQueryException`) is the `__cause__`, with Spark's whole text.
    """

    def __init__(self, streamlet: str, query: str, message: str) -> None:
        super().__init__(f"streamlet {streamlet}, query {query}: {message}")
        self.streamlet = streamlet
        self.query = query
