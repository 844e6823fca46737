"""The `blueprint` command line: `verify`, `graph`, `build` and `run` a blueprint FILE.

Exit codes: 0 done (the blueprint is sound), 1 it has problems (errors, or warnings with
--strict), 2 usage or I/O error. No traceback reaches the user: anything unexpected is one line
on stderr.
"""

from __future__ import annotations

import contextlib
import json
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from ..loader import BlueprintError, BlueprintReadError, load_blueprint
from ..model import Blueprint
from ..problems import GROUPS, Problem, make_problem, report_order
from ..verify import verify as verify_blueprint

EXIT_SOUND, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="blueprint",
    help="Verify and run Streamlets on Spark applications described by a blueprint file.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


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
) -> None:
    """Check everything that can be checked before anything runs: the file's structure, that
    classes load and declare valid ports, parameters and mounts, that ports connect, that each
    topic's schemas are compatible in the direction data flows, that there are no cycles, and
    (with --config or KEY=VALUE) the settings of a run or deploy.

    Streamlet class paths (module.Class) resolve against the blueprint's folder. Exit status:
    0 sound, 1 problems (errors, or warnings with --strict), 2 usage or I/O error.
    """
    try:
        code = _verify(file, format, strict, config, overrides or [])
    except Exception as e:  # a bug of ours: one line, no traceback
        print(f"error: internal error while verifying {file}: {type(e).__name__}: {e}", file=sys.stderr)
        code = EXIT_USAGE
    raise typer.Exit(code)


@app.command()
def run(
    file: Path = typer.Argument(..., help="the blueprint file (YAML)", show_default=False),
    config: Path | None = typer.Option(None, "--config", "-c", help="run config file (HOCON, YAML or JSON): "
                                       "streamlets.<name>.config-parameters|volume-mounts|spark"),
    overrides: list[str] = typer.Argument(None, help="key=value settings on top of the config file, e.g. "
                                          "streamlets.stats.config-parameters.watermark-delay=2h", show_default=False),
    state_dir: Path | None = typer.Option(None, "--state-dir", help="checkpoints, Kafka data and logs "
                                          "[default: .streamlets/<app id>]"),
    kafka: str | None = typer.Option(None, "--kafka", help="HOST:PORT of an external Kafka broker instead of the embedded one"),
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
) -> None:
    """Run the whole application locally: a real Kafka broker, local Spark, checkpoints under the
    state folder (a second run resumes). Ctrl-C stops cleanly."""
    try:
        restores = {}
        for item in restore or []:
            name, sep, ref = item.partition("=")
            if not sep or not name or not ref:
                print(f"error: --restore {item!r}: expected STREAMLET=SAVEPOINT", file=sys.stderr)
                raise typer.Exit(EXIT_USAGE)
            restores[name.strip()] = ref.strip()
        partitions = {}
        for item in state_partitions or []:
            name, sep, n = item.partition("=")
            if not sep or not name.strip() or not n.strip().isdigit() or int(n) < 1:
                print(f"error: --state-partitions {item!r}: expected STREAMLET=N with N a whole number of at least 1",
                      file=sys.stderr)
                raise typer.Exit(EXIT_USAGE)
            partitions[name.strip()] = int(n)
        code = _run(file, config, overrides or [], state_dir, kafka, exit_when_done, idle_seconds, trigger, timeout, fresh,
                    restores, savepoints, branch, partitions, restarts=(max_restarts, restart_backoff))
    except KeyboardInterrupt:
        code = 130
    except typer.Exit:  # a usage error already said in one line
        raise
    except Exception as e:  # a bug of ours or an unexpected environment problem: one line, no traceback
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        code = EXIT_USAGE
    raise typer.Exit(code)


def _run(file: Path, config: Path | None, overrides: list[str], state_dir: Path | None, kafka: str | None,
         exit_when_done: bool, idle_seconds: float, trigger: str, timeout: float | None, fresh: bool,
         restores: dict[str, str] | None = None, savepoints: str | None = None, branch: bool = False,
         state_partitions: dict[str, int] | None = None, restarts: tuple[int, float] = (3, 2.0)) -> int:
    import shutil

    from ..loader import import_streamlets
    from ..sandbox.kafka_broker import BrokerError
    from ..sandbox.run import Sandbox, SandboxError, SandboxOptions

    try:
        blueprint = load_blueprint(file)
    except BlueprintError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, BlueprintReadError) else EXIT_PROBLEMS
    if config is not None and not config.is_file():
        print(f"error: run config file {config} does not exist", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.redirect_stdout(sys.stderr):
        classes = import_streamlets(blueprint)
        problems = verify_blueprint(blueprint, classes)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        _print_text(file, blueprint, problems, len(errors), len(problems) - len(errors), True)
        print("error: the blueprint is not sound; nothing was started", file=sys.stderr)
        return EXIT_PROBLEMS
    options = SandboxOptions(state_dir=state_dir, config_file=config, overrides=overrides, kafka=kafka,
                             exit_when_done=exit_when_done, idle_seconds=idle_seconds,
                             trigger=None if trigger.strip() in ("0", "0s", "") else trigger, timeout=timeout,
                             restores=restores or {}, savepoints=savepoints, branch=branch,
                             state_partitions=state_partitions or {}, max_restarts=restarts[0], restart_backoff=restarts[1])
    sandbox = Sandbox(blueprint, classes, options)
    if fresh and sandbox.state_dir.exists():
        shutil.rmtree(sandbox.state_dir)
    try:
        return sandbox.run()
    except (SandboxError, BrokerError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_PROBLEMS


REPORT_VERSION = 1  # of the JSON report; its schema is blueprint/verify-report.schema.json


def _verify(file: Path, fmt: OutputFormat, strict: bool, config: Path | None, overrides: list[str]) -> int:
    from ..configcheck import ConfigReadError, check_config, parse_overrides, read_entries
    from ..verify import check, resolve

    blueprint: Blueprint | None = None
    try:
        blueprint = load_blueprint(file)
    except BlueprintReadError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BlueprintError as e:  # the file is there but is no blueprint: problems like any other
        problems = [make_problem(p.code, p.message, str(file), p.line, p.column) for p in e.problems]
        problems.append(make_problem(e.code, e.message, str(file), e.line, e.column))
    else:
        # Streamlet modules may print while importing: keep stdout for the report.
        with contextlib.redirect_stdout(sys.stderr):
            resolved = resolve(blueprint)
            problems = check(resolved)
        if config is not None or overrides:
            entries, problems_of_overrides = parse_overrides(overrides)
            try:
                entries = (read_entries(config) if config is not None else []) + entries
            except ConfigReadError as e:
                print(f"error: {e}", file=sys.stderr)
                return EXIT_USAGE
            except BlueprintError as e:  # not checked further: its settings are unknown
                problems = report_order(problems + [make_problem(e.code, e.message, str(config), e.line, e.column)])
            else:
                problems = report_order(problems + problems_of_overrides + check_config(resolved, entries))
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
        _print_text(file, blueprint, problems, errors, warnings, failed)
    return EXIT_PROBLEMS if failed else EXIT_SOUND


_STYLE = {"error": "bold red", "warning": "bold yellow"}


def _print_text(file: Path, blueprint: Blueprint | None, problems: list[Problem],
                errors: int, warnings: int, failed: bool) -> None:
    """Problems grouped under a heading per kind (see problems.GROUPS), then a summary line.

    Each problem is one line `file:line:column: severity: message (hint: ...)`, for people and grep.
    """
    # rich colours only when stdout is a terminal; soft_wrap keeps one problem per line for grep.
    console = Console(highlight=False, soft_wrap=True)
    group = None
    for p in report_order(problems):
        if p.group != group:
            group = p.group
            console.print(Text(f"{GROUPS.get(group, group)}:", style="bold underline"))
        where = ":".join(str(x) for x in (p.file, p.line, p.column) if x is not None)
        line = Text.assemble("  ", (where, "bold"), ": ", (p.severity, _STYLE[p.severity]), ": ", p.message)
        if p.hint:
            line.append(f" (hint: {p.hint})", style="dim")
        console.print(line)
    counts = ", ".join(_count(n, word) for n, word in ((errors, "error"), (warnings, "warning")) if n)
    if failed:
        summary = Text.assemble((f"{file}: ", "bold"), ("not sound", "bold red"), f": {counts}")
    else:
        size = f"{_count(len(blueprint.streamlets), 'streamlet')}, {_count(len(blueprint.topics), 'topic')}"
        summary = Text.assemble((f"{file}: ", "bold"), ("sound", "bold green"), f" ({size})")
        if warnings:
            summary.append(f" with {counts}")
    console.print(summary)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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
    try:
        code = _build(file, image, conf or [], overrides or [], kafka, namespace, output)
    except Exception as e:  # a bug of ours: one line, no traceback
        print(f"error: internal error while building {file}: {type(e).__name__}: {e}", file=sys.stderr)
        code = EXIT_USAGE
    raise typer.Exit(code)


def _build(file: Path, image: str, confs: list[Path], overrides: list[str], kafka: str | None,
           namespace: str | None, output: Path | None) -> int:
    import yaml

    resource = render_resource(file, image, confs, overrides, kafka, namespace)
    if isinstance(resource, int):
        return resource
    text = yaml.safe_dump(resource, sort_keys=False, allow_unicode=True)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_SOUND
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"error: cannot write {output}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_SOUND


def render_resource(file: Path, image: str, confs: list[Path], overrides: list[str], kafka: str | None,
                    namespace: str | None) -> dict | int:
    """The StreamletApplication of a blueprint (see blueprint.deploy.build), or the exit status after
    printing why there is none (problems as verify's report on stderr: 1; usage or I/O: 2).
    Shared by `blueprint build` and `kubectl streamlets deploy`."""
    from streamlets.names import is_dns_label

    from ..deploy.build import BuildError, build_resource
    from ..configcheck import ConfigReadError, parse_overrides, read_entries
    from ..verify import resolve

    def usage(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE

    def report(blueprint: Blueprint | None, problems: list[Problem]) -> int:
        errors = sum(p.severity == "error" for p in problems)
        with contextlib.redirect_stdout(sys.stderr):  # stdout is for the resource only
            _print_text(file, blueprint, problems, errors, len(problems) - errors, True)
        print("error: nothing was built", file=sys.stderr)
        return EXIT_PROBLEMS

    if not image.strip():
        return usage("--image must name an image")
    if namespace is not None and not is_dns_label(namespace):
        return usage(f"--namespace {namespace!r} is not a namespace name (a DNS label)")
    try:
        blueprint = load_blueprint(file)
    except BlueprintReadError as e:
        return usage(str(e))
    except BlueprintError as e:
        problems = [make_problem(p.code, p.message, str(file), p.line, p.column) for p in e.problems]
        return report(None, problems + [make_problem(e.code, e.message, str(file), e.line, e.column)])
    entries, problems = [], []
    for path in confs:
        try:
            entries += read_entries(path)
        except ConfigReadError as e:
            return usage(str(e))
        except BlueprintError as e:
            problems.append(make_problem(e.code, e.message, str(path), e.line, e.column))
    command_line, override_problems = parse_overrides(overrides)
    problems += override_problems
    if problems:
        return report(blueprint, problems)
    with contextlib.redirect_stdout(sys.stderr):  # streamlet modules may print while importing
        resolved = resolve(blueprint)
    try:
        return build_resource(blueprint, resolved, image, entries + command_line, kafka=kafka, namespace=namespace)
    except BuildError as e:
        return report(blueprint, e.problems)


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

    def fail(message: str, code: int) -> None:
        print(f"error: {message}", file=sys.stderr)
        raise typer.Exit(code)

    try:
        try:
            blueprint = load_blueprint(file)
        except BlueprintError as e:
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

app.add_typer(savepoint_app, name="savepoint")
app.add_typer(state_app, name="state")
app.command("control")(control)


def main() -> None:
    """Entry point of the `blueprint` script."""
    app(prog_name="blueprint")


if __name__ == "__main__":
    main()
