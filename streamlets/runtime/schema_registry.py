"""Schema registry topics on Spark (streamlets.schema_registry says what they are).

Inlets: the JVM UDF `streamlets.registry.ToReaderUdf` (jvm/streamlets-schema-registry, built by
runtime.jvm_jars and put on every session's class path by runtime.spark_session) turns each value
into the Avro binary encoding of the inlet's schema: it reads the schema id of the header, asks
the registry for that writer schema once per JVM (`GET /schemas/ids/<id>`) and resolves it to the
inlet's schema (Avro schema resolution), then Spark's from_avro decodes it as for any topic. A
value without the header, an id the registry does not know and a writer schema the inlet cannot
read give null: a dead letter, whose reason `streamlets.registry.ProblemUdf` says. The registry
unreachable fails the task (Spark retries it), never a record.

Outlets: the schema is registered under the subject when the query is built (the registry's
compatibility rules may refuse it: SchemaRegistryError before anything is written), and each
value is the header with that id followed by to_avro's encoding.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..schema_registry import SchemaRegistry
from .jvm_jars import JarBuildError, module_jar, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

    from ..schema import AvroSchema

NAME = "streamlets-schema-registry"
PACKAGE = "streamlets.registry"


def registry_jar() -> Path | None:
    """The jar of the wire-format UDFs (compiled against Spark's jars on first use); None when it
    cannot be built here (no javac and no jar in $SPARK_HOME/jars): only registry topics need it."""
    try:
        return module_jar(NAME, spark_jars())
    except JarBuildError:
        return None


def _udf_name(kind: str, registry: SchemaRegistry, reader: "AvroSchema") -> str:
    import hashlib

    digest = hashlib.sha256(f"{registry.model_dump_json()}\0{reader.json}".encode()).hexdigest()[:16]
    return f"streamlets_registry_{kind}_{digest}"


def _register(spark: "SparkSession", kind: str, registry: SchemaRegistry, reader: "AvroSchema") -> str:
    """Register the JVM UDF `kind` (ToReaderUdf or ProblemUdf) for this registry and reader schema
    in the session, once; its SQL name."""
    name = _udf_name(kind, registry, reader)
    if spark.catalog.functionExists(name):
        return name
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic session's py4j gateway
    package = jvm.streamlets.registry
    try:
        client = package.RegistryClient(registry.url, registry.ca_file or "", registry.username or "",
                                        registry.password_file or "", registry.password_env or "")
    except Exception as e:  # py4j: the class is not on the JVM's class path
        raise JarBuildError(f"the {NAME} jar is not on this Spark session's class path (a JDK's javac builds it, "
                            f"or an image puts it in $SPARK_HOME/jars): {str(e).splitlines()[0]}") from None
    fmt = package.WireFormat(client, reader.json)
    udf = getattr(package, kind)(fmt)
    types = jvm.org.apache.spark.sql.types.DataTypes
    spark._jsparkSession.udf().register(name, udf, types.BinaryType if kind == "ToReaderUdf" else types.StringType)
    return name


def to_reader(spark: "SparkSession", value: "Column", registry: SchemaRegistry, reader: "AvroSchema") -> "Column":
    """`value` (wire format, binary) as the Avro binary encoding of `reader`; null when it is not one."""
    from pyspark.sql import functions as F

    return F.call_function(_register(spark, "ToReaderUdf", registry, reader), value)


def problem(spark: "SparkSession", value: "Column", registry: SchemaRegistry, reader: "AvroSchema") -> "Column":
    """Why `value` has no reading as `reader` (a dead letter's reason), or null."""
    from pyspark.sql import functions as F

    return F.call_function(_register(spark, "ProblemUdf", registry, reader), value)
