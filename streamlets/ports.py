"""Inlets and outlets: named, Avro-typed ends of a streamlet, connected to Kafka topics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from .schema import AvroSchema, SchemaSource

ErrorHandling = Literal["dead-letter", "fail"]
ERROR_HANDLING: tuple[str, ...] = ("dead-letter", "fail")


class Port:
    """A named port with an Avro record schema; declared as a class attribute of a Streamlet."""

    role: str = "port"

    def __init__(self, name: str, schema: SchemaSource, *, description: str = "") -> None:
        self.name = name
        self.description = description
        self._schema_source = schema
        self._schema: AvroSchema | None = None
        self.attribute: str | None = None

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    def resolve(self, owner: type) -> AvroSchema:
        """Load the schema; relative .avsc paths resolve against the owner's module folder."""
        if self._schema is None:
            module = sys.modules.get(owner.__module__)
            module_file = getattr(module, "__file__", None)
            base = Path(module_file).parent if module_file else Path.cwd()
            self._schema = AvroSchema.load(self._schema_source, base)
        return self._schema

    @property
    def schema(self) -> AvroSchema:
        """The parsed schema. Available once the declaring Streamlet class is defined."""
        if self._schema is None:
            raise RuntimeError(f"port {self.name!r} is not part of a defined Streamlet class")
        return self._schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._schema.name if self._schema else '?'})"


class AvroInlet(Port):
    """An inlet: the streamlet reads Avro records of `schema` from the topic bound to it.

    `error_handling`: "dead-letter" (default) sends values that do not decode to the
    application's dead-letter topic and keeps running (Spark from_avro mode PERMISSIVE plus
    a scan of the offending offsets); "fail" stops the query on the first one (mode FAILFAST).

    `check_trailing_bytes`: Spark's from_avro (like Avro's own decoders) ignores bytes left after
    a complete record, so JSON text or a schema-registry header can pass as a record. True
    treats such values as malformed too, at some cost per record (see bench/README.md).
    """

    role = "inlet"

    def __init__(
        self,
        name: str,
        schema: SchemaSource,
        *,
        error_handling: ErrorHandling = "dead-letter",
        check_trailing_bytes: bool = False,
        description: str = "",
    ) -> None:
        super().__init__(name, schema, description=description)
        self.error_handling = error_handling  # checked with the class (named in the error)
        self.check_trailing_bytes = check_trailing_bytes


class AvroOutlet(Port):
    """An outlet: the streamlet writes Avro records of `schema` to the topic bound to it.

    `key` names the field(s) whose value becomes the Kafka record key, so that records with
    the same key land in the same partition (Kafka's default partitioner hashes the key).
    None writes records without key (Kafka spreads them over partitions).
    """

    role = "outlet"

    def __init__(
        self,
        name: str,
        schema: SchemaSource,
        *,
        key: str | list[str] | tuple[str, ...] | None = None,
        description: str = "",
    ) -> None:
        super().__init__(name, schema, description=description)
        self.key: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key or ())
