"""`kubectl streamlets`: deploy and operate StreamletApplications (a kubectl plugin).

kubectl runs any executable named `kubectl-streamlets` on the PATH as `kubectl streamlets`;
installing this package puts one there. The cluster is the one of the current kubeconfig
context (`KUBECONFIG`, or `--kubeconfig` / `--context`), the namespace `-n` or the context's.

    kubectl streamlets deploy BLUEPRINT --image IMAGE [--conf F]... [KEY=VALUE]...
    kubectl streamlets undeploy APP
    kubectl streamlets list [-A]
    kubectl streamlets status APP
    kubectl streamlets scale APP STREAMLET EXECUTORS
    kubectl streamlets configure APP [--conf F]... [KEY=VALUE]...

`deploy` renders the resource exactly as `blueprint build` does (same checks, same layering)
and creates or replaces it. `configure` changes config-parameter values (checked against the
declarations carried in the resource), Spark settings and pod resources of a running
application; the operator redeploys only the streamlets whose settings changed. Exit status:
0 done, 1 refused (invalid settings, unknown application or streamlet), 2 usage, I/O or API
error. Never a traceback.

The API client is blueprint.deploy.cluster.Cluster; specs are read and patched as
blueprint.deploy.spec.ApplicationSpec.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ..deploy.build import render_application
from ..deploy.cluster import ApplicationNotFound, Cluster
from ..deploy.crd import GROUP, REQUEST_TIMEOUT_MAX, RESULT_GRACE_SECONDS
from ..deploy.spec import ApplicationSpec, AutoscalingSpec, Scale, StreamletSpec
from ..scopes import AUTOSCALING, CONFIG_PARAMETERS, KUBERNETES, SPARK, parse_scope, spark_text
from streamlets.autoscale import AutoscaleSettingsError
from .errors import EXIT_PROBLEMS, EXIT_SOUND, EXIT_USAGE, CliError, command_app, exit_with

app = command_app(name="kubectl streamlets",
                  help="Deploy and operate Streamlets on Spark applications (StreamletApplication resources).")


class Refused(CliError):
    """The request cannot be done as asked (exit status 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_PROBLEMS)


# --- commands --------------------------------------------------------------------------------------

KUBECONFIG = typer.Option(None, "--kubeconfig", help="kubeconfig file [default: $KUBECONFIG or ~/.kube/config]")
CONTEXT = typer.Option(None, "--context", help="kubeconfig context [default: the current one]")
NAMESPACE = typer.Option(None, "--namespace", "-n", help="namespace [default: the context's, or default]")


@app.command()
def deploy(
    blueprint_file: Path = typer.Argument(..., metavar="BLUEPRINT", help="the blueprint file", show_default=False),
    image: str = typer.Option(..., "--image", help="the application's image (streamlet code and its dependencies)"),
    conf: list[Path] = typer.Option(None, "--conf", "-c", help="deploy config file(s); a later one wins"),
    overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", show_default=False,
                                          help="settings over the config files"),
    kafka: str | None = typer.Option(None, "--kafka", help="Kafka bootstrap servers HOST:PORT,..."),
    kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT, namespace: str | None = NAMESPACE,
) -> None:
    """Verify and build the application (as `blueprint build`), then create or update it."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        resource = render_application(blueprint_file, image, conf or [], overrides or [], kafka, cluster.namespace)
        outcome = cluster.apply(resource)
        print(f"streamletapplication.{GROUP}/{resource['metadata']['name']} {outcome} in {cluster.namespace}")
        return EXIT_SOUND
    _exit(run)


@app.command()
def undeploy(app_name: str = typer.Argument(..., metavar="APP"), kubeconfig: str | None = KUBECONFIG,
             context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """Delete the application; the operator removes its Spark applications, secrets and claim
    (topics and savepoints stay unless the spec asks otherwise)."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        cluster.delete(app_name)
        print(f"streamletapplication.{GROUP}/{app_name} deleted from {cluster.namespace}")
        return EXIT_SOUND
    _exit(run)


@app.command("list")
def list_(all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A"), kubeconfig: str | None = KUBECONFIG,
          context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """The applications: namespace, name, streamlets, phase, ready, image."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        table = Table("NAMESPACE", "NAME", "STREAMLETS", "PHASE", "READY", "IMAGE", box=None, pad_edge=False)
        for item in cluster.list(all_namespaces):
            spec, status = item.get("spec", {}), item.get("status") or {}
            table.add_row(item["metadata"]["namespace"], item["metadata"]["name"], str(len(spec.get("streamlets", []))),
                          status.get("phase", "-"), status.get("ready", "-"), spec.get("image", ""))
        Console(soft_wrap=True).print(table)
        return EXIT_SOUND
    _exit(run)


def _autoscaler(auto: dict) -> str:
    """A streamlet's autoscaler in a word or three: off; `active held: backlog`; `passive up 1->3`;
    `active last 1 -> 3`; `active steady`."""
    if not auto.get("mode") or auto["mode"] == "off":
        return "off"
    if auto.get("held"):
        return f"{auto['mode']} held: {auto['held']}"
    if auto.get("direction") in ("up", "down"):
        return f"{auto['mode']} {auto['direction']} {auto.get('executors')}->{auto.get('targetExecutors')}"
    return f"{auto['mode']} last {auto['lastScaled']}" if auto.get("lastScaled") else f"{auto['mode']} steady"


@app.command()
def status(app_name: str = typer.Argument(..., metavar="APP"), kubeconfig: str | None = KUBECONFIG,
           context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """The application's phase and conditions, and a row per streamlet: its Spark application,
    state, executors (running / asked: an active autoscaler's target, else the spec's), restarts,
    the autoscaler (off, or its mode and what holds it or what it last did)."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        item = cluster.get(app_name)
        console = Console(soft_wrap=True, highlight=False)
        st = item.get("status") or {}
        console.print(f"application {app_name} in {cluster.namespace}: phase {st.get('phase', 'Pending')}, "
                      f"ready {st.get('ready', '-')}, generation {item['metadata'].get('generation')} "
                      f"(observed {st.get('observedGeneration', '-')})")
        for c in st.get("conditions", []):
            console.print(f"  {c.get('type')}={c.get('status')} {c.get('reason', '')}: {c.get('message', '')}")
        table = Table("STREAMLET", "SPARK APPLICATION", "STATE", "EXECUTORS", "RESTARTS", "AUTOSCALER", "CLASS", box=None,
                      pad_edge=False)
        reasons = []
        for s in item["spec"].get("streamlets", []):
            live = (st.get("streamlets") or {}).get(s["name"]) or {}
            auto = live.get("autoscaling") or {}
            asked = (auto.get("mode") == "active" and auto.get("targetExecutors")) or s.get("scale", {}).get("executors", 1)
            table.add_row(s["name"], live.get("sparkApplication", "-"), live.get("state", "PENDING"),
                          f"{live.get('executors', 0)}/{asked}", str(live.get("restarts", 0)), _autoscaler(auto),
                          s.get("className", ""))
            if auto.get("reason"):
                reasons.append(f"  {s['name']}: {auto['reason']}")
        console.print(table)
        if reasons:
            console.print("autoscaler:")
            for line in reasons:
                console.print(line)
        return EXIT_SOUND
    _exit(run)


@app.command()
def scale(app_name: str = typer.Argument(..., metavar="APP"),
          streamlet: str = typer.Argument(..., metavar="STREAMLET"),
          executors: int = typer.Argument(..., metavar="EXECUTORS", min=0, help="executors of its Spark application"),
          kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """Set the number of executors of one streamlet (spec.streamlets[].scale.executors)."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        item = cluster.get(app_name)
        spec = ApplicationSpec.model_validate(item["spec"])
        _streamlet(spec, streamlet, app_name).scale = Scale(executors=executors)
        cluster.patch_streamlets(app_name, item, spec.streamlets)
        print(f"{app_name}.{streamlet} scaled to {executors} executor{'s' if executors != 1 else ''}")
        return EXIT_SOUND
    _exit(run)


@app.command()
def configure(app_name: str = typer.Argument(..., metavar="APP"),
              conf: list[Path] = typer.Option(None, "--conf", "-c", help="config file(s); a later one wins"),
              overrides: list[str] = typer.Argument(None, metavar="[KEY=VALUE]...", show_default=False),
              kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT,
              namespace: str | None = NAMESPACE) -> None:
    """Change settings of a deployed application: streamlets.<name>.config-parameters.<key>
    (checked against the streamlet's declarations), streamlets.<name>.spark.<key> and
    streamlets.<name>.kubernetes.executor.instances. Only changed streamlets are redeployed."""
    def run() -> int:
        from ..configcheck import ConfigReadError, config_entries

        try:
            entries, problems = config_entries(conf or [], overrides or [])
        except ConfigReadError as e:
            raise CliError(str(e), EXIT_USAGE) from None
        if problems:
            raise Refused("; ".join(f"{p.file}:{p.line}: {p.message}" if p.line else p.message for p in problems))
        if not entries:
            raise Refused("nothing to configure: give --conf files or KEY=VALUE settings")
        cluster = Cluster(kubeconfig, context, namespace)
        item = cluster.get(app_name)
        spec = ApplicationSpec.model_validate(item["spec"])
        changed = sorted({_configure(spec, e, app_name) for e in entries})
        cluster.patch_streamlets(app_name, item, spec.streamlets)
        print(f"{app_name}: configured {', '.join(changed)}")
        return EXIT_SOUND
    _exit(run)


# --- helpers ---------------------------------------------------------------------------------------

def _streamlet(spec: ApplicationSpec, name: str, app_name: str) -> StreamletSpec:
    found = spec.streamlet(name)
    if found is None:
        raise Refused(f"application {app_name!r} has no streamlet {name!r} "
                      f"(it has {', '.join(s.name for s in spec.streamlets)})")
    return found


def _configure(spec: ApplicationSpec, e, app_name: str) -> str:
    """Apply one setting to the spec's streamlets; the streamlet's name. Raises Refused."""
    from streamlets.params import parameter_for

    scope = parse_scope(e.parts)
    where = f"{e.source}:{e.line}: " if e.line else ""
    if not scope.is_streamlet(CONFIG_PARAMETERS, SPARK, KUBERNETES, AUTOSCALING):
        raise Refused(f"{where}{e.key}: a running application takes streamlets.<name>.config-parameters.<key>, "
                      "streamlets.<name>.spark.<key>, streamlets.<name>.kubernetes.executor.instances or "
                      "streamlets.<name>.autoscaling.<key>")
    name = str(scope.owner)
    s = _streamlet(spec, name, app_name)
    rest = scope.item
    if scope.section == CONFIG_PARAMETERS:
        declared = {p["key"]: p for p in s.descriptor.get("config_parameters", [])}
        if rest not in declared:
            raise Refused(f"{where}{e.key}: streamlet {name!r} declares no config parameter {rest!r} "
                          f"(declared: {', '.join(declared) or 'none'})")
        try:
            parameter_for(rest, declared[rest].get("type"), declared[rest].get("pattern")).parse(e.value)
        except Exception as err:  # ConfigError: the parameter's own validation
            raise Refused(f"{where}{e.key}: {err}") from None
        value = e.value if isinstance(e.value, str) else json.dumps(e.value)
        s.config_parameters = {**(s.config_parameters or {}), rest: value}
    elif scope.section == AUTOSCALING:
        try:
            updated = s.autoscaling_settings().updated({rest: e.value})
        except AutoscaleSettingsError as err:
            raise Refused(f"{where}streamlets.{name}.{err}") from None
        s.autoscaling = AutoscalingSpec.model_validate(updated.resource())
    elif scope.section == SPARK:
        if not rest.startswith("spark."):
            raise Refused(f"{where}{e.key}: Spark settings start with spark.")
        s.spark_conf = {**(s.spark_conf or {}), rest: spark_text(e.value)}
    else:
        if rest != "executor.instances":
            raise Refused(f"{where}{e.key}: of the pod settings a running application takes executor.instances; "
                          "redeploy for the others")
        text = str(e.value).strip()
        if not text.isdigit():
            raise Refused(f"{where}{e.key}: {e.value!r} is not a whole number of executors")
        s.scale = Scale(executors=int(text))
    return name


# --- savepoints and state (the operator sends the commands on the control stream) ----------------



def _command(cluster: "Cluster", app_name: str, command: str, target: str | None, args: dict[str, str],
             timeout: float) -> list[dict]:
    """Ask the operator to send a control-stream command (annotation) and wait for its results in
    status.commands: the streamlets have `timeout` seconds to answer (the operator records
    `no-answer` for the others then); Refused if no results arrive RESULT_GRACE_SECONDS after that."""
    import time
    import uuid

    spec = ApplicationSpec.model_validate(cluster.get(app_name)["spec"])
    names = [s.name for s in spec.streamlets]
    if target is not None:
        _streamlet(spec, target, app_name)
    request = {"id": uuid.uuid4().hex, "command": command, "target": target, "args": args, "timeout": timeout}
    cluster.request(app_name, request)
    expected = {target} if target else set(names)
    deadline = time.monotonic() + timeout + RESULT_GRACE_SECONDS
    while time.monotonic() < deadline:
        entries = [e for e in (cluster.get(app_name).get("status") or {}).get("commands") or [] if e.get("id") == request["id"]]
        if {e["streamlet"] for e in entries} >= expected:
            return entries
        time.sleep(1)
    raise Refused(f"no result for {command} within {timeout + RESULT_GRACE_SECONDS:.0f} s: is the operator running? "
                  f"(kubectl describe sapp {app_name} shows its events)")


def _console() -> Console:
    # Off a terminal (scripts, CI) a wide console, so that locations are not cut short.
    return Console(soft_wrap=True, highlight=False, width=None if Console().is_terminal else 250)


def _print_results(entries: list[dict]) -> int:
    table = Table("STREAMLET", "STATUS", "BATCH IDS", "LOCATION", "MESSAGE", box=None, pad_edge=False)
    for e in sorted(entries, key=lambda e: e["streamlet"]):
        table.add_row(e["streamlet"], e["status"], ", ".join(f"{q}={b}" for q, b in (e.get("batchIds") or {}).items()),
                      e.get("location", ""), e.get("message", ""))
    _console().print(table)
    return EXIT_SOUND if all(e["status"] == "ok" for e in entries) else EXIT_PROBLEMS


TIMEOUT = typer.Option(120.0, "--timeout", min=1, max=REQUEST_TIMEOUT_MAX,
                       help="seconds the streamlets have to answer; a silent one is reported no-answer")


@app.command()
def savepoint(app_name: str = typer.Argument(..., metavar="APP"),
              streamlet: str | None = typer.Option(None, "--streamlet", "-s", help="only this streamlet [default: all]"),
              reason: str = typer.Option("kubectl", "--reason", help="recorded in the manifest"),
              timeout: float = TIMEOUT, kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT,
              namespace: str | None = NAMESPACE) -> None:
    """Take a savepoint of the running streamlets (through the operator and the control stream)."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        return _print_results(_command(cluster, app_name, "savepoint", streamlet, {"reason": reason}, timeout))
    _exit(run)


@app.command()
def savepoints(app_name: str = typer.Argument(..., metavar="APP"), kubeconfig: str | None = KUBECONFIG,
               context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """The savepoints the operator has recorded (status.savepoints), oldest first."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        taken = (cluster.get(app_name).get("status") or {}).get("savepoints") or []
        table = Table("STREAMLET", "SAVEPOINT", "TIME", "REASON", "BATCH IDS", "LOCATION", box=None, pad_edge=False)
        for s in taken:
            table.add_row(s["streamlet"], s["name"], s.get("time", ""), s.get("reason", ""),
                          ", ".join(f"{q}={b}" for q, b in (s.get("batchIds") or {}).items()), s.get("location", ""))
        _console().print(table if taken else f"no savepoints recorded for {app_name}")
        return EXIT_SOUND
    _exit(run)


@app.command()
def state(app_name: str = typer.Argument(..., metavar="APP"),
          streamlet: str = typer.Argument(..., metavar="STREAMLET"),
          fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl, parquet or csv"),
          timeout: float = TIMEOUT, kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT,
          namespace: str | None = NAMESPACE) -> None:
    """Dump a running streamlet's state (its last committed micro-batch) on the checkpoint claim."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        return _print_results(_command(cluster, app_name, "dump-state", streamlet, {"format": fmt}, timeout))
    _exit(run)


@app.command()
def restore(app_name: str = typer.Argument(..., metavar="APP"),
            streamlet: str = typer.Argument(..., metavar="STREAMLET"),
            savepoint_ref: str = typer.Argument(..., metavar="SAVEPOINT", help="a savepoint's name (from `savepoints`) or location"),
            state_partitions: int | None = typer.Option(None, "--state-partitions", min=1, help="restore with this many "
                                                        "state partitions (spec.streamlets[].statePartitions)"),
            kubeconfig: str | None = KUBECONFIG, context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """Start a streamlet from a savepoint (spec.streamlets[].restoreFrom): its driver checks the
    savepoint against the code, restores it once (repartitioned to --state-partitions), then runs."""
    def run() -> int:
        cluster = Cluster(kubeconfig, context, namespace)
        item = cluster.get(app_name)
        known = [s for s in (item.get("status") or {}).get("savepoints") or [] if s["name"] == savepoint_ref]
        location = known[-1]["location"] if known else savepoint_ref
        if not known and not location.startswith("/") and "://" not in location:
            raise Refused(f"{savepoint_ref!r} is neither a savepoint of {app_name} (see `kubectl streamlets savepoints "
                          f"{app_name}`) nor a path")
        spec = ApplicationSpec.model_validate(item["spec"])
        entry = _streamlet(spec, streamlet, app_name)
        entry.restore_from = location
        if state_partitions:
            entry.state_partitions = state_partitions
        cluster.patch_streamlets(app_name, item, spec.streamlets)
        print(f"{app_name}.{streamlet} restores from {location}"
              + (f" with {state_partitions} state partitions" if state_partitions else "") + " when it starts again")
        return EXIT_SOUND
    _exit(run)


def _explain(e: Exception) -> CliError | None:
    """The API server's refusal (409/422: exit 1, else 2) and kubeconfig or I/O errors (2)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    if isinstance(e, ApplicationNotFound):
        return Refused(str(e))
    if isinstance(e, ApiException):
        reason = e.reason
        try:
            reason = json.loads(e.body).get("message", reason)
        except Exception:
            pass
        return CliError(f"the API server said {e.status}: {reason}", EXIT_PROBLEMS if e.status in (409, 422) else EXIT_USAGE)
    if isinstance(e, (ConfigException, OSError)):
        return CliError(str(e), EXIT_USAGE)
    return None


def _exit(run) -> None:
    """Run a command body (blueprint.cli.errors.exit_with): Refused is exit 1, API and I/O errors
    exit 2 (409/422 from the API server: 1), one line each."""
    exit_with(run, explain=_explain)


def main() -> None:
    """Entry point of the `kubectl-streamlets` executable."""
    app(prog_name="kubectl streamlets")


if __name__ == "__main__":
    main()
