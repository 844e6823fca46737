"""Streamlets on Spark: typed, composable Spark Structured Streaming components.

Importing this package does not start Spark: metadata (shape, schemas, parameters, mounts) is
read from the classes alone.
"""

from .errors import ConfigError, SchemaMismatchError, StreamletDefinitionError, StreamletError
from .params import (
    BooleanParameter,
    ConfigParameter,
    DoubleParameter,
    DurationParameter,
    IntegerParameter,
    MemorySizeParameter,
    RegExpParameter,
    StringParameter,
)
from .ports import AvroInlet, AvroOutlet
from .schema import AvroSchema, SchemaError
from .streamlet import Streamlet, StreamletShape
from .volumes import VolumeMount

__all__ = [
    "AvroInlet", "AvroOutlet", "AvroSchema", "BooleanParameter", "ConfigError", "ConfigParameter",
    "DoubleParameter", "DurationParameter", "IntegerParameter", "MemorySizeParameter",
    "RegExpParameter", "SchemaError", "SchemaMismatchError", "Streamlet", "StreamletDefinitionError",
    "StreamletError", "StreamletShape", "StringParameter", "VolumeMount",
]
