"""StreamletContext: what a streamlet's logic gets to build its queries."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .codec import check_logical_types, decode_value, encode_outlet, record_columns
from ..config import StreamletConfig
from .deadletter import DeadLetterWriter, InletRead, counted_records
from .exactly_once import EXACTLY_ONCE, delivery_for, transactional_stream_writer
from . import progress_tracking
from .. import schema_registry
from ..ports import AvroInlet, AvroOutlet, Port
from .runconfig import StreamletRunConfig
from ..schema import AvroSchema
from ..sources import INITIAL_STATE, INLET, session_conf, source_name
from .named_sources import plan_sources, start_conf
from ..trigger import MICRO_BATCH, RealTimeModeError, Trigger, cores_refusal, plan_refusals, sink_refusal, writer_sink
from ..volumes import VolumeMount

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from ..streamlet import Streamlet


class StreamletContext:
    """The running streamlet's view of the world.

    - `spark`: the SparkSession; `name`: the instance name in the blueprint; `app_id`.
    - `config`: typed config-parameter values (StreamletConfig).
    - `topic(port)`: the Kafka topic bound to a port.
    - `checkpoint_location(query)`: `<checkpoint root>/<query>`, Spark's checkpointLocation.
    - `mounted_path(mount)`: local path of a volume mount.
    - `read_stream(inlet)`, `write_stream(df, outlet)`, `start_query(writer, name)`.
    """

    def __init__(
        self,
        spark: "SparkSession",
        streamlet: "Streamlet",
        run: StreamletRunConfig,
        transport: Any,
        dead_letters: DeadLetterWriter | None = None,
    ) -> None:
        self.spark = spark
        self.streamlet = streamlet
        self.run = run
        self.name = run.streamlet
        self.app_id = run.app_id
        self.transport = transport
        self.dead_letters = dead_letters
        self.config = StreamletConfig(run.streamlet, type(streamlet).config_parameters(), run.config_parameters)
        self.queries: list["StreamingQuery"] = []
        self.log = logging.getLogger(f"streamlets.{run.streamlet}")
        self._inlet_reads: list[InletRead] = []
        self._topics_read: list[str] = []
        # source name -> the Kafka topic it reads (named_sources.start_conf matches old checkpoints by it),
        # and the reads of each source name since the last query start (a second read is `<name>_2`)
        self._source_topics: dict[str, str] = {}
        self._source_reads: dict[str, int] = {}
        # query name -> Kafka partitions of real-time queries in this SparkContext (the runtime's;
        # shared by its streamlets so that they do not claim the same cores twice)
        self.realtime_tasks: dict[str, int] = {}
        self.realtime_lock = threading.Lock()
        # (query, records) of each committed exactly-once batch; the runtime counts them as records out
        # (query, its checkpoint's last committed end offsets per source): what it had processed
        # before this start (ProgressMonitor.seed_end_offsets)
        self.seed_offsets: Callable[[str, list], None] | None = None

    @property
    def trigger(self) -> Trigger:
        """The streamlet's trigger: the run config's (streamlets.<name>.trigger), else the class's."""
        if self.run.trigger:
            return Trigger.parse(self.run.trigger)
        declared = type(self.streamlet).trigger
        return declared if isinstance(declared, Trigger) else MICRO_BATCH

    @property
    def async_progress(self) -> bool:
        """Whether the streamlet's queries track progress asynchronously (run config
        `progress_tracking`, streamlets.<name>.progress-tracking); never in a dry run."""
        return progress_tracking.parse(self.run.progress_tracking)[0] == progress_tracking.ASYNC and not self.run.dry_run

    def check_progress_tracking(self) -> None:
        """Before create_logic: refuse asynchronous progress tracking where the streamlet's settings
        rule it out (exactly-once outlets, Real-Time Mode, AvailableNow, quarantine, no Kafka):
        ProgressTrackingError, one line naming the streamlet and the reasons."""
        if not self.async_progress:
            return
        from .quarantine import on_failure_of
        from .transport import KafkaTransport

        real_time = self.trigger.real_time_mode
        reasons = progress_tracking.streamlet_refusals(
            kafka=isinstance(self.transport, KafkaTransport), real_time=real_time, available_now=self.run.available_now,
            delivery=delivery_for(self.run.delivery, self.transport, real_time=real_time), on_failure=on_failure_of(self))
        if reasons:
            raise progress_tracking.ProgressTrackingError(
                f"streamlet {self.name!r} cannot use asynchronous progress tracking: " + "; ".join(reasons))

    def topic(self, port: Port | str) -> str:
        """Kafka topic name bound to `port` (a port object or its name). KeyError if unbound."""
        name = port if isinstance(port, str) else port.name
        try:
            return self.run.topics[name]
        except KeyError:
            raise KeyError(f"streamlet {self.name!r}: port {name!r} is not connected to a topic") from None

    def checkpoint_location(self, query: str) -> str:
        """`<checkpoint root>/<query>`: Spark's checkpointLocation of query `query` (the run config's)."""
        return self.run.checkpoint_location(query)

    def mounted_path(self, mount: VolumeMount | str) -> Path:
        """Local folder of a volume mount (the sandbox's folder, or the mount path in a pod)."""
        name = mount if isinstance(mount, str) else mount.name
        declared = {m.name: m for m in type(self.streamlet).volume_mounts()}
        if name not in declared:
            raise KeyError(f"streamlet {self.name!r} declares no volume mount {name!r}")
        return Path(self.run.volume_mounts.get(name, declared[name].path))

    def read_stream(self, inlet: AvroInlet) -> "DataFrame":
        """A streaming DataFrame of the inlet's records: one column per Avro field, in schema order.

        Decoded in the JVM by Spark's from_avro; on a schema registry topic (blueprint
        `schema-registry: true`) each value is first read with the writer schema its id names,
        resolved to the inlet's (runtime.schema_registry), and SchemaMismatchError is raised
        before reading when a version registered under the subject differs from the inlet's
        schema in logical types. With error handling "dead-letter" (the default)
        malformed values are left out of the DataFrame, counted in the observed metric
        `dead-letters:<inlet>` and written to the dead-letter topic; with "fail" the query stops on
        the first one (from_avro's FAILFAST). Reads from the earliest offset on a first start
        (Kafka source `startingOffsets`), then from the checkpoint. The source is named
        `inlet_<inlet>` in the query's checkpoint (streamlets.sources), so a new version may add,
        drop or reorder inlets and continue from it. Raises SchemaMismatchError
        before reading when the producer's schema (run config `writer_schemas`) differs from the
        inlet's in logical types (codec.check_logical_types).
        """
        from pyspark.sql import functions as F

        topic = self.topic(inlet)
        self._topics_read.append(topic)
        registry = self.run.registry(inlet.name)
        writer = None if registry is not None else self.run.writer_schemas.get(inlet.name)
        writer_schema = AvroSchema.load(writer) if writer else None
        where = f"streamlet {self.name!r}, inlet {inlet.name!r} (topic {topic!r})"
        if writer_schema is not None:
            check_logical_types(writer_schema, inlet.schema, where)  # before anything is read or registered
        if registry is not None:  # every version registered so far; later ones are resolved as they come
            for version, schema_id, registered_schema in schema_registry.registered(registry, topic):
                check_logical_types(AvroSchema.load(registered_schema), inlet.schema,
                                    f"{where}, subject {schema_registry.subject(topic)} version {version} (id {schema_id})")
        name = self.source_name(INLET, inlet.name)
        self._source_topics[name] = topic
        limit = self.run.max_offsets_per_trigger  # the setting's normal text: digits (streamlets.settings)
        raw = self.transport.read_stream(self.spark, topic, int(limit) if limit else None, name=name)
        if not self.run.dry_run:
            from .quarantine import read_ledger, skip_quarantined

            raw = skip_quarantined(raw, topic, read_ledger(self.run.checkpoint_root, self.spark))
        if inlet.error_handling == "fail":
            decoded = decode_value(raw.where(F.col("value").isNotNull()), inlet.schema, permissive=False, writer=writer_schema,
                                   where=where, registry=registry)
            return record_columns(decoded, inlet.schema)
        self._inlet_reads.append(InletRead(self.name, inlet.name, topic, inlet.schema, writer_schema,
                                           inlet.check_trailing_bytes, registry))
        decoded = decode_value(raw, inlet.schema, permissive=True, writer=writer_schema,
                               check_trailing_bytes=inlet.check_trailing_bytes, where=where, registry=registry)
        return record_columns(counted_records(decoded, inlet.name), inlet.schema)

    def initial_state(self, query_name: str, operator_id: int = 0) -> "DataFrame | None":
        """The imported state for query `query_name` (run config `initial_state`, a state export
        made by `blueprint state export` in jsonl or parquet), as a streaming DataFrame with the
        export's columns (`key_<field>`, `value_<field>`, `partition_id`); None if none is set.

        Union it, mapped to partial aggregates, with the query's input (a count becomes a sum of
        counts), as the seed's "load the model from storage when starting without state". The
        file source reads it once and remembers that in the checkpoint, so keep the setting on
        restarts: the query's plan must not change. The source is named `initial_state_<operator_id>`
        (streamlets.sources). Raises StateExportError for a bad export.
        """
        from .registry import read_initial_state

        where = self.run.initial_state.get(query_name)
        if where is None:
            return None
        return read_initial_state(self.spark, where, operator_id, self.source_name(INITIAL_STATE, operator_id))

    def source_name(self, kind: str, name: str | int) -> str:
        """The name of the next source of kind `kind` (streamlets.sources: inlet, mount,
        initial_state) called `name` the streamlet reads: `<kind>_<name>`, with `_2`, `_3` for
        its second and third read before the next query starts (a query's source names are unique)."""
        base = source_name(kind, name)
        n = self._source_reads[base] = self._source_reads.get(base, 0) + 1
        return base if n == 1 else f"{base}_{n}"

    def write_stream(
        self,
        df: "DataFrame",
        outlet: AvroOutlet,
        *,
        query_name: str | None = None,
        output_mode: str | None = None,
    ) -> "StreamingQuery":
        """Start a query writing `df` to the outlet's topic as Avro (to_avro), keyed by the
        outlet's partition key, with its own checkpoint. Columns are matched to the schema's
        fields by name; extra columns are ignored, missing ones raise SchemaMismatchError.
        `output_mode` is Spark's (append, update); default append, update in Real-Time Mode (which
        runs stateless queries only, where the two are the same). `query_name` defaults to the
        outlet's name.

        An outlet the blueprint connects to no topic (verify's `unconnected-outlet` warning) still
        runs its query, with Spark's noop sink: its records are discarded.

        On a schema registry topic the outlet's schema is registered under the topic's subject
        first (SchemaRegistryError, before any query starts, when the subject's compatibility
        level refuses it) and values carry the wire format's header with its id.

        On Kafka the outlet is exactly-once unless the run config's `delivery` is at-least-once
        or the streamlet runs in Real-Time Mode: each micro-batch becomes visible as a whole
        (runtime.exactly_once: tasks write in Kafka transactions, the driver commits them with the
        batch); otherwise Spark's Kafka sink (at-least-once; the one Kafka sink Real-Time Mode
        runs). At-least-once outlets may track progress asynchronously (run config `progress_tracking`, runtime.progress_tracking).
        """
        where = f"streamlet {self.name!r}, outlet {outlet.name!r}"
        registry = self.run.registry(outlet.name) if outlet.name in self.run.topics else None
        schema_id = None
        if registry is not None and not self.run.dry_run:  # the registry's compatibility rules first
            schema_id = schema_registry.register(registry, self.topic(outlet), outlet.schema)
        elif registry is not None:
            schema_id = 0  # a dry run writes nothing: no registration
        encoded = encode_outlet(df, outlet.schema, outlet.key, where, schema_id)
        query_name = query_name or outlet.name
        real_time = self.trigger.real_time_mode and not self.run.dry_run
        mode = output_mode or ("update" if real_time else "append")
        if outlet.name not in self.run.topics:  # verify's unconnected-outlet warning: discarded, as Akka's Sink.ignore
            self.log.warning("outlet %r is not connected to a topic: query %s runs and its records are discarded "
                             "(Spark's noop sink)", outlet.name, query_name)
            return self._start(encoded.writeStream.format("noop").outputMode(mode), query_name, discard=True)
        if delivery_for(self.run.delivery, self.transport, self.run.dry_run, real_time=real_time) == EXACTLY_ONCE:
            with transactional_stream_writer(self, encoded, self.topic(outlet), query_name) as writer:
                return self.start_query(writer.outputMode(mode), query_name)
        return self.start_query(self.transport.write_stream(encoded, self.topic(outlet)).outputMode(mode), query_name)

    def start_query(self, writer: "DataStreamWriter", query_name: str) -> "StreamingQuery":
        """Start any query (file sinks, foreachBatch...) with the streamlet's checkpoint, trigger,
        progress tracking and query name `<streamlet>.<query_name>`; tracked so that the runtime can
        stop it."""
        return self._start(writer, query_name)

    def _start(self, writer: "DataStreamWriter", query_name: str, *, discard: bool = False) -> "StreamingQuery":
        """start_query; `discard`: an unconnected outlet's noop query, which runs as plain
        micro-batches whatever the streamlet's trigger and progress tracking (Real-Time Mode and
        asynchronous progress tracking refuse the noop sink, and nothing it writes needs them)."""
        location = self.checkpoint_location(query_name)
        if self.run.dry_run:  # the same plan, state and sources; nothing written; one micro-batch
            writer = writer.format("noop").trigger(once=True)
        else:
            if self.async_progress and not discard:
                self.check_async_query(writer, query_name)
            if self.dead_letters is not None:
                for read in self._inlet_reads:
                    self.dead_letters.recover(read, location)
            trigger = MICRO_BATCH if discard else self.trigger
            if self.run.available_now:
                writer = writer.trigger(availableNow=True)
            elif trigger.real_time_mode:
                self.check_real_time(writer, query_name)
                writer = trigger.apply(writer)
            elif trigger.kind == "processing-time":
                writer = trigger.apply(writer)
            elif self.run.trigger_interval:
                writer = writer.trigger(processingTime=self.run.trigger_interval)
            if self.async_progress and not discard:
                writer = progress_tracking.apply(writer, progress_tracking.parse(self.run.progress_tracking)[1])
        from .storage import storage_for

        storage = storage_for(location, self.spark)
        if not self.async_progress or discard:  # a checkpoint an asynchronous query left with gaps would fail to start
            progress_tracking.bridge_offset_gap(storage, location)
        if self.seed_offsets is not None:
            from .checkpoint import committed_batches, source_offsets

            committed = committed_batches(storage, location)
            if committed:
                self.seed_offsets(query_name, source_offsets(storage, location, committed[-1]))
        conf = start_conf(storage, location, plan_sources(writer._df), self._source_topics,  # noqa: SLF001
                          where=f"streamlet {self.name!r}, query {query_name!r}", replay_ok=self.run.dry_run)
        self._source_reads.clear()  # the next query's sources are named afresh
        # One FAIR scheduler pool per streamlet, so that streamlets sharing a session share cores.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", self.name)
        with session_conf(self.spark, conf):  # the settings Spark takes at the start (named_sources)
            query = writer.queryName(f"{self.name}.{query_name}").option("checkpointLocation", location).start()
        self.queries.append(query)
        self.log.info("started query %s (checkpoint %s)", query.name, location)
        return query

    def check_real_time(self, writer: "DataStreamWriter", query_name: str) -> None:
        """Refuse, before it starts, a query Real-Time Mode cannot run: RealTimeModeError with one
        line naming the streamlet and the reasons (stateful operators, Python UDFs, a source other
        than Kafka, a sink other than Kafka or foreach, fewer free cores than inlet partitions)."""
        reasons = plan_refusals(writer._df)  # noqa: SLF001 (the writer's DataFrame)
        sink = sink_refusal(writer_sink(writer))
        if sink:
            reasons.append(sink)
        partitions_of = getattr(self.transport, "partitions", None)
        if partitions_of is not None and self._topics_read:
            partitions = sum(partitions_of(t) for t in dict.fromkeys(self._topics_read))
            name = f"{self.name}.{query_name}"
            cores = self.spark.sparkContext.defaultParallelism
            with self.realtime_lock:  # streamlets may start at once (StreamletRuntime.start_all)
                taken = sum(n for q, n in self.realtime_tasks.items() if q != name)
                short = cores_refusal(partitions, cores, taken)
                if short:
                    reasons.append(short)
                elif not reasons:
                    self.realtime_tasks[name] = partitions
        if reasons:
            raise RealTimeModeError(f"streamlet {self.name!r} cannot run query {query_name!r} in real-time mode: "
                                    + "; ".join(reasons))

    def check_async_query(self, writer: "DataStreamWriter", query_name: str) -> None:
        """Refuse, before it starts, a query asynchronous progress tracking cannot run (a sink other
        than Kafka, a source other than Kafka, a stateful operator): ProgressTrackingError."""
        reasons = progress_tracking.query_refusals(writer._df, writer_sink(writer))  # noqa: SLF001
        if reasons:
            raise progress_tracking.ProgressTrackingError(
                f"streamlet {self.name!r} cannot run query {query_name!r} with asynchronous progress tracking: "
                + "; ".join(reasons))

    def inlet_reads(self) -> list[InletRead]:
        """The inlets read so far with dead-letter handling (InletRead: streamlet, inlet, topic, schemas), for
        the dead-letter scans."""
        return list(self._inlet_reads)
