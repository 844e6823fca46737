"""Streamlets on Spark: typed, composable Spark Structured Streaming components.

The SDK is this package's top level: Streamlet, ports (AvroInlet, AvroOutlet), schemas, config
parameters, volume mounts, triggers, errors, class loading (streamlets.loading) and LogicContext,
the protocol of what `create_logic(ctx)` gets. Importing it does not start or import Spark:
metadata (shape, schemas, parameters, mounts) is read from the classes alone. Under it, in one
direction: streamlets.runtime (the Spark runtime that runs a streamlet's queries) and
streamlets.state (savepoints, restore, repartition, state export and import, on top of the
runtime). streamlets.testkit runs streamlets in tests; streamlets.driver (`python -m
streamlets.runner`) is a driver pod's entry point. See README, Architecture.

Four names come from the layers above the SDK and are imported when first used, so that `import
streamlets` stays light: StreamletContext (streamlets.runtime.context, what the runtime passes
to create_logic), ControlInlet (streamlets.runtime.control, an inlet of control commands),
run_streamlet and TestkitResult (streamlets.testkit).
"""

from typing import TYPE_CHECKING, Any

from .config import StreamletConfig
from .descriptor import StreamletDescriptor
from .errors import ConfigError, SchemaMismatchError, StreamletDefinitionError, StreamletError, StreamletRunError
from .loading import StreamletLoadError, load_streamlet_class
from .logic import LogicContext
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
from .trigger import RealTimeModeError, Trigger, TriggerError
from .volumes import VolumeMount

if TYPE_CHECKING:
    from .runtime.context import StreamletContext
    from .runtime.control import ControlInlet
    from .testkit import TestkitResult, run_streamlet

__all__ = [
    "AvroInlet", "AvroOutlet", "AvroSchema", "BooleanParameter", "ConfigError", "ConfigParameter", "ControlInlet",
    "DoubleParameter", "DurationParameter", "IntegerParameter", "LogicContext", "MemorySizeParameter",
    "RealTimeModeError", "RegExpParameter", "SchemaError", "SchemaMismatchError", "Streamlet", "StreamletConfig",
    "StreamletContext", "StreamletDefinitionError", "StreamletDescriptor", "StreamletError", "StreamletLoadError",
    "StreamletRunError", "StreamletShape", "StringParameter", "TestkitResult", "Trigger", "TriggerError",
    "VolumeMount", "load_streamlet_class", "run_streamlet",
]


def __getattr__(name: str) -> Any:
    """The names of the layers above the SDK, imported on first use (PEP 562); AttributeError for
    any other unknown name."""
    value: Any
    if name == "StreamletContext":
        from .runtime.context import StreamletContext as value
    elif name == "ControlInlet":
        from .runtime.control import ControlInlet as value
    elif name in ("run_streamlet", "TestkitResult"):
        from . import testkit

        value = getattr(testkit, name)
    else:
        raise AttributeError(f"module 'streamlets' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
