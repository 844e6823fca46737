"""The benchmarks' workload: flight events (Avro, 12 fields), the map (add dep_delay_hours) as a
Spark expression and in Python, and the streamlets that run it (Mapper, CheckedMapper).

Shared by bench_map.py (throughput), bench_latency.py (latency) and profile_map.py. Record `i` is
deterministic (flight_record), so a benchmark checks its output by rebuilding the input
(expected_output). Importing it starts no Spark: the Spark helpers import pyspark when called.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from anywhere: the repo's packages first
    sys.path.insert(0, str(REPO))

from streamlets import AvroInlet, AvroOutlet, Streamlet  # noqa: E402

FLIGHT_EVENT = {
    "type": "record",
    "name": "FlightEvent",
    "namespace": "bench.flights",
    "fields": [
        {"name": "flight_id", "type": "string"},
        {"name": "origin", "type": "string"},
        {"name": "dest", "type": "string"},
        {"name": "carrier", "type": "string"},
        {"name": "flight", "type": "int"},
        {"name": "tailnum", "type": ["null", "string"], "default": None},
        {"name": "time_hour", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "sched_dep_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "dep_delay", "type": ["null", "double"], "default": None},
        {"name": "arr_delay", "type": ["null", "double"], "default": None},
        {"name": "distance", "type": "int"},
        {"name": "cancelled", "type": "boolean"},
    ],
}

MAPPED_FLIGHT = {
    "type": "record",
    "name": "MappedFlight",
    "namespace": "bench.flights",
    "fields": FLIGHT_EVENT["fields"] + [{"name": "dep_delay_hours", "type": ["null", "double"], "default": None}],
}

KEY_FIELD = "flight_id"
ORIGINS = ("EWR", "JFK", "LGA")
DESTS = ("ATL", "BOS", "CLT", "DCA", "DEN", "DFW", "DTW", "FLL", "IAH", "LAX",
         "MCO", "MIA", "MSP", "ORD", "RDU", "SFO", "SEA", "TPA", "PHL", "BNA")
CARRIERS = ("UA", "AA", "B6", "DL", "EV", "MQ", "US", "WN", "VX", "FL", "AS", "9E")
BASE_MS = 1_356_998_400_000  # 2013-01-01T00:00:00Z
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _mix(i: int) -> int:
    """A cheap deterministic hash of the record index (so records can be rebuilt to check output)."""
    x = (i * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    return x ^ (x >> 12)


def flight_record(i: int) -> dict[str, Any]:
    """Input record number `i` (deterministic): about 70 bytes of Avro."""
    h = _mix(i)
    cancelled = h % 37 == 0
    time_hour = BASE_MS + (i // 40) * 3_600_000
    carrier = CARRIERS[h % len(CARRIERS)]
    flight = 1 + (h >> 4) % 6000
    origin = ORIGINS[i % 3]
    return {
        "flight_id": f"2013{1 + (i // 40) % 12:02d}{1 + (i // 480) % 28:02d}-{carrier}{flight}-{origin}-{i}",
        "origin": origin,
        "dest": DESTS[(h >> 8) % len(DESTS)],
        "carrier": carrier,
        "flight": flight,
        "tailnum": None if h % 53 == 0 else f"N{(h >> 6) % 1000:03d}{carrier}",
        "time_hour": time_hour,
        "sched_dep_time": time_hour + ((h >> 10) % 60) * 60_000,
        "dep_delay": None if cancelled else float((h >> 12) % 180) - 20.0 + ((h >> 3) % 4) * 0.25,
        "arr_delay": None if cancelled or h % 41 == 0 else float((h >> 14) % 200) - 30.0,
        "distance": 80 + (h >> 16) % 4900,
        "cancelled": cancelled,
    }


def encoded_flight(i: int) -> tuple[bytes, bytes]:
    """Record `i` as a Kafka message: (key: its flight_id, UTF-8; value: its Avro binary encoding
    in FLIGHT_EVENT, fastavro's schemaless writer)."""
    import io

    import fastavro

    global _PARSED
    if _PARSED is None:
        _PARSED = fastavro.parse_schema(FLIGHT_EVENT)
    rec = flight_record(i)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, rec)
    return rec[KEY_FIELD].encode(), buf.getvalue()


_PARSED: Any = None  # FLIGHT_EVENT parsed by fastavro, on first use


def send(producer: Any, topic: str, key: bytes, value: bytes) -> None:
    """confluent-kafka `producer.produce` of one message, serving delivery reports (poll, 1 ms)
    while its local queue is full (BufferError) until it takes the message."""
    while True:
        try:
            producer.produce(topic, value=value, key=key)
            return
        except BufferError:
            producer.poll(0.001)


def record_index(flight_id: str) -> int:
    return int(flight_id.rsplit("-", 1)[1])


def expected_output(i: int) -> dict[str, Any]:
    """What both jobs must write for input record `i` (the map, in Python)."""
    rec = flight_record(i)
    rec["dep_delay_hours"] = None if rec["dep_delay"] is None else rec["dep_delay"] / 60.0
    return rec


def spark_map(df):
    """The map, as a Spark expression: the same in both jobs."""
    from pyspark.sql import functions as F

    return df.withColumn("dep_delay_hours", F.col("dep_delay") / F.lit(60.0))


class Mapper(Streamlet):
    """Adds dep_delay_hours to each flight event."""

    inlet = AvroInlet("in", FLIGHT_EVENT)
    out = AvroOutlet("out", MAPPED_FLIGHT, key=KEY_FIELD)

    def create_logic(self, ctx) -> None:
        ctx.write_stream(spark_map(ctx.read_stream(self.inlet)), self.out)


try:
    class CheckedMapper(Streamlet):
        """Mapper whose inlet also counts values with trailing bytes as malformed (opt-in)."""

        inlet = AvroInlet("in", FLIGHT_EVENT, check_trailing_bytes=True)
        out = AvroOutlet("out", MAPPED_FLIGHT, key=KEY_FIELD)

        def create_logic(self, ctx) -> None:
            ctx.write_stream(spark_map(ctx.read_stream(self.inlet)), self.out)
except TypeError:  # an SDK without the option
    CheckedMapper = None  # type: ignore[assignment,misc]


def epoch_millis(value: Any) -> Any:
    """`value` as fastavro reads a timestamp-millis back (a datetime) in milliseconds since the
    epoch, as flight_record writes it; other values unchanged."""
    return round((value - EPOCH) / timedelta(milliseconds=1)) if isinstance(value, datetime) else value


def encode_mapped(df):
    """The hand-written outlet: a DataFrame with MAPPED_FLIGHT's columns to Kafka's `key` (flight_id
    as a string) and `value` (to_avro of the output fields), as the baseline jobs write it."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    fields = [f["name"] for f in MAPPED_FLIGHT["fields"]]
    return df.select(F.col(KEY_FIELD).cast("string").alias("key"),
                     to_avro(F.struct(*[F.col(f) for f in fields]), json.dumps(MAPPED_FLIGHT)).alias("value"))
