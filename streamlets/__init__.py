"""Streamlets on Spark: typed, composable Spark Structured Streaming components.

The SDK is this package's top level: Streamlet, ports (AvroInlet, AvroOutlet), schemas, config
parameters, volume mounts, errors and class loading (streamlets.loading). Importing it does not
start or import Spark: metadata (shape, schemas, parameters, mounts) is read from the classes
alone. Under it, in one direction: streamlets.runtime (the Spark runtime that runs a
streamlet's queries) and streamlets.state (savepoints, restore, repartition, state export and
import, on top of the runtime). streamlets.testkit runs streamlets in tests; streamlets.driver
(`python -m streamlets.runner`) is a driver pod's entry point. See README, Architecture.
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
