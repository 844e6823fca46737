"""The driver entry point: `python -m streamlets.runner --config run.json` (what a
SparkApplication's driver runs; streamlets.runner forwards here).

Composes the layers: reads the run config, builds the SparkSession, prepares the checkpoints
(streamlets.state.prepare), starts the streamlet on a StreamletRuntime with its control listener
and its Prometheus endpoint (serve_metrics), and waits. Exit status: 0 when every query ended
cleanly or on SIGTERM/SIGINT, 1 when a query failed or the streamlet could not start, 2 for an
unreadable run config.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import ValidationError

from .errors import StreamletError
from .runtime.failures import user_exception
from .loading import load_streamlet_class
from .runtime.runconfig import METRICS_PATH, METRICS_PORT_ENV, StreamletRunConfig, metrics_port
from .runtime.runner import StreamletRuntime, start_control_listener, transport_for
from .runtime.spark_session import build_spark_session
from .state.prepare import prepare_checkpoints

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger("streamlets.runner")

# A driver keeps Spark's UI, which the session's defaults turn off for the sandbox and the test kit
# (streamlets.runtime.spark_session.DEFAULT_CONF): Spark's PrometheusServlet endpoints
# (/metrics/prometheus, /metrics/executors/prometheus) are served on the UI's port. A streamlet's
# own sparkConf may still turn it off.
DRIVER_CONF = {"spark.ui.enabled": "true"}


def serve_metrics(runtime: StreamletRuntime, run: StreamletRunConfig,
                  env: Mapping[str, str] | None = None) -> "WSGIServer | None":
    """Serve the runtime's Prometheus metrics (streamlets.runtime.metrics) at /metrics on
    0.0.0.0:$STREAMLETS_METRICS_PORT (default 9464; 0 or `off`: no endpoint). Returns the HTTP
    server (its shutdown() stops it), or None. Never raises: a port in use, a bad setting or a
    missing prometheus_client costs one warning line, and the streamlet runs without the endpoint."""
    try:
        port = metrics_port(env)
        if port is None:
            log.info("metrics: not served (%s is off)", METRICS_PORT_ENV)
            return None
        from prometheus_client import start_http_server

        from .runtime.metrics import runtime_registry

        registry = runtime_registry(runtime, run.app_id, run.kafka())
        server, _ = start_http_server(port, addr="0.0.0.0", registry=registry)
    except Exception as e:  # the metrics never stop the streamlet
        log.warning("metrics: not served: %s: %s", type(e).__name__, e)
        return None
    log.info("metrics: http://0.0.0.0:%d%s", server.server_port, METRICS_PATH)
    return server


def main(argv: list[str] | None = None) -> int:
    """Driver entry point: `python -m streamlets.runner --config run.json`."""
    parser = argparse.ArgumentParser(prog="streamlets.runner", description=__doc__)
    parser.add_argument("--config", required=True, help="run config JSON (StreamletRunConfig)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        run = StreamletRunConfig.read(args.config)
    except ValidationError as e:  # one line: where in the file, what is wrong
        detail = "; ".join(f"{'.'.join(map(str, err['loc'])) + ': ' if err['loc'] else ''}{err['msg']}" for err in e.errors())
        print(f"error: cannot read run config {args.config}: {detail}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"error: cannot read run config {args.config}: {e}", file=sys.stderr)
        return 2
    # In a driver of its own, every setting applies to the process.
    spark = build_spark_session(f"{run.app_id}.{run.streamlet}", {**DRIVER_CONF, **run.spark_conf})
    runtime = StreamletRuntime(spark, run.app_id, run.dead_letter_topic, transport_for(run))
    stopping = threading.Event()

    def on_signal(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cls = load_streamlet_class(run.class_name)
        for line in prepare_checkpoints(spark, cls, run):
            log.info("%s: %s", run.streamlet, line)
        runtime.start_class(cls, run)
    except StreamletError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    listener = start_control_listener(runtime, run)
    metrics = serve_metrics(runtime, run)
    failures: list[tuple[str, str]] = []
    while not stopping.is_set():
        if not runtime.restarting.is_set() and not all(q.isActive for q in runtime.queries()):
            # failures the runtime takes restart the streamlet (streamlets.runtime.quarantine)
            handled = runtime.handled_failures
            failures = runtime.unhandled_failures()
            if failures or runtime.handled_failures == handled:
                break
        stopping.wait(1)
    failures = failures or runtime.failed()
    if listener is not None:
        listener.stop()
    if metrics is not None:
        metrics.shutdown()
        metrics.server_close()
    runtime.stop()
    for name, error in failures:
        print(f"error: query {name} failed: {user_exception(error)}", file=sys.stderr)
        log.error("query %s failed: %s", name, error)
    return 1 if failures else 0
