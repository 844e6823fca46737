"""The `blueprint` command line: `verify`, `graph`, `build` and `run` a blueprint FILE.

Exit codes: 0 done (the blueprint is sound), 1 it has problems (errors, or warnings with
--strict), 2 usage or I/O error. No traceback reaches the user: anything unexpected is one line
on stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from enum import Enum
from pathlib import Path

import typer
from ..configcheck import key_value
from ..scopes import EMBEDDED_BROKER_SECURITY
from ..loader import BlueprintLoadError, BlueprintReadError, load_blueprint
from ..model import Blueprint
from ..problems import make_problem, report_order
from ..verify import check, resolve
from .errors import EXIT_PROBLEMS, EXIT_SOUND, EXIT_USAGE, CliError, command_app, exit_with, fail, guard
from .report import print_problems

app = command_app(name="blueprint", help="Verify and run Streamlets on Spark applications described by a blueprint file.")


@app.callback()
def _root() -> None:
    """Verify and run Streamlets on Spark applications described by a blueprint file."""
    # A callback keeps `verify` a subcommand (typer would otherwise make a lone command the root).


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


@app.command()
def verify(
    file: Path = typer.Argument(..., metavar="FILE", help="the blueprint file: YAML, or Cloudflow's HOCON "
                                "blueprint.conf", show_default=False),
    overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", help="settings checked with --config, "
                                          "e.g. streamlets.stats.config-parameters.window=1h", show_default=False),
    format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text for people, json for tools "
                                        "(schema: blueprint/verify-report.schema.json)"),
    strict: bool = typer.Option(False, "--strict", help="warnings fail the verification too"),
    config: Path | None = typer.Option(None, "--config", "-c", help="a run or deploy config file (HOCON, YAML or "
                                       "JSON) to check against the blueprint's streamlets, topics and parameters"),
    schema_registry: str | None = typer.Option(None, "--schema-registry", metavar="URL", help="check the "
                                               "`schema-registry: true` topics against this registry (Confluent's "
                                               "REST API); the config's schema-registry.url otherwise, its "
                                               "ca-file and credentials either way"),
) -> None:
    """Check everything that can be checked before anything runs: the file's structure, that
    classes load and declare valid ports, parameters and mounts, that ports connect, that each
    topic's schemas are compatible in the direction data flows, that there are no cycles, and
    (with --config or KEY=VALUE) the settings of a run or deploy; with --schema-registry (or the
    config's schema-registry.url), the `schema-registry: true` topics' schemas against the registry's
    subjects and their compatibility levels.

    Streamlet class paths (module.Class) resolve against the blueprint's folder. Exit status:
    0 sound, 1 problems (errors, or warnings with --strict), 2 usage or I/O error.
    """
    exit_with(lambda: _verify(file, format, strict, config, overrides or [], schema_registry),
              internal=lambda e: f"internal error while verifying {file}: {type(e).__name__}: {e}")


BrokerSecurity = Enum("BrokerSecurity", {mode: mode for mode in EMBEDDED_BROKER_SECURITY}, type=str)  # type: ignore[misc]


@app.command()
def run(
    file: Path = typer.Argument(..., help="the blueprint file (YAML)", show_default=False),
    config: Path | None = typer.Option(None, "--config", "-c", help="run config file (HOCON, YAML or JSON): "
                                       "streamlets.<name>.config-parameters|volume-mounts|spark"),
    overrides: list[str] = typer.Argument(None, help="key=value settings on top of the config file, e.g. "
                                          "streamlets.stats.config-parameters.watermark-delay=2h", show_default=False),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="checkpoints, Kafka data and logs "
                                          "[default: .streamlets/<app id>]"),
    kafka: str | None = typer.Option(None, "--kafka", help="HOST:PORT of an external Kafka broker instead of the "
                                     "embedded one (how to reach it: kafka.security.* in the run config)"),
    broker_security: BrokerSecurity | None = typer.Option(
        None, "--broker-security", help="secure the embedded broker like a production one: sasl-ssl (SCRAM users) "
        "or mtls (client certificates), certificates made under the state folder [default: "
        "kafka.embedded-broker.security, else none]"),
    exit_when_done: bool = typer.Option(False, "--exit-when-done", help="stop once all input is processed"),
    idle_seconds: float = typer.Option(5.0, "--idle-seconds", help="with --exit-when-done: quiet seconds that mean done"),
    trigger: str = typer.Option("1 second", "--trigger", help="micro-batch interval (Spark processingTime trigger); 0 for as fast as possible"),
    timeout: float | None = typer.Option(None, "--timeout", help="stop after this many seconds"),
    fresh: bool = typer.Option(False, "--fresh", help="delete the state folder first (start from scratch)"),
    restore: list[str] = typer.Option(None, "--restore", help="STREAMLET=SAVEPOINT (path or id): start the streamlet "
                                      "from a savepoint, after checking Spark can restore across the change"),
    savepoints: str | None = typer.Option(None, "--savepoints", help="savepoint root for ids [default: <state dir>/savepoints]"),
    branch: bool = typer.Option(False, "--branch", help="restore with new query ids (automatic for another application's savepoint)"),
    state_partitions: list[str] = typer.Option(None, "--state-partitions", help="STREAMLET=N: repartition the streamlet's "
                                               "checkpoints (after any --restore) to N state partitions before it starts"),
    max_restarts: int = typer.Option(3, "--max-restarts", min=0, help="restarts of the Kafka broker, and of each failed "
                                     "streamlet, within 10 minutes before the run stops with exit 1"),
    restart_backoff: float = typer.Option(2.0, "--restart-backoff", min=0, help="seconds before a failed streamlet's "
                                          "first restart, doubled per try (at most 30)"),
    ui: int | None = typer.Option(None, "--ui", min=0, max=65535, help="serve the operations API, Prometheus metrics "
                                  "(/metrics) and the web view on this port (0: a free one; the URL is printed)"),
    ui_host: str = typer.Option("127.0.0.1", "--ui-host", help="with --ui: the address to listen on (no "
                                "authentication: keep it on loopback unless the network is yours)"),
) -> None:
    """Run the whole application locally: a real Kafka broker, local Spark, checkpoints under the
    state folder (a second run resumes). Ctrl-C stops cleanly."""
    def body() -> int:
        restores = {}
        for item in restore or []:
            pair = key_value(item)
            if pair is None or not pair[1]:
                raise CliError(f"--restore {item!r}: expected STREAMLET=SAVEPOINT", EXIT_USAGE)
            restores[pair[0]] = pair[1]
        partitions = {}
        for item in state_partitions or []:
            pair = key_value(item)
            if pair is None or not pair[1].isdigit() or int(pair[1]) < 1:
                raise CliError(f"--state-partitions {item!r}: expected STREAMLET=N with N a whole number of at least 1",
                               EXIT_USAGE)
            partitions[pair[0]] = int(pair[1])
        return _run(file, config, overrides or [], state_dir, kafka, exit_when_done, idle_seconds, trigger, timeout,
                    fresh, restores, savepoints, branch, partitions,
                    restarts=(max_restarts, restart_backoff), ui=ui, ui_host=ui_host,
                    broker_security=broker_security.value if broker_security else None)

    try:  # an unexpected environment problem is one line too, no traceback
        code = guard(body, internal=lambda e: f"{type(e).__name__}: {e}", families=False)
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


def _run(file: Path, config: Path | None, overrides: list[str], state_dir: Path | None, kafka: str | None,
         exit_when_done: bool, idle_seconds: float, trigger: str, timeout: float | None, fresh: bool,
         restores: dict[str, str] | None = None, savepoints: str | None = None, branch: bool = False,
         state_partitions: dict[str, int] | None = None, restarts: tuple[int, float] = (3, 2.0),
         ui: int | None = None, ui_host: str = "127.0.0.1", broker_security: str | None = None) -> int:
    from ..configcheck import ConfigReadError, checked_entries
    from ..loader import import_streamlets
    from ..sandbox.diskspace import full_disk_message, is_full_disk_error
    from ..sandbox.kafka_broker import BrokerError
    from ..sandbox.run import Sandbox, SandboxError, SandboxOptions
    from ..sandbox.statelock import StateFolderBusy, clear_state_folder

    try:
        blueprint = load_blueprint(file)
    except BlueprintLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, BlueprintReadError) else EXIT_PROBLEMS
    if config is not None and not config.is_file():
        print(f"error: run config file {config} does not exist", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.redirect_stdout(sys.stderr):
        classes = import_streamlets(blueprint)
        resolved = resolve(blueprint, classes)
        problems = check(resolved)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        print_problems(file, blueprint, problems, len(errors), len(problems) - len(errors), True)
        print("error: the blueprint is not sound; nothing was started", file=sys.stderr)
        return EXIT_PROBLEMS
    # The run config, exactly as `blueprint verify --config` checks it, before anything starts.
    try:
        entries, config_problems = checked_entries(resolved, config, overrides)
        config_errors = [p for p in config_problems if p.severity == "error"]
    except ConfigReadError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if config_errors:
        print_problems(config or Path("command line"), blueprint, config_errors, len(config_errors), 0, True)
        first = config_errors[0]
        where = ":".join(str(x) for x in (first.file, first.line, first.column) if x is not None)
        more = f" (and {len(config_errors) - 1} more above)" if len(config_errors) > 1 else ""
        print(f"error: {where}: {first.message}{more}; nothing was started", file=sys.stderr)
        return EXIT_PROBLEMS
    options = SandboxOptions(state_dir=state_dir, config_file=config, overrides=overrides, entries=entries, kafka=kafka,
                             exit_when_done=exit_when_done, idle_seconds=idle_seconds,
                             trigger=None if trigger.strip() in ("0", "0s", "") else trigger, timeout=timeout,
                             restores=restores or {}, savepoints=savepoints, branch=branch,
                             state_partitions=state_partitions or {}, max_restarts=restarts[0], restart_backoff=restarts[1],
                             ui_port=ui, ui_host=ui_host, broker_security=broker_security, fresh=fresh)
    for option, names in (("--restore", restores), ("--state-partitions", state_partitions)):
        unknown = sorted(set(names or {}) - set(blueprint.streamlets))
        if unknown:  # before the state folder is touched
            print(f"error: {option} names no streamlet of the blueprint: {', '.join(unknown)}", file=sys.stderr)
            return EXIT_PROBLEMS
    sandbox = Sandbox(blueprint, classes, options)
    logging.raiseExceptions = False  # a full disk is one line (below), not a traceback per failed log write
    try:
        sandbox.lock.acquire()  # before anything in the state folder is read, created or deleted
        if fresh:
            clear_state_folder(sandbox.state_dir)
        return sandbox.run()
    except (SandboxError, BrokerError, StateFolderBusy) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except Exception as e:
        if not is_full_disk_error(e):
            raise
        print(f"error: {full_disk_message(sandbox.state_dir)}", file=sys.stderr)
        return EXIT_PROBLEMS
    finally:
        sandbox.lock.release()


REPORT_VERSION = 1  # of the JSON report; its schema is blueprint/verify-report.schema.json


def _verify(file: Path, fmt: OutputFormat, strict: bool, config: Path | None, overrides: list[str],
            registry_url: str | None = None) -> int:
    from ..configcheck import ConfigReadError, config_entries, config_problems, schema_registry
    from streamlets.schema_registry import SchemaRegistry

    from ..registry_check import registry_problems
    from ..verify import check, resolve

    blueprint: Blueprint | None = None
    try:
        blueprint = load_blueprint(file)
    except BlueprintReadError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BlueprintLoadError as e:  # the file is there but is no blueprint: problems like any other
        problems = [make_problem(p.code, p.message, str(file), p.line, p.column) for p in e.problems]
        problems.append(make_problem(e.code, e.message, str(file), e.line, e.column))
    else:
        # Streamlet modules may print while importing: keep stdout for the report.
        with contextlib.redirect_stdout(sys.stderr):
            resolved = resolve(blueprint)
            problems = check(resolved)
        if config is not None or overrides:
            try:
                problems = report_order(problems + config_problems(resolved, config, overrides))
            except ConfigReadError as e:
                print(f"error: {e}", file=sys.stderr)
                return EXIT_USAGE
        try:  # the registry: --schema-registry, else the config's schema-registry.url
            entries = config_entries([config] if config is not None else [], overrides)[0]
            registry = schema_registry(entries, secrets=True)  # a deploy config's Secrets: not from here
            if registry_url is not None:
                registry = SchemaRegistry(**{**(registry.model_dump() if registry else {}), "url": registry_url})
        except (ConfigReadError, ValueError) as e:
            print(f"error: {str(e).removeprefix('Value error, ')}", file=sys.stderr)
            return EXIT_USAGE
        if registry is not None:
            problems = report_order(problems + registry_problems(resolved, registry))
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    failed = errors > 0 or (strict and warnings > 0)
    if fmt is OutputFormat.json:
        print(json.dumps({
            "version": REPORT_VERSION,
            "file": str(file),
            "config": str(config) if config is not None else None,
            "app_id": blueprint.app_id if blueprint else None,
            "strict": strict,
            "sound": not failed,
            "errors": errors,
            "warnings": warnings,
            "problems": [p.model_dump() for p in problems],
        }, indent=2))
    else:
        print_problems(file, blueprint, problems, errors, warnings, failed)
    return EXIT_PROBLEMS if failed else EXIT_SOUND


@app.command()
def build(
    file: Path = typer.Argument(..., metavar="FILE", help="the blueprint file (YAML or HOCON)", show_default=False),
    overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", help="settings over the config files, "
                                          "e.g. streamlets.stats.kubernetes.executor.instances=2", show_default=False),
    image: str = typer.Option(..., "--image", help="the image with the application's streamlets", show_default=False),
    conf: list[Path] = typer.Option(None, "--conf", "--config", "-c", help="a deploy config file (HOCON, YAML or "
                                    "JSON); repeat for several, a later file wins", show_default=False),
    kafka: str | None = typer.Option(None, "--kafka", help="HOST:PORT[,...] of the Kafka cluster (instead of "
                                     "kafka.bootstrap-servers)"),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="metadata.namespace of the resource"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write the YAML to this file [default: stdout]"),
) -> None:
    """Render the application's StreamletApplication resource (YAML) for `kubectl apply`.

    Settings are layered, highest first: KEY=VALUE, config files (a later file wins), the
    streamlets' declared defaults. Runs every check of `blueprint verify` and of the config and
    renders nothing if one fails. Exit status: 0 built, 1 blueprint or config problems, 2 usage
    or I/O error.
    """
    exit_with(lambda: _build(file, image, conf or [], overrides or [], kafka, namespace, output),
              internal=lambda e: f"internal error while building {file}: {type(e).__name__}: {e}")


def _build(file: Path, image: str, confs: list[Path], overrides: list[str], kafka: str | None,
           namespace: str | None, output: Path | None) -> int:
    import yaml

    from ..deploy.build import render_application

    resource = render_application(file, image, confs, overrides, kafka, namespace)
    text = yaml.safe_dump(resource, sort_keys=False, allow_unicode=True)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_SOUND
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write {output}: {e.strerror or e}", EXIT_USAGE) from None
    return EXIT_SOUND


class GraphFormat(str, Enum):
    text = "text"
    mermaid = "mermaid"
    dot = "dot"
    svg = "svg"
    png = "png"


@app.command()
def graph(
    file: Path = typer.Argument(..., metavar="FILE", help="the blueprint file (YAML)", show_default=False),
    format: GraphFormat = typer.Option(GraphFormat.text, "--format", "-f",
                                       help="text, mermaid, dot (Graphviz source), or svg/png (needs Graphviz `dot`)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write to this file [default: stdout]"),
) -> None:
    """Draw the application: streamlets, topics and the ports that connect them.

    Draws broken blueprints too (unloaded classes marked, unconnectable port paths skipped);
    `blueprint verify` says what is wrong. Exit codes: 0 drawn, 1 the file is no blueprint,
    2 usage or I/O error (unreadable file, Graphviz missing, output not writable).
    """
    from ..graph import GraphvizError, build_graph, render_image, to_dot, to_mermaid, to_text
    from ..loader import import_streamlets

    try:
        try:
            blueprint = load_blueprint(file)
        except BlueprintLoadError as e:
            fail(str(e), EXIT_USAGE if isinstance(e, BlueprintReadError) else EXIT_PROBLEMS)
        descriptors, load_errors = {}, {}
        with contextlib.redirect_stdout(sys.stderr):  # streamlet modules may print while importing
            for name, cls in import_streamlets(blueprint).items():
                if not isinstance(cls, type):  # a StreamletLoadError
                    load_errors[name] = str(cls)
                    continue
                try:
                    descriptors[name] = cls.descriptor()
                except Exception as e:
                    load_errors[name] = f"{type(e).__name__}: {e}"
        app_graph = build_graph(blueprint, descriptors, load_errors)
        if format in (GraphFormat.svg, GraphFormat.png):
            if output is None and format is GraphFormat.png and sys.stdout.isatty():
                fail("--format png writes binary data: give --output FILE or redirect stdout", EXIT_USAGE)
            try:
                data = render_image(to_dot(app_graph), format.value)
            except GraphvizError as e:
                fail(str(e), EXIT_USAGE)
        else:
            render = {GraphFormat.text: to_text, GraphFormat.mermaid: to_mermaid, GraphFormat.dot: to_dot}[format]
            data = render(app_graph).encode("utf-8")
        if output is None:
            sys.stdout.flush()
            stdout = getattr(sys.stdout, "buffer", None)
            if stdout is None:  # a text-only stream (embedding): fine for the text formats
                sys.stdout.write(data.decode("utf-8", "replace"))
            else:
                stdout.write(data)
                stdout.flush()
        else:
            try:
                output.write_bytes(data)
            except OSError as e:
                fail(f"cannot write {output}: {e.strerror or e}", EXIT_USAGE)
    except typer.Exit:
        raise
    except Exception as e:  # a bug of ours: one line, no traceback
        fail(f"internal error while drawing {file}: {type(e).__name__}: {e}", EXIT_USAGE)


from .state import control, savepoint_app, state_app  # noqa: E402  (the commands register below)
from .topic import topic_app  # noqa: E402

app.add_typer(savepoint_app, name="savepoint")
app.add_typer(state_app, name="state")
app.add_typer(topic_app, name="topic")
app.command("control")(control)


def main() -> None:
    """Entry point of the `blueprint` script."""
    app(prog_name="blueprint")


if __name__ == "__main__":
    main()
