"""The runner: starts streamlets from their run configs, in every setting.

The sandbox runs several streamlets in one SparkSession through `StreamletRuntime`; a driver pod
runs one with `python -m streamlets.runner --config run.json` (the same code path).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import signal
import sys
import threading
from typing import TYPE_CHECKING

from pydantic import ValidationError

from .context import StreamletContext
from .deadletter import DeadLetterWriter
from .errors import StreamletError
from .monitor import ProgressMonitor
from .runconfig import StreamletRunConfig
from .streamlet import Streamlet
from .transport import FileTransport, KafkaTransport

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class StreamletLoadError(StreamletError):
    """The class named in a blueprint or run config cannot be imported or is not a Streamlet.

    `code` says which (the verifier's problem codes): invalid-class-path, module-not-found,
    class-not-found, ambiguous-class, not-a-streamlet, abstract-streamlet, import-failed,
    invalid-definition (then `problems` lists the class's invalid declarations).
    """

    def __init__(self, message: str, code: str = "import-failed", problems: list | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.problems = problems or []


# A dotted Python path, optionally with ':' before the class (`pkg.module:Class`).
_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


def load_streamlet_class(class_name: str) -> type[Streamlet]:
    """Import `module.Class` (or `module:Class`) and check it is a concrete Streamlet subclass.

    Raises StreamletLoadError (see its codes); exceptions raised by the user's module while it
    is imported propagate unchanged (the caller summarizes them).
    """
    if not isinstance(class_name, str) or not _CLASS_PATH.match(class_name):
        raise StreamletLoadError(f"{class_name!r} is not a class path of the form module.Class "
                                 "(Python identifiers separated by dots)", "invalid-class-path")
    module_name, sep, attr = class_name.replace(":", ".").rpartition(".")
    if not sep or not module_name:
        raise StreamletLoadError(f"{class_name!r} is not a class path of the form module.Class", "invalid-class-path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):  # the module itself, not one it imports
            raise StreamletLoadError(f"cannot import module {module_name!r} for {class_name!r}: {e}",
                                     "module-not-found") from None
        raise
    cls = getattr(module, attr, None)
    if cls is None:
        raise StreamletLoadError(f"module {module_name!r} has no class {attr!r}", "class-not-found")
    return check_streamlet_class(cls, class_name)


def check_streamlet_class(cls: object, class_name: str) -> type[Streamlet]:
    """`cls` if it is a concrete Streamlet subclass, else StreamletLoadError."""
    if not (isinstance(cls, type) and issubclass(cls, Streamlet)):
        raise StreamletLoadError(f"{class_name!r} is not a Streamlet subclass", "not-a-streamlet")
    if cls.is_abstract():
        raise StreamletLoadError(f"{class_name!r} does not implement create_logic(ctx)", "abstract-streamlet")
    return cls


def transport_for(run: StreamletRunConfig):
    if run.bootstrap_servers:
        return KafkaTransport(run.bootstrap_servers, run.kafka_options)
    return FileTransport(run.checkpoint_root.rstrip("/") + "/../_topics")


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
        # Set while reload-config restarts a streamlet: its stopped queries are not an ending.
        self.restarting = threading.Event()

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
        self.monitor.register(run.streamlet, ctx.inlet_reads, ctx.checkpoint_location)
        self.contexts[run.streamlet] = ctx
        ctx.streamlet.create_logic(ctx)
        if not ctx.queries:
            raise StreamletError(f"streamlet {run.streamlet!r} started no query: create_logic must call write_stream or start_query")
        return ctx

    def queries(self):
        return [q for ctx in self.contexts.values() for q in ctx.queries]

    # --- the control stream (streamlets.control) ----------------------------------------------

    def control(self, streamlet: str, command: str, args: dict[str, str], command_id: str):
        """Run a control command on one of this runtime's streamlets; returns a control.Outcome,
        raises with a message the result carries when the command fails."""
        from .control import Outcome
        from .savepoint import committed_batches, prune_savepoints, query_folders, take_savepoint
        from .storage import storage_for

        ctx = self.contexts[streamlet]
        run = ctx.run
        storage = storage_for(run.checkpoint_root, ctx.spark)

        def batches() -> dict[str, int]:
            out = {}
            for q in query_folders(storage, run.checkpoint_root):
                done = committed_batches(storage, run.checkpoint_location(q))
                if done:
                    out[q] = done[-1]
            return out

        if command == "ping":
            return Outcome("alive", batch_ids=batches())
        if command == "savepoint":
            sp = take_savepoint(run.checkpoint_root, run.savepoints(), app_id=run.app_id, streamlet=streamlet,
                                cls=type(ctx.streamlet), reason=args.get("reason", "control stream"), spark=ctx.spark)
            if run.savepoint_max_count or run.savepoint_max_age_seconds:
                prune_savepoints(run.savepoints(), run.app_id, streamlet, keep=run.savepoint_max_count,
                                 max_age_seconds=run.savepoint_max_age_seconds, spark=ctx.spark)
            return Outcome(f"savepoint {sp['id']}", sp["path"],
                           {q: e["batch_id"] for q, e in sp["queries"].items() if e["batch_id"] is not None})
        if command == "dump-state":
            return self._dump_state(ctx, args.get("format", "jsonl"), f"{run.state_dumps().rstrip('/')}/{command_id}/{streamlet}")
        if command == "reload-config":
            return self._reload(streamlet, args)
        if command == "stop":
            for q in ctx.queries:
                q.stop()
            return Outcome(f"stopped {len(ctx.queries)} query(ies)", batch_ids=batches())
        raise StreamletError(f"unknown command {command!r}")

    def _dump_state(self, ctx: StreamletContext, fmt: str, location: str):
        from .control import Outcome
        from .savepoint import query_folders
        from .state_export import export_state, stateful_operators
        from .storage import storage_for

        run = ctx.run
        dumped = {}
        for q in query_folders(storage_for(run.checkpoint_root, ctx.spark), run.checkpoint_root):
            if stateful_operators(ctx.spark, run.checkpoint_location(q)):
                manifest = export_state(ctx.spark, run.checkpoint_location(q), f"{location}/{q}", fmt)
                dumped[q] = manifest["batch_id"]
        if not dumped:
            raise StreamletError(f"streamlet {run.streamlet!r} holds no state (no stateful query has committed a batch)")
        return Outcome(f"state of {len(dumped)} query(ies) as {fmt}", location, dumped)

    def _reload(self, streamlet: str, values: dict[str, str]):
        from .config import StreamletConfig
        from .control import Outcome

        ctx = self.contexts[streamlet]
        cls = type(ctx.streamlet)
        merged = {**ctx.run.config_parameters, **values}
        StreamletConfig(streamlet, cls.config_parameters(), merged)  # raises before anything stops
        self.restarting.set()
        try:
            for q in ctx.queries:
                q.stop()
            new = self.start_class(cls, ctx.run.model_copy(update={"config_parameters": merged}))
        finally:
            self.restarting.clear()
        return Outcome(f"restarted {len(new.queries)} query(ies) with {', '.join(sorted(values)) or 'the same config'}")

    def failed(self) -> list[tuple[str, str]]:
        """(query name, error) of queries that stopped with an exception."""
        out = []
        for q in self.queries():
            if not q.isActive and q.exception() is not None:
                out.append((q.name, str(q.exception())))
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


def prepare_checkpoints(spark: "SparkSession", cls: type[Streamlet], run: StreamletRunConfig) -> list[str]:
    """Before a driver starts its streamlet: act on the run config's upgrade settings, once each.
    Returns what was done (for the log).

    - `reset_state_token` differs from `<checkpoint_root>.state-token`: the checkpoints are moved
      to `<checkpoint_root>.reset-<token>` (upgrade mode stateless);
    - `restore_from` differs from `<checkpoint_root>.restored-from`: the savepoint is checked
      against this code (streamlets.restore) and copied over the checkpoints;
    - `state_partitions` differs from what the checkpoints pinned: they are repartitioned
      (streamlets.repartition).

    Raises StreamletError (the driver exits 1, the SparkApplication fails) if the savepoint
    cannot be read or restored across the change, or the state cannot be repartitioned.
    """
    from .restore import check_restore, restore_savepoint
    from .savepoint import SavepointError, read_savepoint
    from .storage import free_name, storage_for

    storage = storage_for(run.checkpoint_root, spark)
    root = run.checkpoint_root.rstrip("/")
    done = []

    def recorded(path: str) -> str | None:
        return storage.read_text(path).strip() if storage.exists(path) else None

    if run.reset_state_token and recorded(f"{root}.state-token") != run.reset_state_token:
        if storage.exists(root):
            aside = free_name(storage, f"{root}.reset-{run.reset_state_token}")
            try:
                storage.rename(root, aside)
            except OSError as e:
                raise StreamletError(f"cannot move the checkpoints {root} aside (upgrade mode stateless): {e}") from None
            done.append(f"checkpoints moved to {aside} (upgrade mode stateless)")
        storage.write_text(f"{root}.state-token", run.reset_state_token)
    if run.restore_from and recorded(f"{root}.restored-from") != run.restore_from:
        try:
            sp = read_savepoint(run.restore_from, spark)
            check = check_restore(spark, sp, cls, run)
            if not check.ok:
                raise StreamletError(f"cannot start from savepoint {sp['id']}: " + "; ".join(check.problems))
            moved = restore_savepoint(sp, run, branch=sp["app_id"] != run.app_id, replace=True, spark=spark)
        except (SavepointError, OSError) as e:
            raise StreamletError(f"cannot restore {run.restore_from}: {e}") from None
        storage.write_text(f"{root}.restored-from", run.restore_from)
        done.append(f"restored from {run.restore_from}" + (f" (previous checkpoints in {moved})" if moved else ""))
    if run.state_partitions:
        from .repartition import RepartitionError, repartition_streamlet

        try:
            done += repartition_streamlet(spark, run)
        except (RepartitionError, OSError) as e:  # RepartitionError also carries Spark's failures
            raise StreamletError(f"cannot repartition the state: {e}") from None
    return done


def start_control_listener(runtime: StreamletRuntime, run: StreamletRunConfig):
    """The control-stream listener of a runtime on Kafka (None with the file transport)."""
    if not run.bootstrap_servers:
        return None
    from .control import ControlListener

    listener = ControlListener(run.bootstrap_servers, run.app_id, lambda: list(runtime.contexts), runtime.control)
    listener.start()
    return listener


def main(argv: list[str] | None = None) -> int:
    """Driver entry point: `python -m streamlets.runner --config run.json`."""
    from .spark_session import build_spark_session

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
    while not stopping.is_set() and (runtime.restarting.is_set() or all(q.isActive for q in runtime.queries())):
        stopping.wait(1)
    failures = runtime.failed()
    if listener is not None:
        listener.stop()
    runtime.stop()
    for name, error in failures:
        print(f"error: query {name} failed: {error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
