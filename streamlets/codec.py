"""The Avro codec on the data path, as Spark expressions evaluated in the JVM.

Values are Avro binary without container header (as Cloudflow): decoded with Spark's
`from_avro`, encoded with `to_avro`, both given the port's schema as JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import SchemaMismatchError
from .schema import AvroSchema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RECORD = "__record"
MALFORMED = "__malformed"


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


def decode_value(raw: "DataFrame", schema: AvroSchema, permissive: bool, writer: AvroSchema | None = None) -> "DataFrame":
    """`raw` (a Kafka-shaped DataFrame with a binary `value`) plus RECORD (the decoded struct)
    and, when permissive, MALFORMED (boolean: the value does not decode).

    `writer` is the producer's schema when it differs from the inlet's (`schema`): values are
    then read by Avro schema resolution (from_avro's writer schema plus its `avroSchema`
    option as the reader schema), so a consumer may lag a compatible producer evolution.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    options = {"mode": "PERMISSIVE" if permissive else "FAILFAST"}
    if writer is not None and writer.fingerprint != schema.fingerprint:
        options["avroSchema"] = schema.json
    else:
        writer = schema
    df = raw.withColumn(RECORD, from_avro(F.col("value"), writer.json, options))
    if not permissive:
        return df
    all_null = F.lit(True)
    for name in schema.field_names:
        all_null = all_null & F.col(f"{RECORD}.`{name}`").isNull()
    valid_all_null = all_null_encoding(writer)
    malformed = F.col("value").isNull() | F.col(RECORD).isNull()
    if valid_all_null is None:
        malformed = malformed | all_null
    else:
        malformed = malformed | (all_null & (F.col("value") != F.lit(valid_all_null)))
    return df.withColumn(MALFORMED, malformed)


def record_columns(df: "DataFrame", schema: AvroSchema) -> "DataFrame":
    """The decoded record's fields as top-level columns, in schema order."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(f"{RECORD}.`{n}`").alias(n) for n in schema.field_names])


def encode_outlet(df: "DataFrame", schema: AvroSchema, key: tuple[str, ...], where: str) -> "DataFrame":
    """`df` as Kafka rows: `key` (string from the partition-key fields, or null) and `value`
    (to_avro of the schema's fields in schema order). Raises SchemaMismatchError naming the
    missing columns before any query starts (`where` names the streamlet and outlet)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    fields = schema.field_names
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise SchemaMismatchError(
            f"{where}: the DataFrame lacks column(s) {', '.join(missing)} of {schema.name}; "
            f"it has {', '.join(df.columns)}"
        )
    value = to_avro(F.struct(*[F.col(f"`{f}`") for f in fields]), schema.json)
    if not key:
        key_col = F.lit(None).cast("string")
    elif len(key) == 1:
        key_col = F.col(f"`{key[0]}`").cast("string")
    else:
        key_col = F.concat_ws("|", *[F.col(f"`{k}`").cast("string") for k in key])
    return df.select(key_col.alias("key"), value.alias("value"))
