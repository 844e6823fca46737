"""Garbage on an inlet of the flight-delays example never stops the application: 10% of the
flight-events values are random bytes, truncated flights, weather observations (another schema)
and values whose first varints announce strings of hundreds of megabytes to gigabytes (which,
without Avro's allocation limits, end the Spark JVM with OutOfMemoryError). The run completes,
every bad value is in the dead-letter topic exactly once with its partition and offset, and every
window equals the batch computation."""

from __future__ import annotations

import io
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import fastavro
from confluent_kafka import Consumer, Producer

from support.sandbox import REPO, flight_delays_run_config, run_blueprint

from streamlets.runtime.deadletter import DEAD_LETTER_SCHEMA
from streamlets.kafka_logging import client_config
from streamlets.schema import decode

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
SCHEMAS = APP / "flight_delays" / "schemas"
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

TOPIC = "flight-delays.flight-events"


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte, z = z & 0x7F, z >> 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


FLIGHT = fastavro.parse_schema(schema("flight_event.avsc"))
# Java's Avro does not check UTF-8 where fastavro does: a value counts as garbage only if it does
# not decode even with its strings read as bytes.
FLIGHT_AS_BYTES = fastavro.parse_schema(json.loads(json.dumps(schema("flight_event.avsc")).replace('"string"', '"bytes"')))
WEATHER = fastavro.parse_schema(schema("weather.avsc"))


def encode(parsed, record) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, record)
    return buf.getvalue()


def undecodable(value: bytes) -> bool:
    try:
        fastavro.schemaless_reader(io.BytesIO(value), FLIGHT_AS_BYTES, None)
    except Exception:
        return True
    return False


def flight(rng: random.Random) -> dict:
    hour = 1_357_000_000_000 + rng.randrange(0, 31 * 24) * 3_600_000
    return {"flight_id": f"201301{rng.randrange(1, 32):02d}-XX{rng.randrange(1, 9999)}-EWR", "origin": "EWR",
            "dest": "ORD", "carrier": "XX", "flight": rng.randrange(1, 9999), "tailnum": None, "time_hour": hour,
            "sched_dep_time": hour + 60_000 * rng.randrange(60), "dep_delay": rng.uniform(-10, 200),
            "arr_delay": None, "distance": rng.randrange(100, 3000), "cancelled": False}


def garbage(n: int, seed: int = 17) -> list[bytes]:
    """n values that are no FlightEvent, in four kinds, a quarter each (huge lengths included)."""
    rng = random.Random(seed)
    kinds = [
        lambda: rng.randbytes(rng.randrange(1, 120)),
        lambda: (lambda v: v[:rng.randrange(1, len(v))])(encode(FLIGHT, flight(rng))),
        lambda: encode(WEATHER, {"origin": rng.choice(["EWR", "JFK", "LGA"]), "time_hour": 1_357_000_000_000,
                                 "temp": rng.uniform(0, 90), "dewp": None, "humid": None, "wind_dir": None,
                                 "wind_speed": rng.uniform(0, 30), "wind_gust": None, "precip": 0.0,
                                 "pressure": None, "visib": 10.0}),
        # a flight_id (or origin after a short flight_id) of 0.3 to 2 GB, in a value of a few bytes
        lambda: rng.choice([b"", varint(3) + b"abc"]) + varint(rng.randrange(300_000_000, 2_000_000_000))
        + rng.randbytes(rng.randrange(0, 8)),
    ]
    out = []
    while len(out) < n:
        value = kinds[len(out) % len(kinds)]()
        if undecodable(value):
            out.append(value)
    return out


def test_ten_percent_garbage_on_flight_events_is_dead_lettered_and_windows_equal_batch(tmp_path):
    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics

    counts = prepare(tmp_path / "data", [1])
    bad = garbage(counts["flights"] // 10)
    conf = flight_delays_run_config(tmp_path)
    with KafkaBroker(tmp_path / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [(TOPIC, 3, {})])
        producer = Producer(client_config({"bootstrap.servers": bootstrap, "linger.ms": 20}))
        where: dict[tuple[int, int], bytes] = {}

        def delivered(err, msg):
            assert err is None, err
            where[(msg.partition(), msg.offset())] = msg.value()

        for i, value in enumerate(bad):
            producer.produce(TOPIC, value=value, partition=i % 3, on_delivery=delivered)
        producer.flush()
        assert len(where) == len(bad)

        result = run_blueprint("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(tmp_path / "state"),
                               "--kafka", bootstrap, "--exit-when-done", timeout=1200)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert f"dead letters: {len(bad)})" in result.stdout
        actual, expected = load_results(tmp_path / "output"), reference_stats([1])
        assert not actual.empty and differences(actual, expected) == [] and len(actual) == len(expected)

        consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "garbage-check",
                                            "auto.offset.reset": "earliest"}))
        consumer.subscribe(["flight-delays.dead-letters"])
        letters, quiet_until = [], time.time() + 90
        while time.time() < quiet_until:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                letters.append(decode(DEAD_LETTER_SCHEMA, msg.value()))
                if len(letters) >= len(bad):
                    quiet_until = min(quiet_until, time.time() + 5)  # a few seconds more: no duplicates
        consumer.close()
    seen = Counter((l["partition"], l["offset"]) for l in letters)
    assert [k for k, n in seen.items() if n > 1] == []  # exactly once
    assert set(seen) == set(where)
    assert all(l["value"] == where[(l["partition"], l["offset"])] for l in letters)
    assert {(l["topic"], l["streamlet"], l["inlet"]) for l in letters} == {(TOPIC, "enrich", "flights")}
    assert all(l["error"].startswith("not a valid Avro encoding of nyc.flights.FlightEvent") for l in letters)
