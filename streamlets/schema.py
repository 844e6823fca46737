"""Avro record schemas of ports: loading, checking with fastavro, and the JSON Spark needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.repository.base import SchemaRepositoryError
from fastavro.schema import (
    SchemaParseException,
    UnknownType,
    load_schema,
    parse_schema,
    to_parsing_canonical_form,
)
from .errors import StreamletError

SchemaSource = str | Path | dict


class SchemaError(StreamletError, ValueError):
    """The schema text, file or dict is not a valid Avro record schema."""


@dataclass(frozen=True)
class AvroSchema:
    """A parsed Avro record schema.

    `schema` is the schema as a plain, self-contained dict: named types from other .avsc files
    are defined inline at their first use and referenced by name after it, the form fastavro,
    the avro package and Spark's `from_avro`/`to_avro` (jsonFormatSchema) all accept.
    """

    schema: dict[str, Any]
    origin: str = field(default="<inline>", compare=False)

    @classmethod
    def load(cls, source: SchemaSource, base_dir: Path | None = None) -> "AvroSchema":
        """Parse `source`: a path to an .avsc file, a dict, or a JSON string.

        Relative paths resolve against `base_dir` (the folder of the module declaring the
        port). Raises SchemaError naming the file and the reason.
        """
        origin = "<inline>"
        try:
            if isinstance(source, dict):
                raw = source
            elif isinstance(source, str) and source.lstrip().startswith(("{", "[", '"')):
                raw = json.loads(source)
            elif isinstance(source, (str, Path)):
                path = Path(source)
                if not path.is_absolute() and base_dir is not None:
                    path = base_dir / path
                origin = str(path)
                if not path.is_file():
                    raise SchemaError(f"schema file {path} does not exist")
                # load_schema resolves named types defined in sibling .avsc files.
                try:
                    raw = load_schema(str(path), _write_hint=False)
                except SchemaRepositoryError as e:
                    cause = e.__cause__
                    if isinstance(cause, json.JSONDecodeError):
                        raise SchemaError(f"{path}: not valid JSON: {cause.msg} at line {cause.lineno} "
                                          f"column {cause.colno}") from None
                    raise SchemaError(f"{path}: cannot read schema: {cause or e}") from None
            else:
                raise SchemaError(f"a schema must be an .avsc path, a dict or a JSON string, not {type(source).__name__}")
            parse_schema(raw)  # full validation: types, names, defaults
        except SchemaError:
            raise
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except (SchemaParseException, UnknownType, TypeError, ValueError, KeyError) as e:
            where = f" in {origin}" if origin != "<inline>" else ""
            raise SchemaError(f"invalid Avro schema{where}: {e}") from None
        if not isinstance(raw, dict) or raw.get("type") != "record":
            raise SchemaError("a port schema must be an Avro record (its fields become the DataFrame's columns)")
        return cls(raw, origin)

    @property
    def name(self) -> str:
        """Full name of the record, e.g. `nyc.flights.Flight`."""
        ns = self.schema.get("namespace")
        name = self.schema["name"]
        return name if "." in name or not ns else f"{ns}.{name}"

    @property
    def field_names(self) -> list[str]:
        """Top-level field names, in schema order: the columns of the decoded DataFrame."""
        return [f["name"] for f in self.schema["fields"]]

    def field(self, name: str) -> dict[str, Any] | None:
        """The record field named `name` (its Avro JSON dict), or None."""
        return next((f for f in self.schema["fields"] if f["name"] == name), None)

    @cached_property
    def json(self) -> str:
        """The schema as compact JSON, as given to Spark's from_avro/to_avro."""
        return json.dumps(self.schema, separators=(",", ":"))

    @cached_property
    def canonical_form(self) -> str:
        """Avro Parsing Canonical Form (the spec's normalisation, used for fingerprints)."""
        return to_parsing_canonical_form(parse_schema(self.schema))

    @cached_property
    def fingerprint(self) -> str:
        """CRC-64-AVRO fingerprint of the canonical form, as hex (the spec's schema id)."""
        return crc64_avro(self.canonical_form.encode("utf-8"))

    def parsed(self) -> dict[str, Any]:
        """The schema as parsed by fastavro, for fastavro's readers and writers."""
        return parse_schema(self.schema)


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC64_EMPTY & -(fp & 1))
        table.append(fp)
    return table


_CRC64_EMPTY = 0xC15D213AA4D7A795
_CRC64_TABLE = _crc64_table()


@lru_cache(maxsize=8192)  # ports of many streamlets share schemas
def crc64_avro(data: bytes) -> str:
    """The Avro spec's 64-bit Rabin fingerprint (CRC-64-AVRO) of `data`, as hex in the Java
    implementation's little-endian byte order: the same value as fastavro's, whose version
    rebuilds its 256-entry table on every call (4 ms a schema; a large blueprint has thousands)."""
    result = _CRC64_EMPTY
    for byte in data:
        result = (result >> 8) ^ _CRC64_TABLE[(result ^ byte) & 0xFF]
    return result.to_bytes(length=8, byteorder="little", signed=False).hex()


def encode(schema: AvroSchema, record: dict[str, Any], parsed: dict | None = None) -> bytes:
    """Avro binary encoding of one record, without container header (the value on the topic)."""
    import io

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed or schema.parsed(), record)
    return buf.getvalue()


def decode(schema: AvroSchema, value: bytes, parsed: dict | None = None) -> dict[str, Any]:
    """Decode one Avro binary value; raises if it is malformed or has trailing bytes."""
    import io

    buf = io.BytesIO(value)
    record = fastavro.schemaless_reader(buf, parsed or schema.parsed(), None)
    if buf.tell() != len(value):
        raise ValueError(f"{len(value) - buf.tell()} trailing bytes after the record")
    return record
