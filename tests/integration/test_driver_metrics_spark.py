"""The driver's /metrics over a real micro-batch: a streamlet started on a StreamletRuntime (local
Spark, the test kit's file transport), its endpoint started as the driver starts it
(streamlets.driver.serve_metrics), and a scrape that counts the batch's records."""

import re
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.driver import serve_metrics
from streamlets.runtime.runconfig import METRICS_PORT_ENV, StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.runtime.transport import FileTransport
from streamlets.schema import encode
from streamlets.testkit import _write_batch
from support.ports import free_port

READING = {"type": "record", "name": "Reading", "namespace": "test.metrics", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "double"}]}


class Doubler(Streamlet):
    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", READING)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet).withColumn("value", F.col("value") * 2), self.out)


def slow(value):
    time.sleep(1.5)  # a record's processing, slow enough that a scrape sees the micro-batch run
    return value


class Slow(Streamlet):
    inlet = AvroInlet("in", READING)
    out = AvroOutlet("out", READING)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet).withColumn("value", F.udf(slow, "double")("value")), self.out)


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


@contextmanager
def served(spark, tmp_path, cls, streamlet: str, records: int) -> Iterator[tuple[StreamletRuntime, int]]:
    """`cls` started as `streamlet` on a StreamletRuntime over `records` input records (one
    micro-batch, Trigger.AvailableNow), its /metrics served as the driver serves it: (the runtime,
    the port)."""
    transport = FileTransport(tmp_path / "topics")
    transport.folder("in").mkdir(parents=True)
    rows = [{"id": i, "value": float(i)} for i in range(records)]
    _write_batch(transport.folder("in") / "batch-00000.parquet", "in", [encode(cls.inlet.schema, r) for r in rows])
    run = StreamletRunConfig(app_id="metrics-app", streamlet=streamlet, class_name=cls.class_name(),
                             topics={"in": "in", "out": "out"}, checkpoint_root=str(tmp_path / "checkpoints"),
                             available_now=True)
    port = free_port()
    runtime = StreamletRuntime(spark, run.app_id, None, transport)
    server = None
    try:
        runtime.start_class(cls, run)
        server = serve_metrics(runtime, run, {METRICS_PORT_ENV: str(port)})
        assert server is not None
        yield runtime, port
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        runtime.stop()


def test_metrics_count_a_micro_batch(spark, tmp_path):
    with served(spark, tmp_path, Doubler, "doubler", 3) as (runtime, port):
        (query,) = runtime.queries()
        query_name = query.name.partition(".")[2]
        labels = f'app="metrics-app",query="{query_name}",streamlet="doubler"'
        deadline, text = time.monotonic() + 120, ""
        while time.monotonic() < deadline:  # the progress report reaches the listener after the batch
            text = scrape(port)
            if f"streamlets_records_in_total{{{labels}}} 3.0" in text:
                break
            time.sleep(0.5)
        assert f"streamlets_records_in_total{{{labels}}} 3.0" in text, text
        # (records out: the file transport's foreachBatch sink reports none; Kafka outlets do)
        assert f"streamlets_records_out_total{{{labels}}} " in text
        assert re.search(rf"streamlets_batches_total\{{{re.escape(labels)}\}} [1-9]", text)
        assert 'streamlets_restarts_total{app="metrics-app",streamlet="doubler"} 0.0' in text
        # a local master runs tasks in the driver: one executor with the local parallelism's slots
        assert 'streamlets_executors{app="metrics-app",streamlet="doubler"} 1.0' in text
        cores = spark.sparkContext.defaultParallelism
        assert f'streamlets_executor_cores{{app="metrics-app",streamlet="doubler"}} {float(cores)}' in text
        assert "process_resident_memory_bytes" in text  # prometheus-client's process metrics


def test_a_running_micro_batch_is_timed_until_it_reports(spark, tmp_path):
    """streamlets_batch_running_seconds: while the batch runs it grows from its first stage's
    submission (the query's job group in Spark's status tracker); its progress report sets it to 0
    and counts its records."""

    def running(port: int) -> tuple[float, str]:
        text = scrape(port)
        found = re.search(r'streamlets_batch_running_seconds\{[^}]*streamlet="slow"\} ([0-9.e+-]+)', text)
        return (float(found.group(1)) if found else -1.0), text

    with served(spark, tmp_path, Slow, "slow", 8) as (_, port):
        seen: list[float] = []
        deadline = time.monotonic() + 120
        text = ""
        while time.monotonic() < deadline:
            value, text = running(port)
            if re.search(r'streamlets_records_in_total\{[^}]*streamlet="slow"\} 8\.0', text):
                break
            seen.append(value)
            time.sleep(0.5)
        running_now, text = running(port)
        assert re.search(r'streamlets_records_in_total\{[^}]*streamlet="slow"\} 8\.0', text), text
        # 8 records x 1.5 s on the local slots: the batch ran for seconds, and scrapes saw its time grow
        grew = [b for a, b in zip(seen, seen[1:]) if b > a > 0]
        assert max(seen) >= 2.0 and grew, seen
        assert running_now == 0.0, text  # reported: nothing runs
