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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ..deploy.build import render_application
from ..deploy.crd import GROUP, PLURAL, REQUEST_ANNOTATION, VERSION
from ..scopes import CONFIG_PARAMETERS, KUBERNETES, SPARK, parse_scope, spark_text
from .errors import EXIT_PROBLEMS, EXIT_SOUND, EXIT_USAGE, CliError, command_app, exit_with

app = command_app(name="kubectl streamlets",
                  help="Deploy and operate Streamlets on Spark applications (StreamletApplication resources).")


class Refused(CliError):
    """The request cannot be done as asked (exit status 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_PROBLEMS)


class Cluster:
    """The StreamletApplication API of the kubeconfig's cluster, in one namespace."""

    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
        from kubernetes import client, config

        config.load_kube_config(config_file=kubeconfig, context=context)
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in config.list_kube_config_contexts(config_file=kubeconfig)[0]
                       if c["name"] == context), active) if context else active
        self.namespace = namespace or (chosen or {}).get("context", {}).get("namespace") or "default"
        self.api = client.CustomObjectsApi()

    def get(self, name: str) -> dict:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                raise Refused(f"no application {name!r} in namespace {self.namespace!r}") from None
            raise

    def list(self, all_namespaces: bool) -> list[dict]:
        if all_namespaces:
            return self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        return self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)["items"]

    def apply(self, resource: dict) -> str:
        """Create the resource, or replace the spec of the existing one: 'created' or 'configured'."""
        from kubernetes.client.exceptions import ApiException

        name = resource["metadata"]["name"]
        try:
            current = self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise
            self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, resource)
            return "created"
        resource = {**resource, "metadata": {**resource["metadata"],
                                             "resourceVersion": current["metadata"]["resourceVersion"]}}
        self.api.replace_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, resource)
        return "configured"

    def patch_streamlets(self, name: str, app: dict, streamlets: list[dict]) -> None:
        """Replace spec.streamlets, guarded by the resourceVersion read (a concurrent change fails)."""
        body = {"metadata": {"resourceVersion": app["metadata"]["resourceVersion"]}, "spec": {"streamlets": streamlets}}
        self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, body)

    def delete(self, name: str) -> None:
        self.get(name)  # a clear message for an unknown application
        self.api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)


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


@app.command()
def status(app_name: str = typer.Argument(..., metavar="APP"), kubeconfig: str | None = KUBECONFIG,
           context: str | None = CONTEXT, namespace: str | None = NAMESPACE) -> None:
    """The application's phase and conditions, and a row per streamlet: its Spark application,
    state, executors (running / asked), restarts."""
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
        table = Table("STREAMLET", "SPARK APPLICATION", "STATE", "EXECUTORS", "RESTARTS", "CLASS", box=None, pad_edge=False)
        for s in item["spec"].get("streamlets", []):
            live = (st.get("streamlets") or {}).get(s["name"], {})
            asked = s.get("scale", {}).get("executors", 1)
            table.add_row(s["name"], live.get("sparkApplication", "-"), live.get("state", "PENDING"),
                          f"{live.get('executors', 0)}/{asked}", str(live.get("restarts", 0)), s.get("className", ""))
        console.print(table)
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
        streamlets = item["spec"]["streamlets"]
        _streamlet(streamlets, streamlet, app_name).setdefault("scale", {})["executors"] = executors
        cluster.patch_streamlets(app_name, item, streamlets)
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
        from ..configcheck import ConfigReadError, parse_overrides, read_entries

        entries, problems = [], []
        for path in conf or []:
            try:
                entries += read_entries(path)
            except ConfigReadError as e:
                raise CliError(str(e), EXIT_USAGE) from None
        more, problems = parse_overrides(overrides or [])
        if problems:
            raise Refused("; ".join(p.message for p in problems))
        entries += more
        if not entries:
            raise Refused("nothing to configure: give --conf files or KEY=VALUE settings")
        cluster = Cluster(kubeconfig, context, namespace)
        item = cluster.get(app_name)
        streamlets = item["spec"]["streamlets"]
        changed = sorted({_configure(streamlets, e, app_name) for e in entries})
        cluster.patch_streamlets(app_name, item, streamlets)
        print(f"{app_name}: configured {', '.join(changed)}")
        return EXIT_SOUND
    _exit(run)


# --- helpers ---------------------------------------------------------------------------------------

def _streamlet(streamlets: list[dict], name: str, app_name: str) -> dict:
    for s in streamlets:
        if s["name"] == name:
            return s
    raise Refused(f"application {app_name!r} has no streamlet {name!r} "
                  f"(it has {', '.join(s['name'] for s in streamlets)})")


def _configure(streamlets: list[dict], e, app_name: str) -> str:
    """Apply one setting to the spec's streamlets; the streamlet's name. Raises Refused."""
    scope = parse_scope(e.parts)
    where = f"{e.source}:{e.line}: " if e.line else ""
    if not scope.is_streamlet(CONFIG_PARAMETERS, SPARK, KUBERNETES):
        raise Refused(f"{where}{e.key}: a running application takes streamlets.<name>.config-parameters.<key>, "
                      "streamlets.<name>.spark.<key> or streamlets.<name>.kubernetes.executor.instances")
    name = scope.owner
    s = _streamlet(streamlets, name, app_name)
    rest = scope.item
    if scope.section == CONFIG_PARAMETERS:
        declared = {p["key"]: p for p in s["descriptor"].get("config_parameters", [])}
        if rest not in declared:
            raise Refused(f"{where}{e.key}: streamlet {name!r} declares no config parameter {rest!r} "
                          f"(declared: {', '.join(declared) or 'none'})")
        try:
            _parameter(declared[rest]).parse(e.value)
        except Exception as err:  # ConfigError: the parameter's own validation
            raise Refused(f"{where}{e.key}: {err}") from None
        s.setdefault("configParameters", {})[rest] = e.value if isinstance(e.value, str) else json.dumps(e.value)
    elif scope.section == SPARK:
        if not rest.startswith("spark."):
            raise Refused(f"{where}{e.key}: Spark settings start with spark.")
        s.setdefault("sparkConf", {})[rest] = spark_text(e.value)
    else:
        if rest != "executor.instances":
            raise Refused(f"{where}{e.key}: of the pod settings a running application takes executor.instances; "
                          "redeploy for the others")
        text = str(e.value).strip()
        if not text.isdigit():
            raise Refused(f"{where}{e.key}: {e.value!r} is not a whole number of executors")
        s.setdefault("scale", {})["executors"] = int(text)
    return name


def _parameter(declared: dict[str, Any]):
    """The SDK's ConfigParameter for a descriptor's parameter entry (key, type, pattern)."""
    from streamlets import params

    kinds = {"string": params.StringParameter, "int32": params.IntegerParameter, "double": params.DoubleParameter,
             "bool": params.BooleanParameter, "duration": params.DurationParameter,
             "memorysize": params.MemorySizeParameter}
    if declared.get("pattern"):
        return params.RegExpParameter(declared["key"], pattern=declared["pattern"])
    return kinds.get(declared.get("type"), params.StringParameter)(declared["key"])


# --- savepoints and state (the operator sends the commands on the control stream) ----------------



def _command(cluster: "Cluster", app_name: str, command: str, target: str | None, args: dict[str, str],
             timeout: float) -> list[dict]:
    """Ask the operator to send a control-stream command (annotation) and wait for its results in
    status.commands; Refused if none arrive within `timeout` seconds."""
    import time
    import uuid

    item = cluster.get(app_name)
    names = [s["name"] for s in item["spec"]["streamlets"]]
    if target is not None:
        _streamlet(item["spec"]["streamlets"], target, app_name)
    request = {"id": uuid.uuid4().hex, "command": command, "target": target, "args": args}
    cluster.api.patch_namespaced_custom_object(GROUP, VERSION, cluster.namespace, PLURAL, app_name,
                                               {"metadata": {"annotations": {REQUEST_ANNOTATION: json.dumps(request)}}})
    expected = {target} if target else set(names)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = [e for e in (cluster.get(app_name).get("status") or {}).get("commands") or [] if e.get("id") == request["id"]]
        if {e["streamlet"] for e in entries} >= expected:
            return entries
        time.sleep(1)
    raise Refused(f"no result for {command} within {timeout:.0f} s: is the operator running? "
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


TIMEOUT = typer.Option(180.0, "--timeout", help="seconds to wait for the results")


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
        streamlets = item["spec"]["streamlets"]
        entry = _streamlet(streamlets, streamlet, app_name)
        entry["restoreFrom"] = location
        if state_partitions:
            entry["statePartitions"] = state_partitions
        cluster.patch_streamlets(app_name, item, streamlets)
        print(f"{app_name}.{streamlet} restores from {location}"
              + (f" with {state_partitions} state partitions" if state_partitions else "") + " when it starts again")
        return EXIT_SOUND
    _exit(run)


def _explain(e: Exception) -> CliError | None:
    """The API server's refusal (409/422: exit 1, else 2) and kubeconfig or I/O errors (2)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

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
