"""The Avro codec on the data path, as Spark expressions evaluated in the JVM.

Values are Avro binary without container header (as Cloudflow): decoded with Spark's
`from_avro`, encoded with `to_avro`, both given the port's schema as JSON. Schema registry topics
(streamlets.schema_registry) add the wire format's header: runtime.schema_registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import SchemaMismatchError, StreamletError
from ..logical_types import mismatches
from ..schema import AvroSchema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from ..schema_registry import SchemaRegistry

RECORD = "__record"
MALFORMED = "__malformed"
READER_VALUE = "__reader_value"  # a registry topic's value in the inlet schema's encoding


def sql_name(name: str) -> str:
    """`name` as a Spark SQL identifier: in backticks, a backtick in it doubled."""
    return "`" + name.replace("`", "``") + "`"


def _null_index(field_type: Any) -> int | None:
    """Branch index of "null" if the field's type is a union containing null."""
    if isinstance(field_type, list):
        for i, branch in enumerate(field_type):
            if branch == "null" or (isinstance(branch, dict) and branch.get("type") == "null"):
                return i
    return None


def all_null_encoding(schema: AvroSchema) -> bytes | None:
    """Avro binary of the record whose every field is null, or None if a field cannot be null.

    Spark's from_avro in PERMISSIVE mode turns a malformed value into a record of nulls; this
    tells such a record from a well-formed one that really has all fields null.
    """
    out = bytearray()
    for f in schema.schema["fields"]:
        idx = _null_index(f["type"])
        if idx is None:
            return None
        out.append(idx << 1)  # zigzag varint of a small non-negative int
    return bytes(out)


def required_field(schema: AvroSchema) -> str | None:
    """The first field of the record `schema` that cannot be null (its type neither "null" nor a
    union with null), or None if every field can be.

    Spark's from_avro in PERMISSIVE mode turns a malformed value into a record of nulls, and a
    well-formed value never decodes to a null in such a field: checking that one field tells the
    two apart (decode_value). Where Spark's optimizer pushes a filter on MALFORMED below the decode
    (the dead-letter scan's), it inlines from_avro into it once per field checked: one field, one
    copy, where checking every field decoded each value once per field (bench/README.md,
    bench_inlet_decode.py).
    """
    for f in schema.schema["fields"]:
        t = f["type"]
        if _null_index(t) is None and t != "null" and not (isinstance(t, dict) and t.get("type") == "null"):
            return f["name"]
    return None


class _Unsupported(StreamletError):
    """A type whose binary length this module does not compute (arrays, maps, decimals...)."""


def _varint_length(n: "Column") -> "Column":
    """Bytes of the Avro varint of a zigzag-encoded long (negative: the top bit is set, 10 bytes)."""
    from pyspark.sql import functions as F

    expr = F.when(n < 0, F.lit(10))
    for k in range(1, 9):
        expr = expr.when(n < F.lit(1 << (7 * k)), F.lit(k))
    return expr.otherwise(F.lit(9))  # below 2**63


def _long_length(v: "Column") -> "Column":
    from pyspark.sql import functions as F

    v = v.cast("long")
    return _varint_length(F.shiftleft(v, 1).bitwiseXOR(F.shiftright(v, 63)))  # zigzag


def _length_of(col: "Column", avro_type: Any, names: dict[str, Any], namespace: str | None) -> "Column":
    """Avro binary length of a decoded value, as a Spark expression (no serialisation)."""
    from pyspark.sql import functions as F

    if isinstance(avro_type, str):
        if avro_type in names or (namespace and f"{namespace}.{avro_type}" in names):
            return _length_of(col, names.get(avro_type) or names[f"{namespace}.{avro_type}"], names, namespace)
        fixed = {"null": 0, "boolean": 1, "float": 4, "double": 8}
        if avro_type in fixed:
            return F.lit(fixed[avro_type])
        if avro_type in ("int", "long"):
            return _long_length(col)
        if avro_type in ("string", "bytes"):
            n = F.octet_length(col) if avro_type == "string" else F.length(col)
            return _long_length(n) + n
        raise _Unsupported(avro_type)
    if isinstance(avro_type, list):
        nulls = [i for i, b in enumerate(avro_type) if b == "null"]
        if len(avro_type) == 2 and nulls:
            other = avro_type[1 - nulls[0]]
            return F.lit(1) + F.when(col.isNull(), F.lit(0)).otherwise(_length_of(col, other, names, namespace))
        raise _Unsupported("union")
    kind, logical = avro_type.get("type"), avro_type.get("logicalType")
    if kind == "record":
        ns = avro_type.get("namespace", namespace)
        name = avro_type["name"] if "." in avro_type["name"] or not ns else f"{ns}.{avro_type['name']}"
        names[name] = names[avro_type["name"]] = avro_type
        total = F.lit(0)
        for f in avro_type["fields"]:
            total = total + _length_of(col.getField(f["name"]), f["type"], names, ns)
        return total
    if kind == "enum":
        names[avro_type["name"]] = avro_type
        if len(avro_type["symbols"]) > 64:
            raise _Unsupported("enum")
        return F.lit(1)
    if kind == "fixed" and not logical:
        names[avro_type["name"]] = avro_type
        return F.lit(int(avro_type["size"]))
    if logical is None and isinstance(kind, str):
        return _length_of(col, kind, names, namespace)
    as_number = {("long", "timestamp-millis"): F.unix_millis, ("long", "timestamp-micros"): F.unix_micros,
                 ("int", "date"): F.unix_date}
    if (kind, logical) in as_number:
        return _long_length(as_number[(kind, logical)](col))
    raise _Unsupported(f"{kind}/{logical}")


def encoded_length(record: "Column", schema: AvroSchema) -> "Column":
    """Length in bytes of `record` (decoded with `schema`) in Avro binary encoding.

    Computed from the values where the schema allows (primitives, nullable unions, records,
    enums, fixed, dates and timestamps): cheap arithmetic on columns. Otherwise Spark's to_avro
    re-encodes the record. Equal to the raw value's length exactly when the decoder used every
    byte: Spark's from_avro ignores trailing bytes, this catches them.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    try:
        return _length_of(record, schema.schema, {}, schema.schema.get("namespace"))
    except _Unsupported:
        return F.length(to_avro(record, schema.json))


def check_logical_types(writer: AvroSchema, reader: AvroSchema, where: str = "inlet") -> None:
    """Raise SchemaMismatchError if `reader` would read a field `writer` writes with another Avro
    logical type (decimal precision or scale, timestamp unit, date, uuid...: see
    streamlets.logical_types, the check `blueprint verify` makes). Pure Python, no Spark: run
    before a query starts, so that no value is decoded into another meaning. `where` names the
    streamlet and inlet in the message."""
    found = mismatches(writer.schema, reader.schema)
    if found:
        raise SchemaMismatchError(
            f"{where}: refusing to start: the producer's schema {writer.name} and the inlet's {reader.name} differ in "
            f"logical types, so values would change their meaning: {'; '.join(m.message for m in found)}. "
            f"Give the inlet the producer's logical types (`blueprint verify` reports this as logical-type-mismatch)")


def decode_value(raw: "DataFrame", schema: AvroSchema, permissive: bool, writer: AvroSchema | None = None,
                 check_trailing_bytes: bool = False, where: str = "inlet",
                 registry: "SchemaRegistry | None" = None) -> "DataFrame":
    """`raw` (a Kafka-shaped DataFrame with a binary `value`) plus RECORD (the decoded struct)
    and, when permissive, MALFORMED (boolean: the value does not decode).

    `writer` is the producer's schema when it differs from the inlet's (`schema`): values are
    then read by Avro schema resolution (from_avro's writer schema plus its `avroSchema`
    option as the reader schema), so a consumer may lag a compatible producer evolution.
    `check_trailing_bytes` also counts as malformed a value with bytes after a complete record
    (see encoded_length); it costs about a fifth of a simple map's throughput.
    Raises SchemaMismatchError (naming `where`) before any decoding when `writer` and `schema`
    differ in logical types (check_logical_types): Avro resolution would ignore them.

    `registry`: the topic carries the schema registry's wire format (streamlets.schema_registry):
    each value is first turned into `schema`'s encoding by the writer schema its id names
    (runtime.schema_registry.to_reader, in the JVM; `writer` does not apply); a value with no
    such reading is malformed.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    if registry is not None:
        writer = None  # each value names its writer schema
    if writer is not None:
        check_logical_types(writer, schema, where)
    options = {"mode": "PERMISSIVE" if permissive else "FAILFAST"}
    if writer is not None and writer.fingerprint != schema.fingerprint:
        options["avroSchema"] = schema.json
    else:
        writer = schema
    value = F.col("value")
    if registry is not None:
        from .schema_registry import to_reader

        raw = raw.withColumn(READER_VALUE, to_reader(raw.sparkSession, value, registry, schema))
        value = F.col(READER_VALUE)
        if not permissive:  # FAILFAST: a value with no reading fails the query, as from_avro does
            value = F.when(value.isNotNull() | F.col("value").isNull(), value).otherwise(
                F.raise_error(F.lit(f"{where}: a value is not in the schema registry's wire format of a schema "
                                    f"the inlet can read (error handling \"fail\")")))
    df = raw.withColumn(RECORD, from_avro(value, writer.json, options))
    if not permissive:
        return df.drop(READER_VALUE)
    # One SQL expression, not a Column per field: each Column built in Python is a py4j call or
    # more, and a query's start paid about 1,200 of them for a 12-field record (bench_map)
    value_sql = sql_name(READER_VALUE if registry is not None else "value")
    record = sql_name(RECORD)
    required = required_field(schema)  # RECORD has the inlet's fields (read with `schema`, or resolved to it)
    if required is not None:  # null only in PERMISSIVE's record of nulls
        all_null = f"{record}.{sql_name(required)} IS NULL"
    else:
        all_null = " AND ".join(f"{record}.{sql_name(n)} IS NULL" for n in schema.field_names) or "true"
        valid_all_null = all_null_encoding(writer)
        if valid_all_null is not None:  # a record of nulls is malformed unless the value encodes one
            all_null = f"{all_null} AND {value_sql} != X'{valid_all_null.hex()}'"
    malformed = F.expr(f"{value_sql} IS NULL OR {record} IS NULL OR ({all_null})")
    if check_trailing_bytes:
        # A value with bytes after a complete record is not that record (JSON text, a Confluent
        # schema-registry header, two records glued): measure what the decoder must have used.
        as_written = F.col(RECORD) if writer is schema else from_avro(value, writer.json, {"mode": "PERMISSIVE"})
        malformed = malformed | F.coalesce(encoded_length(as_written, writer) != F.length(value), F.lit(True))
    return df.withColumn(MALFORMED, malformed).drop(READER_VALUE)


def record_columns(df: "DataFrame", schema: AvroSchema) -> "DataFrame":
    """The decoded record's fields as top-level columns, in schema order. `schema` is the one
    decode_value read RECORD with: the struct holds its fields, in its order, and all of them."""
    # the struct's fields are the schema's, in its order (decode_value reads with `schema`, or
    # resolves to it), so one star expansion names them all: one py4j call, not one per field
    return df.select(f"{RECORD}.*")


def encode_outlet(df: "DataFrame", schema: AvroSchema, key: tuple[str, ...], where: str,
                  schema_id: int | None = None) -> "DataFrame":
    """`df` as Kafka rows: `key` (string from the partition-key fields, or null) and `value`
    (to_avro of the schema's fields in schema order; with `schema_id`, the schema registry's wire
    format: its 5-byte header, streamlets.schema_registry.header, first). Raises
    SchemaMismatchError naming the missing columns before any query starts (`where` names the
    streamlet and outlet)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    fields = schema.field_names
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise SchemaMismatchError(
            f"{where}: the DataFrame lacks column(s) {', '.join(missing)} of {schema.name}; "
            f"it has {', '.join(df.columns)}"
        )
    # SQL text, one py4j call per column (not one or more per field)
    value = to_avro(F.expr(f"struct({', '.join(sql_name(f) for f in fields)})"), schema.json)
    if schema_id is not None:
        from ..schema_registry import header

        value = F.concat(F.lit(header(schema_id)), value)
    as_text = [f"CAST({sql_name(k)} AS STRING)" for k in key]
    if not as_text:
        key_col = F.expr("CAST(NULL AS STRING)")
    elif len(as_text) == 1:
        key_col = F.expr(as_text[0])
    else:
        key_col = F.expr(f"concat_ws('|', {', '.join(as_text)})")
    return df.select(key_col.alias("key"), value.alias("value"))
