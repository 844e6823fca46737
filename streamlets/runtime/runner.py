"""The runner: starts streamlets from their run configs, in every setting.

The sandbox runs several streamlets in one SparkSession through `StreamletRuntime`; a driver pod
runs one with `python -m streamlets.runner --config run.json` (the same code path).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from .checkpoint import committed_batches, query_folders
from .context import StreamletContext
from .control import Outcome
from .deadletter import DeadLetterWriter
from ..config import StreamletConfig
from ..errors import StreamletError
from ..loading import StreamletLoadError, check_streamlet_class, load_streamlet_class  # noqa: F401 (re-exported)
from .monitor import ProgressMonitor
from .registry import command, handler
from .storage import storage_for
from .runconfig import StreamletRunConfig
from ..streamlet import Streamlet
from .transport import FileTransport, KafkaTransport

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def transport_for(run: StreamletRunConfig):
    """Kafka at the run's bootstrap servers; without them the file transport, in `topics` of the
    state folder around the run's checkpoints (streamlets.runtime.layout)."""
    if run.bootstrap_servers:
        return KafkaTransport(run.bootstrap_servers, run.kafka_options, security=run.kafka_security)
    return FileTransport(run.layout().topics)


class StreamletRuntime:
    """Streamlets running in one SparkSession, with one progress monitor and dead-letter writer.

    `start(run)` instantiates the class, builds its context and calls create_logic; `stop()`
    stops every query, then waits for pending dead-letter scans.
    """

    def __init__(self, spark: "SparkSession", app_id: str, dead_letter_topic: str | None, transport) -> None:
        self.spark = spark
        self.transport = transport
        self.dead_letters = DeadLetterWriter(spark, transport, dead_letter_topic, app_id)
        self.monitor = ProgressMonitor(self.dead_letters)
        self.contexts: dict[str, StreamletContext] = {}
        # Set while queries are stopped on purpose (stops_expected): not an ending for the driver.
        self.restarting = threading.Event()
        # Failures unhandled_failures took (a restart of the streamlet).
        self.handled_failures = 0
        self.restarts: dict[str, int] = {}  # streamlet -> restarts (restart(): supervisor, quarantine)
        from .quarantine import Quarantine

        self.quarantine = Quarantine(self)
        # query name -> Kafka partitions (= cores held) of this runtime's real-time queries, and
        # the lock under which a starting query checks the free cores and takes its share
        self.realtime_tasks: dict[str, int] = {}
        self.realtime_lock = threading.Lock()

    def start(self, run: StreamletRunConfig) -> StreamletContext:
        """Import the run config's class and start it (see start_class)."""
        return self.start_class(load_streamlet_class(run.class_name), run)

    def start_class(self, cls: type[Streamlet], run: StreamletRunConfig) -> StreamletContext:
        """Instantiate `cls`, build its context and run create_logic, which starts its queries.

        Each streamlet gets its own session of the shared SparkContext (SparkSession.newSession):
        its own SQL settings (`spark.sql.*` from the run config) and temporary views.
        """
        session = self.spark.newSession()
        for key, value in run.spark_conf.items():
            if key.startswith("spark.sql."):
                session.conf.set(key, value)
            else:
                log.warning("streamlet %s: %s applies per process, not per streamlet; ignored in a shared session", run.streamlet, key)
        session.streams.addListener(self.monitor)
        ctx = StreamletContext(session, cls(), run, self.transport, self.dead_letters)
        ctx.realtime_tasks = self.realtime_tasks
        ctx.realtime_lock = self.realtime_lock
        ctx.seed_offsets = lambda query, offsets: self.monitor.seed_end_offsets(run.streamlet, query, offsets)
        self.monitor.register(run.streamlet, ctx.inlet_reads, ctx.checkpoint_location)
        self.contexts[run.streamlet] = ctx
        ctx.check_progress_tracking()  # before any query starts
        ctx.streamlet.create_logic(ctx)
        if not ctx.queries:
            raise StreamletError(f"streamlet {run.streamlet!r} started no query: create_logic must call write_stream or start_query")
        return ctx

    def start_all(self, starts: Sequence[tuple[type[Streamlet], StreamletRunConfig]]) -> list[StreamletContext]:
        """Start several streamlets at once, each with start_class in a thread of its own; returns
        their contexts in the order of `starts` (also the order of `contexts` and `queries()`).

        A streamlet's start waits mostly on the JVM and the broker (its session, its checkpoint,
        its exactly-once producer's transactions, each query's first plan), so streamlets started
        together take about as long as the slowest, not the sum. It is safe because streamlets
        share nothing they change while starting: each has its own session (SQL settings, scheduler
        pool: py4j's pinned threads give each thread its own JVM thread-local properties), their
        topics exist before, and real-time queries take their cores under `realtime_lock`.

        Every start runs to its end before anything is raised, so that a stop finds every query that
        did start; then the error of the first failed streamlet in `starts` order is raised
        (StreamletError, or whatever its create_logic raised)."""
        from concurrent.futures import ThreadPoolExecutor

        if len(starts) <= 1:
            return [self.start_class(cls, run) for cls, run in starts]
        with ThreadPoolExecutor(len(starts), thread_name_prefix="streamlet-start") as pool:
            futures = [pool.submit(self.start_class, cls, run) for cls, run in starts]
        names = [run.streamlet for _, run in starts]
        self.contexts = {**{n: self.contexts[n] for n in names if n in self.contexts},
                         **{n: c for n, c in self.contexts.items() if n not in names}}
        for future in futures:
            error = future.exception()
            if error is not None:
                raise error
        return [future.result() for future in futures]

    def queries(self):
        """Every streaming query (pyspark StreamingQuery) the runtime's streamlets started, in the order of
        their streamlets."""
        return [q for ctx in self.contexts.values() for q in ctx.queries]

    # --- the control stream (streamlets.runtime.control) ---------------------------------------

    def control(self, streamlet: str, command: str, args: dict[str, str], command_id: str):
        """Run a control command on one of this runtime's streamlets with its registered handler
        (streamlets.runtime.registry); returns a control.Outcome, raises with a message the
        result carries when the command fails (StreamletError for an unknown command)."""
        return handler(command)(self, streamlet, args, command_id)

    def failed(self) -> list[tuple[str, str]]:
        """(query name, error) of queries that stopped with an exception."""
        out = []
        for q in self.queries():
            if not q.isActive and q.exception() is not None:
                out.append((q.name, str(q.exception())))
        return out

    def restart(self, streamlet: str) -> StreamletContext:
        """Stop a streamlet's queries that still run and start it again (its class, run config and
        checkpoints: a failed batch is replayed from the offset log)."""
        ctx = self.contexts[streamlet]
        self.restarts[streamlet] = self.restarts.get(streamlet, 0) + 1
        with self.stops_expected():
            self.stop_queries(streamlet)
            return self.start_class(type(ctx.streamlet), ctx.run)

    @contextlib.contextmanager
    def stops_expected(self) -> Iterator[None]:
        """While inside, queries stopped on purpose (a restart, reload-config, stop-with-savepoint)
        are not an ending: the driver's loop (streamlets.driver) leaves them alone."""
        self.restarting.set()
        try:
            yield
        finally:
            self.restarting.clear()

    def stop_queries(self, streamlet: str) -> int:
        """Stop a streamlet's queries (StreamingQuery.stop: a running micro-batch is cancelled and
        runs again at the next start, from the offset log). Returns how many queries it has."""
        ctx = self.contexts[streamlet]
        for q in ctx.queries:
            try:
                q.stop()
            except Exception as e:  # a failed query may refuse to stop
                log.debug("stopping %s: %s", q.name, e)
        return len(ctx.queries)

    def unhandled_failures(self, skip: set[str] | frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """`failed()` after the runtime took the failures it could, restarting their streamlets: for
        a streamlet with on-failure quarantine, poison records (streamlets.runtime.quarantine). Each
        one taken adds 1 to `handled_failures`."""
        out = []
        handled: set[str] = set()
        for name, error in self.failed():
            streamlet = name.split(".", 1)[0]
            if streamlet in handled or streamlet in skip:
                continue
            if self.quarantine.handle(name, error):
                handled.add(streamlet)
                self.handled_failures += 1
            else:
                out.append((name, error))
        return out

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every query, wait for their last progress reports, finish pending dead-letter
        scans, close the writer. `timeout` bounds each wait (seconds)."""
        for q in self.queries():
            try:
                q.stop()
            except Exception as e:  # a failed query may refuse to stop; nothing to clean then
                log.debug("stopping %s: %s", q.name, e)
        ids = [str(q.id) for q in self.queries()]
        if not self.monitor.wait_terminated(ids, timeout):
            log.warning("some queries' last progress reports did not arrive within %.0f s", timeout)
        self.dead_letters.drain(timeout)
        self.dead_letters.close()
        for ctx in self.contexts.values():
            try:
                ctx.spark.streams.removeListener(self.monitor)
            except Exception:  # the session may already be gone at shutdown
                pass


def start_control_listener(runtime: StreamletRuntime, run: StreamletRunConfig):
    """The control-stream listener of a runtime on Kafka (None with the file transport)."""
    kafka = run.kafka()
    if kafka is None:
        return None
    from .control import ControlListener

    listener = ControlListener(kafka, run.app_id, lambda: list(runtime.contexts), runtime.control)
    listener.start()
    return listener


# --- the runtime's own control commands (the state commands register in streamlets.state) ------

def committed_batch_ids(ctx: StreamletContext) -> dict[str, int]:
    """The last committed batch id (`commits/N` in its checkpoint) of each of a streamlet's
    queries that has committed one."""
    run = ctx.run
    storage = storage_for(run.checkpoint_root, ctx.spark)
    out = {}
    for q in query_folders(storage, run.checkpoint_root):
        done = committed_batches(storage, run.checkpoint_location(q))
        if done:
            out[q] = done[-1]
    return out


@command("ping")
def _ping(runtime: StreamletRuntime, streamlet: str, args: dict[str, str], command_id: str) -> Outcome:
    return Outcome("alive", batch_ids=committed_batch_ids(runtime.contexts[streamlet]))


@command("stop")
def _stop(runtime: StreamletRuntime, streamlet: str, args: dict[str, str], command_id: str) -> Outcome:
    stopped = runtime.stop_queries(streamlet)
    return Outcome(f"stopped {stopped} query(ies)", batch_ids=committed_batch_ids(runtime.contexts[streamlet]))


@command("scale")
def _scale(runtime: StreamletRuntime, streamlet: str, args: dict[str, str], command_id: str) -> Outcome:
    """`args.executors`: the number of executors the streamlet's driver runs from now on, changed in
    place (streamlets.runtime.executors.ExecutorControl.set_total; `args.timeout`: seconds to wait
    for busy executors to go idle on a scale-down, default 60)."""
    from .executors import ExecutorControl

    text = (args.get("executors") or "").strip()
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"scale needs args.executors, a whole number of 1 or more (got {text or 'none'!r})")
    control = ExecutorControl(runtime.contexts[streamlet].spark)
    return Outcome(control.set_total(int(text), timeout=float(args.get("timeout") or 60)))


@command("reload-config")
def _reload(runtime: StreamletRuntime, streamlet: str, values: dict[str, str], command_id: str) -> Outcome:
    """New config-parameter values, checked against the declarations before anything stops; the
    streamlet's queries stop and start again with them, from their checkpoints."""
    ctx = runtime.contexts[streamlet]
    cls = type(ctx.streamlet)
    merged = {**ctx.run.config_parameters, **values}
    StreamletConfig(streamlet, cls.config_parameters(), merged)  # raises before anything stops
    with runtime.stops_expected():
        for q in ctx.queries:
            q.stop()
        new = runtime.start_class(cls, ctx.run.model_copy(update={"config_parameters": merged}))
    return Outcome(f"restarted {len(new.queries)} query(ies) with {', '.join(sorted(values)) or 'the same config'}")
