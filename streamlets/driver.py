"""The driver entry point: `python -m streamlets.runner --config run.json` (what a
SparkApplication's driver runs; streamlets.runner forwards here).

Composes the layers: reads the run config, builds the SparkSession, prepares the checkpoints
(streamlets.state.prepare), starts the streamlet on a StreamletRuntime with its control listener,
and waits. Exit status: 0 when every query ended cleanly or on SIGTERM/SIGINT, 1 when a query
failed or the streamlet could not start, 2 for an unreadable run config.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from pydantic import ValidationError

from .errors import StreamletError
from .runtime.quarantine import user_exception
from .loading import load_streamlet_class
from .runtime.runconfig import StreamletRunConfig
from .runtime.runner import StreamletRuntime, start_control_listener, transport_for
from .runtime.spark_session import build_spark_session
from .state.prepare import prepare_checkpoints

log = logging.getLogger("streamlets.runner")


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
    spark = build_spark_session(f"{run.app_id}.{run.streamlet}", run.spark_conf)
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
    failures: list[tuple[str, str]] = []
    while not stopping.is_set():
        if not runtime.restarting.is_set() and not all(q.isActive for q in runtime.queries()):
            # failures the runtime takes restart the streamlet (streamlets.runtime.recovery, .quarantine)
            handled = runtime.handled_failures
            failures = runtime.unhandled_failures()
            if failures or runtime.handled_failures == handled:
                break
        stopping.wait(1)
    failures = failures or runtime.failed()
    if listener is not None:
        listener.stop()
    runtime.stop()
    for name, error in failures:
        print(f"error: query {name} failed: {user_exception(error)}", file=sys.stderr)
        log.error("query %s failed: %s", name, error)
    return 1 if failures else 0
