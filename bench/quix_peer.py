"""The Quix Streams peer: the benchmarks' map (flight_workload: add dep_delay_hours) as a Quix
Streams application, the Python stream processor the streamlets are compared with.

bench_map.py times it on the throughput input (`--quix`), bench_latency.py runs one per hop (the
`quix` variant). Benchmark-only dependency: `pip install -e .[bench]` (never a runtime one).
"""

from __future__ import annotations

import io
import tempfile
import uuid

from flight_workload import FLIGHT_EVENT, MAPPED_FLIGHT


def quix_map(bootstrap: str, in_topic: str, out_topic: str, reader_schema: dict = FLIGHT_EVENT) -> None:
    """The map in Quix Streams: bytes in, fastavro decode (`reader_schema`: FLIGHT_EVENT, or
    MAPPED_FLIGHT on a chain's later hops), map, fastavro encode as MAPPED_FLIGHT, bytes out (keys
    unchanged). Reads `in_topic` from the earliest offset and writes `out_topic` of the broker at
    `bootstrap` until the process is stopped (runs as a child process; blocks)."""
    import fastavro
    from quixstreams import Application

    reader, writer = fastavro.parse_schema(reader_schema), fastavro.parse_schema(MAPPED_FLIGHT)

    def mapped(value: bytes) -> bytes:
        rec = fastavro.schemaless_reader(io.BytesIO(value), reader, None)
        rec["dep_delay_hours"] = None if rec["dep_delay"] is None else rec["dep_delay"] / 60.0
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, rec)
        return buf.getvalue()

    app = Application(broker_address=bootstrap, consumer_group=f"quix-{uuid.uuid4().hex[:8]}",
                      state_dir=tempfile.mkdtemp(prefix="bench-quix-"),
                      auto_offset_reset="earliest", producer_extra_config={"linger.ms": 0},
                      consumer_extra_config={"fetch.wait.max.ms": 1}, loglevel="WARNING")
    src = app.topic(in_topic, value_deserializer="bytes", key_deserializer="bytes")
    dst = app.topic(out_topic, value_serializer="bytes", key_serializer="bytes")
    app.dataframe(src).apply(mapped).to_topic(dst)
    app.run()
