"""`blueprint savepoint take|list|inspect|dispose` and `blueprint state export` for the sandbox.

A sandbox application keeps its checkpoints in `<state dir>/checkpoints/<app>/<streamlet>/<query>`
(state dir: `--state-dir`, default `.streamlets/<app id>`; the layout: streamlets.runtime.layout);
its savepoints go to `<state dir>/savepoints` unless `--savepoints` names another folder or a
Hadoop URI (s3a://, abfss://...). With `--config`, a run config whose `storage` section puts
the state on an object store (streamlets.runtime.object_store), the checkpoints and savepoints are
read there, with its endpoint and the credentials of the environment. Everything here works while the application runs: savepoints copy only committed
micro-batches and Spark's state data source only reads. Commands that change a state folder respect its
owner: `state repartition` of a checkpoint in a state folder that a sandbox (or another command)
holds is refused with one line naming it (blueprint.sandbox.statelock); `savepoint take` holds
the folder's lock while it copies when no sandbox runs, so a `blueprint run --fresh` cannot
delete what it copies.

Exit codes: 0 done, 1 refused (nothing to take, not a savepoint, a bad export), 2 usage or I/O.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from streamlets.kafka_security import KafkaConnection, KafkaSecurity
from streamlets.runtime.layout import StateLayout

from ..configcheck import key_value
from .errors import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, CliError, command_app, fail, guard  # noqa: F401

savepoint_app = command_app(help="Savepoints of a sandbox application's streamlets: take, list, inspect, dispose.")
state_app = command_app(help="The state of a checkpoint or savepoint: export it (JSON Lines, Parquet, CSV), "
                        "or repartition a stopped query's checkpoint.")


def state_layout(state_dir: Path | None, app_id: str) -> StateLayout:
    """The state folder `state_dir` (absolute), else the application's default one."""
    return StateLayout(str(state_dir.resolve())) if state_dir else StateLayout.sandbox_default(app_id)


CONFIG_HELP = ("a run config whose storage section (storage.checkpoints, storage.s3a.*) puts checkpoints and savepoints "
               "on an object store")


def object_store_of(config: Path | None):
    """The ObjectStore of the run config's `storage` section (None without one), or one line
    (fail) naming the file and key, or the missing credentials."""
    if config is None:
        return None
    from ..sandbox.localconfig import LocalConfigError, load_storage

    try:
        store = load_storage(config, [])
    except LocalConfigError as e:
        fail(str(e), EXIT_USAGE)
    missing = store.missing_credentials() if store is not None else None
    if missing:
        fail(missing, EXIT_USAGE)
    return store


def durable_layout(state_dir: Path | None, app_id: str, store) -> StateLayout:
    """Where checkpoints and savepoints are: the object store's root, else the state folder."""
    return store.layout() if store is not None else state_layout(state_dir, app_id)


def store_session(store):
    """A local SparkSession that reaches the object store (its settings and S3A connector), or None
    without one (local paths need none)."""
    if store is None or not store.is_s3a:
        return None
    from streamlets.runtime.spark_session import build_spark_session

    return build_spark_session("blueprint-savepoints", master="local[1]", store=store)


def blueprint_and_classes(file: Path):
    """The blueprint and its streamlet classes, or one line (fail) naming the file or the broken classes."""
    from ..loader import BlueprintLoadError, BlueprintReadError, import_streamlets, load_blueprint

    try:
        bp = load_blueprint(file)
    except BlueprintLoadError as e:
        fail(str(e), EXIT_USAGE if isinstance(e, BlueprintReadError) else EXIT_REFUSED)
    with contextlib.redirect_stdout(sys.stderr):
        classes = import_streamlets(bp)
    broken = {n: c for n, c in classes.items() if not isinstance(c, type)}
    if broken:
        fail("; ".join(f"streamlet {n!r}: {c}" for n, c in broken.items()) + " (run `blueprint verify`)")
    return bp, classes


KAFKA_CONFIG_HELP = "with --kafka: a run config whose kafka.security.* says how to reach it (TLS, SASL)"


def sandbox_bootstrap(bp, state_dir: Path | None, kafka: str | None, config: Path | None = None) -> KafkaConnection:
    """`kafka` if given, with the kafka.security.* of the run config `config` (PLAINTEXT without
    one), else the Kafka connection of the sandbox running `bp` (its `<state dir>/sandbox.json`:
    bootstrap servers and security); fail with one line saying how to start or name it, or what
    is wrong with the config."""
    if kafka is not None:
        return KafkaConnection(bootstrap_servers=kafka, security=_config_security(config))
    if config is not None:
        fail("--config goes with --kafka (the running sandbox's own settings are used without it)", EXIT_USAGE)
    info = Path(state_layout(state_dir, bp.app_id).sandbox_info)
    if not info.is_file():
        fail(f"no running sandbox of {bp.app_id!r} ({info} is missing): start it with `blueprint run`, "
             "or give --kafka or --state-dir")
    try:
        found = json.loads(info.read_text())
        return KafkaConnection(bootstrap_servers=str(found["bootstrap_servers"]),
                               security=KafkaSecurity.model_validate(found.get("kafka_security") or {}))
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"cannot read {info} ({e}): is the sandbox running? Give --kafka instead", EXIT_USAGE)


def _config_security(config: Path | None) -> KafkaSecurity:
    """The kafka.security.* of the run config `config` (blueprint.configcheck.kafka_security)."""
    from ..configcheck import ConfigReadError, config_entries, kafka_security

    if config is None:
        return KafkaSecurity()
    try:
        entries, problems = config_entries([config], [])
        if problems:
            fail(f"{problems[0].file}: {problems[0].message}", EXIT_USAGE)
        return kafka_security(entries) or KafkaSecurity()
    except (ConfigReadError, ValueError) as e:
        fail(f"{config}: {e}", EXIT_USAGE)


@contextlib.contextmanager
def _state_lock(state: Path | None, command: str, *, shared_with_a_run: bool = False):
    """Hold the state folder's lock for the body, or fail with the owner's pid and start time.

    `shared_with_a_run`: the body is safe next to a running sandbox (it reads committed batches
    only), so a held lock is no refusal; the lock is then simply not taken."""
    from ..sandbox.statelock import StateFolderBusy, StateLock, is_busy

    if state is None or not state.is_dir():
        yield
        return
    if shared_with_a_run and is_busy(state):
        yield
        return
    lock = StateLock(state, command)
    try:
        lock.acquire()
    except StateFolderBusy as e:
        fail(str(e))
    try:
        yield
    finally:
        lock.release()


def _explain(e: Exception) -> CliError | None:
    if isinstance(e, OSError):
        return CliError(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "), EXIT_USAGE)
    return None


def _guard(fn):
    """Run a command body (blueprint.cli.errors.guard): state errors exit 1, I/O errors 2, a bug
    of ours or Spark's failure one line `<type>: <first line>` with 2; no traceback."""
    return guard(fn, explain=_explain,
                 internal=lambda e: f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


@savepoint_app.command("take")
def take(
    file: Path = typer.Argument(..., help="the blueprint file", show_default=False),
    streamlets: list[str] = typer.Option(None, "--streamlet", "-s", help="only these streamlets [default: every one with checkpoints]"),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="the sandbox's state folder [default: .streamlets/<app id>]"),
    savepoints: str | None = typer.Option(None, "--savepoints", help="savepoint root: a folder or Hadoop URI [default: <state dir>/savepoints]"),
    reason: str = typer.Option("manual", "--reason", help="recorded in the manifest"),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """Take a savepoint of streamlets of a (running or stopped) sandbox application."""
    from streamlets.runtime.checkpoint import query_folders
    from streamlets.state.savepoint import batch_ids, take_savepoint

    from ..ops.model import batch_ids_text
    from streamlets.runtime.storage import storage_for

    bp, classes = blueprint_and_classes(file)
    store = object_store_of(config)
    state = Path(state_layout(state_dir, bp.app_id).root)
    layout = durable_layout(state_dir, bp.app_id, store)
    root = savepoints or layout.savepoints
    unknown = sorted(set(streamlets or []) - set(bp.streamlets))
    if unknown:
        fail(f"{file} has no streamlet {', '.join(map(repr, unknown))} (it has {', '.join(bp.streamlets)})", EXIT_USAGE)

    def body():
        spark = store_session(store)
        names = streamlets or [n for n in bp.streamlets
                               if query_folders(storage_for(layout.checkpoints(), spark), layout.checkpoints(bp.app_id, n))]
        if not names:
            fail(f"no checkpoints under {layout.checkpoints(bp.app_id)}: run the application first "
                 "(`blueprint run`), or give --state-dir")
        table = Table("savepoint", "streamlet", "batch ids", "path", box=None)
        for name in names:
            with _state_lock(state, "blueprint savepoint take", shared_with_a_run=True):
                sp = take_savepoint(layout.checkpoints(bp.app_id, name), root, app_id=bp.app_id, streamlet=name,
                                    cls=classes[name], reason=reason, spark=spark)
            table.add_row(sp["id"], name, batch_ids_text(batch_ids(sp)), sp["path"])
        Console().print(table)
    _guard(body)


@savepoint_app.command("list")
def list_(
    file: Path | None = typer.Argument(None, help="the blueprint file (its application's savepoints)", show_default=False),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="the sandbox's state folder"),
    savepoints: str | None = typer.Option(None, "--savepoints", help="savepoint root [default: <state dir>/savepoints]"),
    streamlet: str | None = typer.Option(None, "--streamlet", "-s", help="only this streamlet's"),
    as_json: bool = typer.Option(False, "--json", help="the manifests as a JSON array"),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """List complete savepoints, oldest first."""
    from streamlets.state.savepoint import batch_ids, list_savepoints

    from ..ops.model import batch_ids_text

    app_id = None
    if file is not None:
        from ..loader import BlueprintLoadError, load_blueprint

        try:
            app_id = load_blueprint(file).app_id
        except BlueprintLoadError as e:
            fail(str(e), EXIT_USAGE)
    store = object_store_of(config)
    if savepoints is None:
        if app_id is None and state_dir is None and store is None:
            fail("give a blueprint file, --state-dir, --config or --savepoints", EXIT_USAGE)
        savepoints = durable_layout(state_dir, app_id or "", store).savepoints

    def body():
        found = list_savepoints(savepoints, app_id, streamlet, spark=store_session(store))
        if as_json:
            print(json.dumps(found, indent=2))
            return
        table = Table("savepoint", "application", "streamlet", "created (UTC)", "reason", "batch ids", "code", box=None)
        for m in found:
            table.add_row(m["id"], m["app_id"], m["streamlet"], m["created_at"], m["reason"],
                          batch_ids_text(batch_ids(m)), m["code_version"])
        Console().print(table if found else f"no savepoints under {savepoints}")
    _guard(body)


@savepoint_app.command("inspect")
def inspect(
    ref: str = typer.Argument(..., help="a savepoint's path, or its id with --savepoints", show_default=False),
    savepoints: str | None = typer.Option(None, "--savepoints", help="savepoint root to find an id in"),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """Print a savepoint's manifest (JSON)."""
    from streamlets.state.savepoint import resolve_savepoint

    store = object_store_of(config)
    root = savepoints or (store.layout().savepoints if store is not None else None)
    _guard(lambda: print(json.dumps(resolve_savepoint(ref, root, store_session(store)), indent=2, sort_keys=True)))


@savepoint_app.command("dispose")
def dispose(
    refs: list[str] = typer.Argument(..., help="savepoint paths, or ids with --savepoints", show_default=False),
    savepoints: str | None = typer.Option(None, "--savepoints", help="savepoint root to find ids in"),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
) -> None:
    """Delete savepoints."""
    from streamlets.state.savepoint import dispose_savepoint, resolve_savepoint

    store = object_store_of(config)
    root = savepoints or (store.layout().savepoints if store is not None else None)

    def body():
        spark = store_session(store)
        for ref in refs:
            sp = resolve_savepoint(ref, root, spark)
            dispose_savepoint(sp["path"], spark)
            print(f"disposed {sp['id']} ({sp['path']})")
    _guard(body)


@state_app.command("export")
def export(
    path: str = typer.Argument(..., help="a query checkpoint folder, or a savepoint (every stateful query)", show_default=False),
    out: Path = typer.Option(..., "--out", "-o", help="a new folder for the export", show_default=False),
    fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl, parquet or csv"),
    batch_id: int | None = typer.Option(None, "--batch-id", help="the committed micro-batch to export [default: the last]"),
) -> None:
    """Write the state of a checkpoint or savepoint with Spark's state data source, with a
    manifest (`_export.json`: batch id, operators, rows, schemas)."""
    from streamlets.state.savepoint import MANIFEST, QUERIES, read_savepoint
    from streamlets.runtime.spark_session import build_spark_session
    from streamlets.state.export import export_state

    def body():
        targets = {"": path}
        if Path(path, MANIFEST).exists():
            sp = read_savepoint(path)
            targets = {q: str(Path(path, QUERIES, q)) for q, e in sp["queries"].items() if e.get("stateful")}
            if not targets:
                fail(f"savepoint {sp['id']} holds no state (no stateful query)")
        spark = build_spark_session("streamlets-state-export", master="local[2]")
        for query, checkpoint in targets.items():
            manifest = export_state(spark, checkpoint, str(out / query) if query else str(out), fmt, batch_id)
            rows = sum(op["rows"] for op in manifest["operators"])
            print(f"exported {rows:,} state rows of {checkpoint} at batch {manifest['batch_id']} "
                  f"({len(manifest['operators'])} operator(s), {fmt}) to {out / query if query else out}")
    _guard(body)


@state_app.command("repartition")
def repartition(
    checkpoint: str = typer.Argument(..., help="a stopped query's checkpoint folder", show_default=False),
    partitions: int = typer.Option(..., "--partitions", "-n", min=1, help="the new number of state partitions",
                                   show_default=False),
) -> None:
    """Give a stopped query's checkpoint another number of state partitions
    (spark.sql.shuffle.partitions, which Spark pins at the first batch), as of its last committed
    micro-batch; the old checkpoint is kept next to it as `<folder>.before-repartition-<batch>`."""
    from streamlets.state.repartition import plan_repartition, repartition_checkpoint
    from streamlets.runtime.spark_session import build_spark_session

    from ..sandbox.statelock import state_folder_of

    def body():
        # a checkpoint of a running sandbox is its, not ours: refused before anything is read
        with _state_lock(state_folder_of(Path(checkpoint)) if "://" not in checkpoint else None,
                         "blueprint state repartition"):
            plan = plan_repartition(checkpoint, partitions)  # the file checks first: no Spark for a wrong path
            if plan.result.from_partitions == partitions:
                print(f"{plan.path} already has {partitions} state partitions; nothing changed")
                return
            spark = build_spark_session("streamlets-state-repartition", master="local[2]")
            result = repartition_checkpoint(spark, checkpoint, partitions)
        rows = sum(result.rows.values())
        print(f"repartitioned {result.checkpoint}: {result.from_partitions} -> {result.to_partitions} state partitions, "
              f"{rows:,} state rows in {len(result.rows)} operator(s) as of batch {result.batch_id}; "
              f"the previous checkpoint is in {result.previous}")
    _guard(body)


def control(
    file: Path = typer.Argument(..., help="the blueprint file", show_default=False),
    command: str = typer.Argument(..., help="savepoint, dump-state, reload-config, stop or ping; with --custom, "
                                  "the name of a streamlet's own command", show_default=False),
    custom: bool = typer.Option(False, "--custom", help="send COMMAND as a custom command, for streamlets that read "
                                "the control topic through a ControlInlet (no results are awaited)"),
    streamlet: str | None = typer.Option(None, "--streamlet", "-s", help="the target [default: every streamlet]"),
    args: list[str] = typer.Option(None, "--arg", "-a", help="KEY=VALUE: command arguments (dump-state: format=jsonl|parquet|csv; "
                                   "reload-config: config-parameter values)"),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="the running sandbox's state folder [default: .streamlets/<app id>]"),
    kafka: str | None = typer.Option(None, "--kafka", help="HOST:PORT of the application's Kafka [default: the running sandbox's]"),
    config: Path | None = typer.Option(None, "--config", "-c", help=KAFKA_CONFIG_HELP),
    timeout: float = typer.Option(120, "--timeout", help="seconds to wait for the results"),
) -> None:
    """Send a command on the application's control stream and print each streamlet's result."""
    from streamlets.runtime.control import COMMANDS, Command, await_results, results_consumer, send_command
    from streamlets.runtime.system_topics import control_topic

    from ..loader import BlueprintLoadError, load_blueprint

    if custom and not re.fullmatch(r"[a-z][a-z0-9-]*", command):
        fail(f"custom command name {command!r}: use lower-case letters, digits and '-'", EXIT_USAGE)
    if not custom and command not in COMMANDS:
        fail(f"unknown command {command!r} (one of {', '.join(COMMANDS)}; a streamlet's own command needs --custom)",
             EXIT_USAGE)
    try:
        bp = load_blueprint(file)
    except BlueprintLoadError as e:
        fail(str(e), EXIT_USAGE)
    if streamlet is not None and streamlet not in bp.streamlets:
        fail(f"{file} has no streamlet {streamlet!r} (it has {', '.join(bp.streamlets)})", EXIT_USAGE)
    parsed = {}
    for item in args or []:
        pair = key_value(item)
        if pair is None:
            fail(f"--arg {item!r}: expected KEY=VALUE", EXIT_USAGE)
        parsed[pair[0]] = pair[1]
    connection = sandbox_bootstrap(bp, state_dir, kafka, config)

    def body():
        if custom:  # answered, if at all, by the streamlet's own outlets
            cmd = Command.custom(command, streamlet, parsed)
            send_command(connection, bp.app_id, cmd)
            print(f"sent custom command {command!r} (id {cmd.id}) to {control_topic(bp.app_id)}")
            return
        cmd = Command(command, streamlet, parsed)
        consumer = results_consumer(connection, bp.app_id)
        try:
            send_command(connection, bp.app_id, cmd)
            expected = {streamlet} if streamlet else set(bp.streamlets)
            results = await_results(connection, bp.app_id, cmd.id, expected, timeout, consumer=consumer)
        finally:
            consumer.close()
        table = Table("streamlet", "status", "batch ids", "location", "message", box=None)
        for r in sorted(results, key=lambda r: r["streamlet"]):
            table.add_row(r["streamlet"], r["status"], ", ".join(f"{q}={b}" for q, b in r["batch_ids"].items()),
                          r["location"] or "", r["message"])
        Console(width=200).print(table)
        missing = expected - {r["streamlet"] for r in results}
        if missing:
            fail(f"no result within {timeout:.0f} s from {', '.join(sorted(missing))}")
        if any(r["status"] != "ok" for r in results):
            raise typer.Exit(EXIT_REFUSED)
    _guard(body)
