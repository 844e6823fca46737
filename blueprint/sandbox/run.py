"""`blueprint run`: the whole application on one machine, with a real Kafka broker and local Spark.

Process model: one Python process, one Spark driver JVM. Every streamlet runs in its own
SparkSession (SparkSession.newSession: own SQL settings, FAIR scheduler pool, log file) of one
shared SparkContext, so the Kafka and Avro jars load once and a laptop's cores are shared
between streamlets instead of split between several JVMs. A cluster runs each streamlet in a
driver of its own, through the same runner code.

State lives under the state folder (default `.streamlets/<app id>` in the current folder), laid
out as streamlets.runtime.layout says: the embedded broker's data (topics survive a restart),
checkpoints, savepoints, dumps, volume mounts not mapped in the run config, and logs.
A second run on the same folder resumes every query from its checkpoint.

With a `storage.checkpoints` root in the run config (an object store, `s3a://bucket/prefix`:
streamlets.runtime.object_store), the durable state goes there instead, in the same layout:
checkpoints (with the quarantine and dead-letter ledgers), savepoints and dumps. The state folder
keeps what is this machine's: the broker's data, logs, the lock, unmapped volume mounts.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console
from rich.live import Live

from blueprint.configcheck import Entry
from blueprint.model import Blueprint
from blueprint.scopes import EMBEDDED_BROKER, KAFKA
from blueprint.topics import application_topics, dead_letter_topic, registry_ports, topic_bindings
from streamlets.config import StreamletConfig
from streamlets.errors import StreamletError
from streamlets.kafka_security import KafkaConnection, KafkaSecurity
from streamlets.schema_registry import SchemaRegistry
from streamlets.runtime.layout import StateLayout
from streamlets.runtime.object_store import ObjectStore
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import start_control_listener

from .diskspace import DiskWatch
from .localconfig import (LocalConfigError, StreamletSettings, load_settings, load_storage, settings_from_entries,
                          storage_from_entries)
from .statelock import StateLock
from .view import TopicRow, plain_line, render
from ..errors import BlueprintError

log = logging.getLogger("streamlets.sandbox")

BROKERLESS_STOP = 5.0  # seconds a query's stop may take once the embedded broker is gone (Sandbox._stop_without_broker)


@dataclass
class SandboxOptions:
    """Options of `blueprint run` (see the CLI for their meaning)."""

    state_dir: Path | None = None
    config_file: Path | None = None
    overrides: list[str] = field(default_factory=list)
    # the config file's entries, then the overrides', as `blueprint run` checked them (blueprint.configcheck);
    # None: config_file and overrides are read here
    entries: list[Entry] | None = None
    kafka: str | None = None
    # the embedded broker's client listener (blueprint.sandbox.kafka_broker.SECURITY_MODES);
    # None: kafka.embedded-broker.security of the config, else none
    broker_security: str | None = None
    exit_when_done: bool = False
    idle_seconds: float = 5.0  # quiet time (no input anywhere) that counts as "all input processed"
    trigger: str | None = "1 second"
    master: str | None = None
    timeout: float | None = None  # seconds; stop after this long even if not done
    restores: dict[str, str] = field(default_factory=dict)  # streamlet -> savepoint path or id
    savepoints: str | None = None  # savepoint root for ids [default: <state dir>/savepoints]
    branch: bool = False  # restore with new query ids (always so for another application's savepoint)
    state_partitions: dict[str, int] = field(default_factory=dict)  # streamlet -> state partitions (repartition)
    max_restarts: int = 3  # broker and streamlet restarts (each) within 10 minutes before the run stops (supervisor.py)
    restart_backoff: float = 2.0  # seconds before a failed streamlet's first restart, doubled per try
    ui_port: int | None = None  # serve the operations API, /metrics and the web view (blueprint.ops); 0: a free port
    ui_host: str = "127.0.0.1"
    fresh: bool = False  # --fresh: the caller cleared the state folder; the object store's checkpoints go too


class SandboxError(BlueprintError):
    """The application cannot start: a message naming what and where."""


def run_config_for(bp: Blueprint, name: str, classes: dict[str, type], settings: StreamletSettings, *, bootstrap: str,
                   state_dir: Path, trigger: str | None, durable: StateLayout | None = None) -> StreamletRunConfig:
    """The run config of one streamlet instance in the sandbox, its state in `state_dir`
    (streamlets.runtime.layout), its checkpoints, savepoints and dumps in `durable` (an object
    store's root: ObjectStore.layout) if given; checks its config and mounts."""
    cls = classes[name]
    state = StateLayout(str(state_dir))
    durable = durable or state
    topics, writers = topic_bindings(bp, name, classes)
    try:
        StreamletConfig(name, cls.config_parameters(), settings.config_parameters)
    except StreamletError as e:
        raise SandboxError(str(e)) from None
    declared = {m.name for m in cls.volume_mounts()}
    unknown = sorted(set(settings.volume_mounts) - declared)
    if unknown:
        raise SandboxError(f"streamlet {name!r} declares no volume mount(s) {', '.join(unknown)} "
                           f"(declared: {', '.join(sorted(declared)) or 'none'})")
    mounts = {m: settings.volume_mounts.get(m) or state.volume(name, m) for m in declared}
    read_only = {m.name for m in cls.volume_mounts() if m.read_only}
    for mount, folder in mounts.items():
        if mount not in read_only:
            Path(folder).mkdir(parents=True, exist_ok=True)
        elif not Path(folder).is_dir():
            # A source the sandbox created would be an empty input and a green run that read nothing.
            what = "is no folder" if Path(folder).exists() else "does not exist"
            raise SandboxError(f"streamlet {name!r}: volume mount {mount!r} (ReadOnlyMany: its input) maps to {folder}, "
                               f"which {what}; map it to the folder holding the input in the run config "
                               f"(streamlets.{name}.volume-mounts.{mount} = <folder>, relative to the config file) "
                               f"or create {folder}")
    return StreamletRunConfig(
        app_id=bp.app_id,
        streamlet=name,
        class_name=cls.class_name(),
        topics=topics,
        writer_schemas=writers,
        registry_ports=registry_ports(bp, name),
        bootstrap_servers=bootstrap,
        config_parameters=settings.config_parameters,
        volume_mounts=mounts,
        checkpoint_root=durable.checkpoints(bp.app_id, name),
        savepoint_root=durable.savepoints,
        state_dump_root=durable.dumps,
        dead_letter_topic=dead_letter_topic(bp),
        trigger_interval=trigger,
        spark_conf=settings.spark,
        **settings.settings,  # streamlets.settings: unset ones take the run config's defaults
    )


def empty_inputs(runs: list[StreamletRunConfig], classes: dict[str, type]) -> list[str]:
    """One line per ReadOnlyMany volume mount whose folder holds no file yet (the streamlet has no
    input until files arrive there), for the sandbox's warnings."""
    lines = []
    for run in runs:
        for mount in classes[run.streamlet].volume_mounts():
            folder = Path(run.volume_mounts[mount.name])
            # Spark's file sources skip names starting with `.` or `_` (InMemoryFileIndex)
            if mount.read_only and not any(
                    p.is_file() and not p.name.startswith((".", "_")) for p in folder.rglob("*")):
                lines.append(f"streamlet {run.streamlet!r}: volume mount {mount.name!r} ({folder}) is empty: "
                             f"it reads nothing until files arrive there")
    return lines


class Sandbox:
    """Runs a verified blueprint until Ctrl-C, SIGTERM, a failed query, a timeout, or (with
    `exit_when_done`) until every streamlet has processed all its input."""

    def __init__(self, bp: Blueprint, classes: dict[str, type], options: SandboxOptions, console: Console | None = None) -> None:
        self.bp = bp
        self.classes = classes
        self.options = options
        # Off a terminal (CI logs) a narrow default width would squeeze the final tables.
        # Piped: tables 140 columns wide, and each progress line one line however long (soft wrap).
        terminal = Console().is_terminal
        self.console = console or Console(width=None if terminal else 140, soft_wrap=not terminal)
        self.state_dir = (Path(options.state_dir).resolve() if options.state_dir
                          else Path(StateLayout.sandbox_default(bp.app_id).root))
        self.layout = StateLayout(str(self.state_dir))  # where everything goes in it
        self.object_store: ObjectStore | None = None  # the run config's storage.*, read when the run starts
        self.durable = self.layout  # checkpoints, savepoints, dumps: the state folder's or the object store's
        self.lock = StateLock(self.state_dir, "blueprint run")  # one owner per state folder
        self.stop_requested = threading.Event()
        self.broker = None
        self.spark = None
        self.runtime = None
        self._watcher = None
        self._listener = None
        self.ops_server = None  # blueprint.ops.server.OpsServer with --ui
        self._ops_backend = None  # its SandboxBackend (samples topic rates until stopped)
        self.metrics = None  # the runtime's Prometheus registry (streamlets.runtime.metrics)
        self.collector = None  # its RuntimeCollector: figures and inlet lag
        self._report_from: float | None = None  # set when the run ends normally: the final tables follow the stop
        self._last_offsets: dict[str, int] = {}
        self._kafka: tuple[KafkaSecurity | None, str] = (None, "none")  # _kafka_settings()
        self._last_look = time.time()

    # --- set-up ---------------------------------------------------------------------------

    def _logging(self) -> None:
        Path(self.layout.logs).mkdir(parents=True, exist_ok=True)
        fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
        root = logging.getLogger("streamlets")
        root.setLevel(logging.INFO)
        root.propagate = False
        for h in list(root.handlers):
            root.removeHandler(h)
        sandbox = logging.FileHandler(self.layout.log("sandbox"))
        sandbox.setFormatter(fmt)
        root.addHandler(sandbox)
        # py4j logs a Python callback's exception (a foreachBatch function failing while the run
        # stops) with its traceback: to the sandbox's log, not the terminal. The query's failure
        # itself is reported by the supervisor in one line.
        py4j = logging.getLogger("py4j")
        py4j.propagate = False
        for h in list(py4j.handlers):
            py4j.removeHandler(h)
        py4j.addHandler(sandbox)
        for name in self.bp.streamlets:
            lg = logging.getLogger(f"streamlets.{name}")
            for h in list(lg.handlers):
                lg.removeHandler(h)
            h = logging.FileHandler(self.layout.log(name))
            h.setFormatter(fmt)
            lg.addHandler(h)

    def _schema_registry(self) -> SchemaRegistry | None:
        """The schema registry of the config (schema-registry.*), checked reachable with its
        credentials when a topic of the blueprint carries its wire format; SandboxError naming the
        registry and the cause (nothing has started), or a registry topic without one configured."""
        from blueprint.configcheck import config_entries, schema_registry

        from streamlets.schema_registry import SchemaRegistryError, check

        entries = self.options.entries
        if entries is None:
            entries = config_entries([self.options.config_file] if self.options.config_file else [],
                                     self.options.overrides)[0]
        try:
            registry = schema_registry(entries)
        except ValueError as err:
            raise SandboxError(str(err)) from None
        topics = sorted(t.id for t in self.bp.topics.values() if t.schema_registry)
        if topics and registry is None:
            raise SandboxError(f"topic(s) {', '.join(topics)} of {self.bp.path.name} carry the schema registry's wire "
                               "format (schema-registry: true), but no schema registry is configured: set "
                               "schema-registry.url in the config, or give schema-registry.url=URL after the blueprint")
        if topics and registry is not None:
            try:
                check(registry)
            except SchemaRegistryError as err:
                raise SandboxError(str(err)) from None
        return registry

    def _kafka_settings(self) -> tuple[KafkaSecurity | None, str]:
        """The external broker's security (kafka.security.*; None: PLAINTEXT) and the embedded
        broker's mode (--broker-security, else kafka.embedded-broker.security, else none).
        SandboxError for settings that contradict each other or --kafka."""
        from blueprint.configcheck import config_entries, kafka_security

        entries = self.options.entries
        if entries is None:  # checked by load_settings already
            entries = config_entries([self.options.config_file] if self.options.config_file else [],
                                     self.options.overrides)[0]
        embedded = self.options.broker_security
        for e in entries:
            if e.parts == (KAFKA, EMBEDDED_BROKER, "security") and self.options.broker_security is None:
                embedded = str(e.value)
        try:
            security = kafka_security(entries)
        except ValueError as err:
            raise SandboxError(str(err)) from None
        if self.options.kafka and embedded not in (None, "none"):
            raise SandboxError(f"broker security {embedded!r} is the embedded broker's, and --kafka names an external "
                               "one: say how to reach it with kafka.security.* instead")
        if not self.options.kafka and security is not None:
            raise SandboxError("kafka.security.* says how to reach an external broker (--kafka); the embedded broker "
                               "is secured with --broker-security or kafka.embedded-broker.security and gives its "
                               "clients their settings itself")
        return security, embedded or "none"

    def _start_kafka_and_spark(self) -> KafkaConnection:
        """Start the Kafka broker and Spark at once (each takes seconds, mostly a JVM starting);
        returns the Kafka connection (bootstrap servers and security), with the application's
        topics created, and sets self.broker and self.spark. An external broker (--kafka) with
        kafka.security.* is checked first (KafkaConnection.check: reachable, the credentials and
        certificates accepted), before Spark starts: SandboxError naming the broker and the cause. The
        embedded broker starts in this thread, as its JVM ends with the thread that started it
        (PR_SET_PDEATHSIG, blueprint.sandbox.kafka_broker); Spark in another, which this one
        awaits whatever becomes of the broker, so that _shutdown finds both. Raises the broker's
        error first, else Spark's."""
        from concurrent.futures import ThreadPoolExecutor

        from streamlets.kafka_security import ConnectionCheckError, KafkaSecurityError

        from .kafka_broker import KafkaBroker, create_topics

        security, embedded = self._kafka
        kafka = None
        if self.options.kafka:
            kafka = KafkaConnection(bootstrap_servers=self.options.kafka, security=security or KafkaSecurity())
            if security is not None:  # a plain broker that is not there is named by the topics' creation
                try:
                    kafka.check()
                except (ConnectionCheckError, KafkaSecurityError) as e:
                    raise SandboxError(f"{e}; nothing was started") from None
                self.console.print(f"connected to Kafka at {kafka} ({kafka.security.describe()})")
        else:
            secured = "" if embedded == "none" else f", {embedded}"
            self.console.print(f"starting Kafka broker (state in {self.layout.kafka}{secured})")
        self.console.print(f"starting Spark (log in {self.layout.log('spark')})")
        if self.durable is not self.layout:
            self.console.print(f"checkpoints, savepoints and dumps in {self.durable.root}")
        with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
            spark = pool.submit(self._start_spark)  # prints nothing: its JVM's start redirects fds 1 and 2
            try:
                if kafka is None:
                    self.broker = KafkaBroker(Path(self.layout.kafka), security=embedded).start()
                    kafka = self.broker.connection()
                create_topics(kafka, application_topics(self.bp))
            except BaseException:
                try:
                    self.spark = spark.result()
                except Exception:  # the broker's error is the one to show
                    pass
                raise
            self.spark = spark.result()
        return kafka

    def _start_spark(self):
        from streamlets.runtime.spark_session import build_spark_session

        from .spark_logging import jvm_output_to, log4j_conf

        log_file = Path(self.layout.log("spark"))
        conf = log4j_conf(log_file)
        with jvm_output_to(log_file):
            return build_spark_session(f"sandbox-{self.bp.app_id}", conf, master=self.options.master, store=self.object_store)

    # --- run ------------------------------------------------------------------------------

    def run(self) -> int:
        """Run the application; returns the exit status (0 done or stopped, 1 a query failed).

        Takes the state folder's lock first (unless the caller holds it already) and releases it
        after everything has stopped; StateFolderBusy if another process holds it."""
        self.lock.acquire()
        try:
            return self._run()
        finally:
            self.lock.release()

    def _run(self) -> int:
        import streamlets.state  # noqa: F401  (registers the state control commands)
        from streamlets.runtime.runner import StreamletRuntime
        from streamlets.runtime.transport import KafkaTransport

        try:
            settings = settings_from_entries(self.options.entries, self.bp.streamlets) if self.options.entries is not None \
                else load_settings(self.options.config_file, self.options.overrides, self.bp.streamlets)
            self.object_store = storage_from_entries(self.options.entries) if self.options.entries is not None \
                else load_storage(self.options.config_file, self.options.overrides)
        except LocalConfigError as e:
            raise SandboxError(str(e)) from None
        if self.object_store is not None:
            missing = self.object_store.missing_credentials()
            if missing:
                raise SandboxError(missing)
            self.durable = self.object_store.layout()
            if self.options.savepoints is None:  # ids resolve there (--restore, the operations API)
                self.options = replace(self.options, savepoints=self.durable.savepoints)
        unknown = sorted(set(self.options.state_partitions) - set(self.bp.streamlets))
        if unknown:  # before anything starts or is restored
            raise SandboxError(f"--state-partitions names no streamlet of the blueprint: {', '.join(unknown)}")
        self._kafka = self._kafka_settings()  # before the state folder is touched
        registry = self._schema_registry()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._disk = DiskWatch(self.state_dir)  # a full disk is named as such, with the folder
        full = self._disk.check()
        if full:
            raise SandboxError(full)
        self._logging()
        runs = [
            run_config_for(self.bp, name, self.classes, settings[name], bootstrap="", state_dir=self.state_dir,
                           trigger=self.options.trigger, durable=self.durable)
            for name in self.bp.streamlets
        ]
        for line in empty_inputs(runs, self.classes):
            self.console.print(f"[yellow]warning:[/] {line}")

        def on_signal(*_):
            self.stop_requested.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            kafka = self._start_kafka_and_spark()
            if self.broker is not None:
                self._disk.follow(self.broker.log_file)
            # PySpark's SparkContext installs its own SIGINT handler (cancel jobs, raise
            # KeyboardInterrupt); ours stops the queries first and then Spark, in order.
            signal.signal(signal.SIGINT, on_signal)
            transport = KafkaTransport(kafka.bootstrap_servers, security=kafka.security)
            self.runtime = StreamletRuntime(self.spark, self.bp.app_id, dead_letter_topic(self.bp), transport)
            from .topics import TopicWatcher

            self._watcher = TopicWatcher(kafka)
            runs = [run.model_copy(update={"bootstrap_servers": kafka.bootstrap_servers, "kafka_security": kafka.security,
                                           "schema_registry": registry})
                    for run in runs]
            if self.options.fresh and self.durable is not self.layout:  # the new broker's topics are empty
                from streamlets.runtime.storage import storage_for

                checkpoints = self.durable.checkpoints(self.bp.app_id)
                storage_for(checkpoints, self.spark).delete(checkpoints)
            self._restore(runs)
            runs = self._repartition(runs)
            for run in runs:
                self.console.print(f"starting streamlet [bold]{run.streamlet}[/] ({run.class_name})")
            try:  # at once: each waits mostly on the JVM and the broker
                self.runtime.start_all([(self.classes[run.streamlet], run) for run in runs])
            except StreamletError as e:
                raise SandboxError(str(e)) from None
            self._listener = start_control_listener(self.runtime, runs[0])
            self._serve_ops(kafka)
            from .supervisor import Supervisor

            self.supervisor = Supervisor(self, max_restarts=self.options.max_restarts, backoff=self.options.restart_backoff)
            # `blueprint control`, `savepoint` and `topic tail` find the running application's broker here
            # (the security names files and variables, never a secret)
            Path(self.layout.sandbox_info).write_text(json.dumps({"app_id": self.bp.app_id,
                                                                  "bootstrap_servers": kafka.bootstrap_servers,
                                                                  "kafka_security": kafka.security.model_dump(
                                                                      exclude_defaults=True),
                                                                  "pid": os.getpid(),
                                                                  "ui": self.ops_server.url if self.ops_server else None}))
            return self._watch()
        finally:
            self._shutdown()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _serve_ops(self, bootstrap: KafkaConnection) -> None:
        """The runtime's metrics registry, and with --ui the operations server over it."""
        from streamlets.runtime.metrics import RuntimeCollector, runtime_registry

        self.collector = RuntimeCollector(self.runtime, self.bp.app_id, bootstrap)  # also the lag for _done
        self.metrics = runtime_registry(self.runtime, self.bp.app_id, bootstrap, collector=self.collector)
        if self.options.ui_port is None:
            return
        from blueprint.ops.server import OpsServer

        from .ops import SandboxBackend

        backend = self._ops_backend = SandboxBackend(self, self.metrics, bootstrap)
        try:
            self.ops_server = OpsServer(backend, self.options.ui_host, self.options.ui_port).start()
        except OSError as e:
            raise SandboxError(f"--ui: {e}") from None
        backend.start_sampling()
        self.console.print(f"web view and API on {self.ops_server.url} (metrics: {self.ops_server.url}/metrics)")

    def _restore(self, runs: list[StreamletRunConfig]) -> None:
        """Restore streamlets from savepoints (`--restore`), each after Spark's compatibility
        check (streamlets.state.restore); SandboxError with what changed if one cannot be restored."""
        from streamlets.state.restore import check_restore, restore_savepoint
        from streamlets.state.savepoint import SavepointError, batch_ids, resolve_savepoint

        from ..ops.model import batch_ids_text

        unknown = sorted(set(self.options.restores) - set(self.bp.streamlets))
        if unknown:
            raise SandboxError(f"--restore names no streamlet of the blueprint: {', '.join(unknown)}")
        by_name = {r.streamlet: r for r in runs}
        for name, ref in self.options.restores.items():
            try:
                sp = resolve_savepoint(ref, self.options.savepoints or self.layout.savepoints, self.spark)
            except SavepointError as e:
                raise SandboxError(str(e)) from None
            batches = batch_ids_text(batch_ids(sp))
            self.console.print(f"checking that [bold]{name}[/] can start from savepoint {sp['id']} (batch ids {batches})")
            check = check_restore(self.spark, sp, self.classes[name], by_name[name])
            if not check.ok:
                raise SandboxError(f"streamlet {name!r} cannot start from savepoint {sp['id']}: " + "; ".join(check.problems))
            for note in check.notes:
                self.console.print(f"  note: {note}")
            branch = self.options.branch or sp["app_id"] != self.bp.app_id
            try:
                moved = restore_savepoint(sp, by_name[name], branch=branch, replace=True, spark=self.spark)
            except SavepointError as e:
                raise SandboxError(str(e)) from None
            self.console.print(f"restored [bold]{name}[/] from {sp['path']}" + (" as a branch (new query ids)" if branch else "")
                               + (f"; its previous checkpoints are in {moved}" if moved else ""))

    def _repartition(self, runs: list[StreamletRunConfig]) -> list[StreamletRunConfig]:
        """Give streamlets' checkpoints another number of state partitions (`--state-partitions`),
        after any restore (streamlets.state.repartition); SandboxError if one cannot be repartitioned.
        Returns the runs, a repartitioned streamlet's with spark.sql.shuffle.partitions set to the
        new number (a fresh query pins the same number)."""
        from streamlets.state.repartition import RepartitionError, repartition_streamlet

        out = []
        for run in runs:
            partitions = self.options.state_partitions.get(run.streamlet)
            if partitions is not None:
                run = run.model_copy(update={"spark_conf": {**run.spark_conf, "spark.sql.shuffle.partitions": str(partitions)}})
                try:
                    done = repartition_streamlet(self.spark, run.model_copy(update={"state_partitions": partitions}))
                except (RepartitionError, OSError) as e:
                    raise SandboxError(f"cannot repartition the state of {run.streamlet!r}: {e}") from None
                for line in done:
                    self.console.print(f"repartitioned [bold]{run.streamlet}[/] {line}")
            out.append(run)
        return out

    def _topic_rows(self) -> list[TopicRow]:
        now = time.time()
        dt = max(now - self._last_look, 1e-6)
        self._last_look = now
        rows = []
        for topic in self.bp.topics.values():
            name = topic.kafka_name(self.bp.app_id)
            records = self._watcher.records(name)
            rate = (records - self._last_offsets.get(name, records)) / dt
            self._last_offsets[name] = records
            rows.append(TopicRow(name, records, [r.text for r in topic.producers], [r.text for r in topic.consumers], rate))
        return rows

    def _dead_letters(self) -> int:
        return self._watcher.records(dead_letter_topic(self.bp))

    def _watch(self) -> int:
        start = time.time()
        idle_since: float | None = None
        last_plain = 0.0
        status = 0
        live = Live(console=self.console, refresh_per_second=2, transient=False) if self.console.is_terminal else None
        if live:
            live.start()
        try:
            while not self.stop_requested.wait(1.0):
                elapsed = time.time() - start
                # restarts the broker and failed streamlets, quarantines poison records (supervisor.py)
                status = self.supervisor.check() or 0
                if status:
                    break
                topics = self._topic_rows()
                stats = self.runtime.monitor.stats
                if live:
                    live.update(render(stats, topics, self._dead_letters(), elapsed, self._faults()))
                elif elapsed - last_plain >= 10:
                    last_plain = elapsed
                    self.console.print(plain_line(stats, topics, elapsed, self._faults()), highlight=False)
                full = self._disk.check()
                if full:
                    self.console.print(f"[red]error:[/] {full}")
                    status = 1
                    break
                if self.options.timeout and elapsed > self.options.timeout:
                    self.console.print(f"stopping: --timeout of {self.options.timeout:.0f} s reached")
                    break
                if self.options.exit_when_done:
                    if self._done():
                        idle_since = idle_since or time.time()
                        if time.time() - idle_since >= self.options.idle_seconds:
                            self.console.print(f"all input processed after {elapsed:.0f} s; stopping")
                            break
                    else:
                        idle_since = None
            if self.stop_requested.is_set():
                self.console.print("stopping (signal)")
        finally:
            if live:
                live.stop()
        self._report_from = start  # the final tables, once the queries have stopped (_shutdown)
        return status

    def _report(self, start: float) -> None:
        """The final tables (the queries stopped: their status says so), then the supervisor's
        one error line, last."""
        try:
            self.console.print(render(self.runtime.monitor.stats, self._topic_rows(), self._dead_letters(),
                                      time.time() - start, self._faults()))
        finally:  # the error line whatever became of the tables (a broker that died, say)
            if self.supervisor.error:
                self.console.print(self.supervisor.error, style="red", highlight=False, soft_wrap=True, markup=False)

    def _faults(self) -> dict[str, dict[str, int]]:
        """Per streamlet (and "kafka"): restarts by the supervisor, records quarantined."""
        out: dict[str, dict[str, int]] = {}
        for name, n in self.supervisor.restarts.items():
            out.setdefault(name, {})["restarts"] = n
        for name, n in self.runtime.quarantine.counts.items():
            out.setdefault(name, {})["quarantined"] = n
        return out

    def _done(self) -> bool:
        """All input processed: every streamlet running (none failed, waiting in a restart or
        stopped by a command), no query running a batch or with data waiting, every inlet topic
        partition read to its last stable offset (the lag of the metrics,
        RuntimeCollector.inlet_lags, read from Kafka), and no dead-letter scan pending."""
        if self.supervisor.restarting:
            return False
        for ctx in self.runtime.contexts.values():
            for q in ctx.queries:
                if not q.isActive:
                    return False
                st = q.status
                if st["isTriggerActive"] or st["isDataAvailable"] or st["message"].startswith("Initializing"):
                    return False
        if any(row.lag is None or row.lag > 0 for row in self.collector.inlet_lags()):
            return False
        return self.runtime.dead_letters.pending() == 0

    def _stop_without_broker(self) -> None:
        """Stop the queries of a run whose embedded broker is gone (the supervisor gave up on it):
        nothing a query does can reach Kafka, and a graceful stop would wait out the Kafka
        clients' timeouts and retries, minutes per query (Spark's Kafka source retries its offset
        requests three times, `default.api.timeout.ms` 60 s each). Each query's stop waits at most
        BROKERLESS_STOP seconds (Spark's `spark.sql.streaming.stopTimeout`, then it gives up on
        the query's thread), and so do the waits for their last reports; the final tables show
        the topics' last counts (TopicWatcher.offline)."""
        if self._watcher is not None:
            self._watcher.offline()
        for ctx in self.runtime.contexts.values():
            try:
                ctx.spark.conf.set("spark.sql.streaming.stopTimeout", f"{BROKERLESS_STOP:.0f}s")
            except Exception as e:  # a session already gone: its queries are too
                log.debug("stopTimeout of %s: %s", ctx.run.streamlet, e)
        self.runtime.stop(timeout=BROKERLESS_STOP)

    def _shutdown(self) -> None:
        if self.ops_server is not None:
            self.ops_server.stop()
        if self._ops_backend is not None:
            self._ops_backend.stop()
        if self._listener is not None:
            self._listener.stop()
        Path(self.layout.sandbox_info).unlink(missing_ok=True)
        if self.runtime is not None:
            self.console.print("stopping queries")
            if self.broker is not None and not self.broker.is_running():
                self._stop_without_broker()
            else:
                self.runtime.stop()
        if self._report_from is not None:
            try:
                self._report(self._report_from)
            except Exception as e:  # Spark and the broker must stop all the same
                log.warning("the final tables could not be shown: %s", e)
        if self._watcher is not None:
            self._watcher.close()
        if self.spark is not None:
            self.spark.stop()
        if self.broker is not None:
            self.broker.stop()
