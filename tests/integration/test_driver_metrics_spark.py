"""The driver's /metrics over a real micro-batch: a streamlet started on a StreamletRuntime (local
Spark, the test kit's file transport), its endpoint started as the driver starts it
(streamlets.driver.serve_metrics), and a scrape that counts the batch's records."""

import re
import time
import urllib.request

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


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_metrics_count_a_micro_batch(spark, tmp_path):
    transport = FileTransport(tmp_path / "topics")
    transport.folder("in").mkdir(parents=True)
    rows = [{"id": i, "value": float(i)} for i in range(3)]
    _write_batch(transport.folder("in") / "batch-00000.parquet", "in", [encode(Doubler.inlet.schema, r) for r in rows])
    run = StreamletRunConfig(app_id="metrics-app", streamlet="doubler", class_name=Doubler.class_name(),
                             topics={"in": "in", "out": "out"}, checkpoint_root=str(tmp_path / "checkpoints"),
                             available_now=True)
    port = free_port()
    runtime = StreamletRuntime(spark, run.app_id, None, transport)
    server = None
    try:
        runtime.start_class(Doubler, run)
        server = serve_metrics(runtime, run, {METRICS_PORT_ENV: str(port)})
        assert server is not None
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
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        runtime.stop()
