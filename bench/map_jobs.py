"""The map benchmark's jobs (bench_map.py's variants): one way each of running the workload's map
(flight_workload) from a Kafka topic to another, from the hand-written PySpark job (`baseline`)
through hand-written jobs that add one piece of the streamlet's data path at a time to the
streamlet itself started by StreamletRuntime (`streamlet`, with at-least-once, metrics and
trailing-bytes variants); JOBS maps each variant's name to its class (bench/README.md says what
each isolates). MetricsScraper scrapes the metrics variants' Prometheus endpoint while they run.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):  # the repo's packages and the sibling modules
    if p not in sys.path:
        sys.path.insert(0, p)

from flight_workload import FLIGHT_EVENT, KEY_FIELD, MAPPED_FLIGHT, CheckedMapper, Mapper, encode_mapped, spark_map  # noqa: E402


class Job:
    """One way of running the map: `start(...)` starts it and returns the queries to wait for;
    `finish()` runs after awaitTermination (outside the timed part)."""

    name = "?"
    description = ""

    # --registry: topics in the schema registry's wire format (streamlets.schema_registry); the jobs
    # that support it (wire_format) read and write it, each in its own way
    registry = None
    wire_format = False

    def __init__(self, spark, bootstrap, max_offsets: int | None, on_failure: str | None = None) -> None:
        self.spark = spark
        self.bootstrap = bootstrap  # host:port, or a KafkaConnection (--security: its TLS settings too)
        self.max_offsets = max_offsets
        self.on_failure = on_failure  # --on-failure: the streamlet jobs' run config on_failure (streamlets.runtime.quarantine)

    @property
    def servers(self) -> str:
        return getattr(self.bootstrap, "bootstrap_servers", self.bootstrap)

    @property
    def security(self):
        """The connection's KafkaSecurity (streamlets.kafka_security), or None for PLAINTEXT."""
        return getattr(self.bootstrap, "security", None)

    def kafka_options(self) -> dict[str, str]:
        """Spark's Kafka source and sink options: the servers and, secured, the security's Java
        settings (what one writes by hand for a TLS broker)."""
        security = self.security
        return {"kafka.bootstrap.servers": self.servers, **(security.java("kafka.") if security else {})}

    def start(self, in_topic: str, out_topic: str, checkpoint: str) -> list:
        raise NotImplementedError

    def finish(self) -> None:
        pass

    # Hand-written jobs share these: the same source and sink options the streamlet's transport uses.
    def source(self):
        reader = (self.spark.readStream.format("kafka")
                  .options(**self.kafka_options())
                  .option("subscribe", self._in_topic)
                  .option("startingOffsets", "earliest"))
        if self.max_offsets:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets))
        return reader.load()

    def sink(self, df, out_topic: str, checkpoint: str):
        return (df.writeStream.format("kafka")
                .options(**self.kafka_options())
                .option("topic", out_topic)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .queryName(f"{self.name}-{Path(checkpoint).name}")
                .start())

    def sink_decoded(self, decoded, out_topic: str, checkpoint: str, observe: bool = True):
        """The rest of the streamlet's plan after decoding (a DataFrame with RECORD and MALFORMED, as
        codec.decode_value gives): the observed dead-letter metric of inlet `in` (unless `observe` is
        False), the malformed filter, the map and codec.encode_outlet, to the sink."""
        from pyspark.sql import functions as F

        from streamlets.runtime.codec import MALFORMED, encode_outlet, record_columns
        from streamlets.runtime.deadletter import observation_name

        if observe:
            decoded = decoded.observe(
                observation_name("in"),
                F.count(F.lit(1)).alias("records"),
                F.sum(F.col(MALFORMED).cast("long")).alias("malformed"),
            )
        records = record_columns(decoded.where(~F.col(MALFORMED)), Mapper.inlet.schema)
        encoded = encode_outlet(spark_map(records), Mapper.out.schema, (KEY_FIELD,), "bench")
        return self.sink(encoded, out_topic, checkpoint)


class Baseline(Job):
    name = "baseline"
    description = ("hand-written: from_avro FAILFAST -> map -> to_avro (--registry: the 5-byte header cut off before "
                   "from_avro, the out subject's id put before to_avro's bytes)")
    wire_format = True

    def start(self, in_topic, out_topic, checkpoint):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        self._in_topic = in_topic
        value = F.col("value")
        if self.registry is not None:  # by hand: the one writer schema known, its header skipped
            value = F.expr("substring(value, 6)")
        records = self.source().select(from_avro(value, json.dumps(FLIGHT_EVENT)).alias("r")).select("r.*")
        encoded = encode_mapped(spark_map(records))
        if self.registry is not None:
            from streamlets.schema import AvroSchema
            from streamlets.schema_registry import header, register

            schema_id = register(self.registry, out_topic, AvroSchema.load(MAPPED_FLIGHT))
            encoded = encoded.select("key", F.concat(F.lit(header(schema_id)), F.col("value")).alias("value"))
        return [self.sink(encoded, out_topic, checkpoint)]


class BaselineSession(Baseline):
    name = "b-session"
    description = "baseline in a fresh SparkSession.newSession() per run, as the runtime gives each streamlet"

    def start(self, in_topic, out_topic, checkpoint):
        self.spark = self.session = self._root.newSession()
        return super().start(in_topic, out_topic, checkpoint)

    def __init__(self, spark, bootstrap, max_offsets, on_failure=None):
        super().__init__(spark, bootstrap, max_offsets, on_failure)
        self._root = spark


class BaselineListener(BaselineSession):
    name = "b-listener"
    description = "b-session plus the runtime's ProgressMonitor (a Python StreamingQueryListener) on the session"

    def start(self, in_topic, out_topic, checkpoint):
        from streamlets.runtime.monitor import ProgressMonitor

        self.spark = self.session = self._root.newSession()
        self.monitor = ProgressMonitor(None)
        self.session.streams.addListener(self.monitor)
        return Baseline.start(self, in_topic, out_topic, checkpoint)

    def finish(self):
        self.session.streams.removeListener(self.monitor)


class Permissive(Job):
    name = "permissive"
    description = "hand-written, from_avro PERMISSIVE, no filter"

    def start(self, in_topic, out_topic, checkpoint):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        self._in_topic = in_topic
        records = (self.source()
                   .select(from_avro(F.col("value"), json.dumps(FLIGHT_EVENT), {"mode": "PERMISSIVE"}).alias("r"))
                   .select("r.*"))
        return [self.sink(encode_mapped(spark_map(records)), out_topic, checkpoint)]


class SdkFilter(Job):
    name = "sdk-filter"
    description = "codec.decode_value PERMISSIVE + malformed filter (no observe), codec.encode_outlet"

    def start(self, in_topic, out_topic, checkpoint):
        from streamlets.runtime.codec import decode_value

        self._in_topic = in_topic
        decoded = decode_value(self.source(), Mapper.inlet.schema, permissive=True)
        return [self.sink_decoded(decoded, out_topic, checkpoint, observe=False)]


class SdkObserve(Job):
    name = "sdk-path"
    description = "the streamlet's exact plan (decode_value + observe + filter + encode_outlet), no runtime"

    def start(self, in_topic, out_topic, checkpoint):
        from streamlets.runtime.codec import decode_value

        self._in_topic = in_topic
        decoded = decode_value(self.source(), Mapper.inlet.schema, permissive=True)
        return [self.sink_decoded(decoded, out_topic, checkpoint)]


def _decode_v1(raw, schema, trailing: bool):
    """The streamlet's inlet decoding as codec.decode_value was first written (malformed = value
    or record null, or every field null), optionally plus a trailing-bytes check done by
    re-encoding (length(to_avro(record)) != length(value)): proposals measured against the SDK's
    current decode_value, built here so that the SDK itself stays untouched."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    from streamlets.runtime.codec import MALFORMED, RECORD

    df = raw.withColumn(RECORD, from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}))
    all_null = F.lit(True)
    for name in schema.field_names:
        all_null = all_null & F.col(f"{RECORD}.`{name}`").isNull()
    malformed = F.col("value").isNull() | F.col(RECORD).isNull() | all_null
    if trailing:
        malformed = malformed | F.coalesce(F.length(to_avro(F.col(RECORD), schema.json)) != F.length("value"), F.lit(True))
    return df.withColumn(MALFORMED, malformed)


def compact_malformed(dec, schema):
    """A proposal for codec.decode_value's trailing-bytes check, for flat records of primitive,
    nullable-primitive and timestamp fields (enough for this benchmark's schema): the Avro length
    of the decoded record computed in two projections, so that each field's zigzag value is a
    column computed once (Spark's CollapseProject keeps a projection whose non-trivial outputs
    are used more than once) and the generated code stays small. `dec` has RECORD and value."""
    from pyspark.sql import functions as F

    from streamlets.runtime.codec import MALFORMED, RECORD

    def varint(z):  # bytes of the varint of a zigzag value (a long read as unsigned)
        expr = F.when(z < F.lit(0), F.lit(10))
        for k in range(1, 9):
            expr = expr.when(z < F.lit(1 << (7 * k)), F.lit(k))
        return expr.otherwise(F.lit(9))

    def zigzag(v):
        v = v.cast("long")
        return F.shiftleft(v, 1).bitwiseXOR(F.shiftright(v, 63))

    step1, lengths = [], []
    for i, f in enumerate(schema.schema["fields"]):
        t, col = f["type"], F.col(f"{RECORD}.`{f['name']}`")
        union = isinstance(t, list)
        if union:
            t = next(b for b in t if b != "null")
        kind = t if isinstance(t, str) else t.get("logicalType") or t["type"]
        z = f"__z{i}"
        if kind in ("string", "bytes"):
            n = F.octet_length(col) if kind == "string" else F.length(col)
            step1 += [n.cast("long").alias(f"__n{i}")]
            length = varint(F.col(f"__n{i}") * 2) + F.col(f"__n{i}")
        elif kind in ("int", "long", "timestamp-millis"):
            step1.append(zigzag(F.unix_millis(col) if kind == "timestamp-millis" else col).alias(z))
            length = varint(F.col(z))
        else:
            length = F.lit({"double": 8, "float": 4, "boolean": 1, "null": 0}[kind])
        if union:  # the branch index, then the value unless null
            length = F.lit(1) + F.when(col.isNull(), F.lit(0)).otherwise(length)
        lengths.append(length)
    all_null = F.lit(True)
    for name in schema.field_names:
        all_null = all_null & F.col(f"{RECORD}.`{name}`").isNull()
    df = dec.select("*", *step1)
    total = lengths[0]
    for length in lengths[1:]:
        total = total + length
    trailing = F.coalesce(total != F.length("value"), F.lit(True))
    malformed = F.col("value").isNull() | F.col(RECORD).isNull() | all_null | trailing
    return df.select(RECORD, malformed.alias(MALFORMED))


class SdkV1(Job):
    name = "sdk-v1"
    description = "the streamlet's plan with decode_value as first written (no trailing-bytes check), no runtime"
    trailing = False

    def start(self, in_topic, out_topic, checkpoint):
        self._in_topic = in_topic
        decoded = _decode_v1(self.source(), Mapper.inlet.schema, self.trailing)
        return [self.sink_decoded(decoded, out_topic, checkpoint)]


class SdkReencode(SdkV1):
    name = "reencode"
    description = "sdk-v1 plus a trailing-bytes check by re-encoding: length(to_avro(record)) != length(value)"
    trailing = True


class SdkCompact(SdkV1):
    name = "compact"
    description = "sdk-v1 plus the trailing-bytes check as a compact length expression (compact_malformed)"

    def start(self, in_topic, out_topic, checkpoint):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        from streamlets.runtime.codec import RECORD

        self._in_topic = in_topic
        schema = Mapper.inlet.schema
        dec = self.source().withColumn(RECORD, from_avro(F.col("value"), schema.json, {"mode": "PERMISSIVE"}))
        return [self.sink_decoded(compact_malformed(dec, schema), out_topic, checkpoint)]


class StreamletJob(Job):
    name = "streamlet"
    description = ("Mapper started by StreamletRuntime (KafkaTransport, dead letters, progress monitor; --registry: "
                   "registry topics, runtime.schema_registry)")
    wire_format = True

    streamlet_class = Mapper
    delivery = "exactly-once"
    metrics = False  # serve and scrape the Prometheus endpoint (MetricsScraper)

    def start(self, in_topic, out_topic, checkpoint):
        from streamlets.runtime.runconfig import StreamletRunConfig
        from streamlets.runtime.runner import StreamletRuntime
        from streamlets.runtime.transport import KafkaTransport

        from streamlets.kafka_security import KafkaSecurity

        security = self.security or KafkaSecurity()
        registry = {"schema_registry": self.registry, "registry_ports": ["in", "out"]} if self.registry else {}
        run = StreamletRunConfig(
            app_id="bench", streamlet="mapper",
            class_name=f"{self.streamlet_class.__module__}.{self.streamlet_class.__name__}",
            topics={"in": in_topic, "out": out_topic}, bootstrap_servers=self.servers, kafka_security=security,
            checkpoint_root=checkpoint, dead_letter_topic=DEAD_LETTERS, available_now=True,
            max_offsets_per_trigger=self.max_offsets, on_failure=self.on_failure, delivery=self.delivery, **registry,
        )
        self.runtime = StreamletRuntime(self.spark, "bench", DEAD_LETTERS, KafkaTransport(self.servers, security=security))
        self.ctx = self.runtime.start_class(self.streamlet_class, run)
        self.scraper = MetricsScraper(self.runtime, run) if self.metrics else None
        return list(self.ctx.queries)

    def finish(self):
        if self.scraper is not None:
            self.scraper.stop()
        self.runtime.stop()
        dl = self.runtime.dead_letters
        if dl.errors or any(dl.written.values()):
            raise AssertionError(f"streamlet reported dead letters: {dl.written} {dl.errors}")


class StreamletAloJob(StreamletJob):
    name = "streamlet-alo"
    description = "Mapper by StreamletRuntime with streamlets.<name>.delivery = at-least-once (Spark's Kafka sink)"
    delivery = "at-least-once"


class StreamletMetricsJob(StreamletJob):
    name = "streamlet-metrics"
    description = "Mapper by StreamletRuntime serving its Prometheus endpoint (streamlets.driver.serve_metrics), scraped every second"
    metrics = True


class StreamletAloMetricsJob(StreamletAloJob):
    name = "streamlet-alo-metrics"
    description = "the at-least-once streamlet serving its Prometheus endpoint, scraped every second"
    metrics = True


class CheckedStreamletJob(StreamletJob):
    name = "checked"
    description = "CheckedMapper: the streamlet with AvroInlet(check_trailing_bytes=True), by StreamletRuntime"
    streamlet_class = CheckedMapper


class MetricsScraper:
    """streamlet-metrics: the driver's Prometheus endpoint (streamlets.driver.serve_metrics) on a free
    port, scraped every `interval` seconds (Prometheus' default is 15 s; 1 s is the harsher case)
    while the job runs. stop() checks the last scrape saw the streamlet's records-in counter."""

    def __init__(self, runtime, run, interval: float = 1.0) -> None:
        from blueprint.sandbox.kafka_broker import _free_ports
        from streamlets.driver import serve_metrics

        port = _free_ports(1)[0]
        self.server = serve_metrics(runtime, run, env={"STREAMLETS_METRICS_PORT": str(port)})
        if self.server is None:
            raise RuntimeError("streamlet-metrics: the metrics endpoint did not start (see the log)")
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.scrapes, self.last = 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self._thread.start()

    def _loop(self, interval: float) -> None:
        import urllib.request

        while not self._stop.wait(interval):
            with urllib.request.urlopen(self.url, timeout=10) as r:
                self.last = r.read().decode()
            self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.server.shutdown()
        if self.scrapes and "streamlets_records_in_total{" not in self.last:
            raise AssertionError(f"streamlet-metrics: the last scrape has no records-in counter: {self.last[:500]}")


DEAD_LETTERS = "bench.dead-letters"
JOBS: dict[str, type[Job]] = {j.name: j for j in (Baseline, BaselineSession, BaselineListener, Permissive, SdkFilter,
                                                   SdkObserve, SdkV1, SdkReencode, SdkCompact, StreamletJob,
                                                   StreamletAloJob, StreamletMetricsJob, StreamletAloMetricsJob)}
if CheckedMapper is not None:
    JOBS[CheckedStreamletJob.name] = CheckedStreamletJob
DEFAULT_VARIANTS = ("baseline", "streamlet")
