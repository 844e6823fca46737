"""Errors raised by the streamlet SDK. Each message names the streamlet and the part at fault."""


class StreamletError(Exception):
    """Base class of every error the SDK raises on purpose."""


class StreamletDefinitionError(StreamletError):
    """A streamlet class declares something invalid (bad schema, port name, parameter, mount).

    Raised when the class is defined, so a broken streamlet never reaches a blueprint.
    """


class ConfigError(StreamletError):
    """A config-parameter value is missing, of the wrong type, or fails validation."""


class SchemaMismatchError(StreamletError):
    """A DataFrame written to an outlet does not fit the outlet's Avro schema."""
