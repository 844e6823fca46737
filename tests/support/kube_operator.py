"""The operator (operator/streamlets_operator) against a real kube-apiserver and Kafka broker
(tests/k8s): the fixtures ``cluster`` (the session's API server with our CRD and the Spark
Operator's), ``built`` (the flight-delays example's StreamletApplication) and ``api`` (its
CustomObjectsApi and CoreV1Api clients), registered as a pytest plugin by tests/conftest.py; the
operator as a subprocess (:class:`Operator`); a streamlet's driver run locally from its
SparkApplication (:class:`LocalDriver`); and helpers to create and read the resources."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprint.cli import app as blueprint_cli

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamlets-operator"
CRDS = CHART / "crds"
GROUP, VERSION, PLURAL = "streamlets.io", "v1alpha1", "streamletapplications"
SPARK = ("sparkoperator.k8s.io", "v1beta2")


@pytest.fixture(scope="module")
def cluster(kube):
    kube.kubectl("apply", "-f", str(CRDS), check=True)
    kube.wait_crd_established("streamletapplications.streamlets.io")
    kube.install_spark_operator_crd()
    return kube


@pytest.fixture(scope="module")
def built(kafka_broker) -> dict:
    result = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                                "--image", "registry.example/fd:1",
                                                "--kafka", kafka_broker.bootstrap_servers])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


@pytest.fixture
def api(cluster):
    from kubernetes import client

    c = cluster.api_client()
    yield client.CustomObjectsApi(c), client.CoreV1Api(c)
    c.close()


class Operator:
    """The operator as a subprocess watching one namespace; its log is kept for failures."""

    def __init__(self, kube, namespace: str, log: Path, kubeconfig: Path | None = None, peering: str | None = None,
                 env: dict[str, str] | None = None):
        self.kube, self.namespace, self.log, self.kubeconfig = kube, namespace, log, kubeconfig
        self.peering, self.env = peering, env or {}
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Operator":
        # no operations API unless a test asks for it (test_operator_api.py): operators of one test
        # would otherwise compete for its port on the host
        env = {**self.kube.subprocess_env(), "STREAMLETS_STATUS_INTERVAL": "2", "STREAMLETS_KAFKA_TIMEOUT": "3",
               "STREAMLETS_API_PORT": "off",
               "STREAMLETS_UPGRADE_SAVEPOINT_TIMEOUT": "20", "STREAMLETS_AUTOSCALE_INTERVAL": "2",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               **self.env}
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        mode = [f"--peering={self.peering}"] if self.peering else ["--standalone"]
        out = open(self.log, "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", *mode, "-m", "streamlets_operator",
                                      "--namespace", self.namespace], env=env, stdout=out, stderr=subprocess.STDOUT,
                                     cwd=ROOT)
        out.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


def resource(built: dict, ns: str) -> dict:
    """The built application in namespace `ns`, its topics named `<ns>.<topic>` (the broker is
    shared by the whole session)."""
    r = json.loads(json.dumps(built).replace('"flight-delays.', f'"{ns}.'))
    r["metadata"]["namespace"] = ns
    return r


def apply(custom, r: dict) -> dict:
    ns = r["metadata"]["namespace"]
    return custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, r)


def get_app(custom, ns: str, name: str = "flight-delays") -> dict:
    return custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


def spark_apps(custom, ns: str) -> dict[str, dict]:
    items = custom.list_namespaced_custom_object(*SPARK, ns, "sparkapplications")["items"]
    return {i["metadata"]["labels"]["streamlets.io/streamlet"]: i for i in items}


def secrets(core, ns: str) -> dict[str, object]:
    return {s.metadata.labels["streamlets.io/streamlet"]: s
            for s in core.list_namespaced_secret(ns, label_selector="streamlets.io/app=flight-delays").items}


def claims(core, ns: str) -> list:
    return core.list_namespaced_persistent_volume_claim(ns, label_selector="streamlets.io/app=flight-delays").items


def deployed(custom, core, ns):
    return len(spark_apps(custom, ns)) == 5 and len(secrets(core, ns)) == 5 and len(claims(core, ns)) == 1


# --- the driver: the SparkApplication's own entry point and arguments, run locally ---------------

def local_mounts(spark_app: dict, secret_data: dict[str, str], root: Path) -> dict[str, Path]:
    """What the kubelet would mount in the driver pod, as local folders under `root`: mount path ->
    folder. Secrets get their files written (decoded); claims (and their subPaths) get folders."""
    import base64

    volumes = {v["name"]: v for v in spark_app["spec"]["volumes"]}
    out = {}
    for m in spark_app["spec"]["driver"]["volumeMounts"]:
        folder = root / m["name"] / m.get("subPath", "")
        folder.mkdir(parents=True, exist_ok=True)
        if "secret" in volumes[m["name"]]:
            for key, value in secret_data.items():
                (folder / key).write_bytes(base64.b64decode(value))
        out[m["mountPath"]] = folder
    return out


def in_pod(path: str, mounts: dict[str, Path]) -> str:
    """A path as the pod sees it -> the local folder mounted there (the longest mount path wins)."""
    for mount in sorted(mounts, key=len, reverse=True):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return str(mounts[mount]) + path[len(mount.rstrip("/")):]
    raise AssertionError(f"{path} is on no volume of the driver")


def as_mounted(cfg, mounts: dict[str, Path]):
    """The run config with every pod path (checkpoints, savepoints, dumps, volumes, a savepoint to
    restore) replaced by the local folder mounted there."""
    update = {"checkpoint_root": in_pod(cfg.checkpoint_root, mounts),
              "volume_mounts": {k: in_pod(v, mounts) for k, v in cfg.volume_mounts.items()}}
    for key in ("savepoint_root", "state_dump_root", "restore_from"):
        value = getattr(cfg, key)
        if value and any(value.startswith(m.rstrip("/") + "/") for m in mounts):
            update[key] = in_pod(value, mounts)
    return cfg.model_copy(update=update)


def spark_submit_args(spark_app: dict, mounts: dict[str, Path], main_file: Path) -> list[str]:
    """spark-submit's command line for the SparkApplication, as the Spark Operator builds it, with
    local[2] as the master and the pod's paths mapped to the local folders."""
    import pyspark

    from streamlets.cache import cache_root
    from streamlets.runtime.spark_session import cached_connector_jars, connector_packages, maven_mirrors, own_jars

    spec = spark_app["spec"]
    conf = dict(spec["sparkConf"])
    # A pod finds the Kafka and Avro connectors among Spark's jars (the streamlet image puts them
    # there); here they are the jars an earlier session resolved, else Spark resolves them with
    # Ivy's cache in the streamlets cache and this machine's Maven mirror. The project's own jars
    # (the exactly-once sink, the registry UDFs), which the image puts among Spark's jars too, go
    # on spark-submit's command line: what a session adds to spark.jars once its JVM runs reaches
    # the executors, not the driver's class loader, where Spark looks up a data source.
    jars = [*(cached_connector_jars() or []), *map(str, own_jars())]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if not cached_connector_jars():
        conf["spark.jars.packages"] = ",".join(connector_packages())
        conf["spark.jars.ivy"] = str(cache_root() / "ivy")
        if maven_mirrors():
            conf["spark.jars.repositories"] = ",".join(maven_mirrors())
    conf["spark.driver.memory"] = spec["driver"].get("memory", "1g")
    conf["spark.ui.enabled"] = "false"
    conf["spark.driver.extraJavaOptions"] = spec["driver"]["javaOptions"]  # as the Spark Operator does
    assert spec["mainApplicationFile"] == "local:///opt/streamlets/runner.py"
    args = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", "local[2]",
            "--name", spark_app["metadata"]["name"]]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return [*args, str(main_file), *[in_pod(a, mounts) if a.startswith("/") else a for a in spec["arguments"]]]


class LocalDriver:
    """A streamlet's driver started locally with spark-submit, as its SparkApplication and Secret
    say (read from the API server at start), with the pod's volumes as local folders."""

    def __init__(self, custom, core, ns: str, streamlet: str, root: Path, log: Path):
        from streamlets.runtime.runconfig import StreamletRunConfig

        self.spark_app = spark_apps(custom, ns)[streamlet]
        secret = core.read_namespaced_secret(self.spark_app["spec"]["volumes"][-1]["secret"]["secretName"], ns)
        self.mounts = local_mounts(self.spark_app, secret.data, root)
        run_file = Path(in_pod(self.spark_app["spec"]["arguments"][1], self.mounts))
        self.pod_config = StreamletRunConfig.read(run_file)
        self.config = as_mounted(self.pod_config, self.mounts)
        run_file.write_text(self.config.model_dump_json())
        main_file = root / "opt" / "runner.py"
        main_file.parent.mkdir(parents=True, exist_ok=True)
        main_file.write_text((ROOT / "docker" / "runner.py").read_text())
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "examples" / "flight-delays"), str(ROOT)])}
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(spark_submit_args(self.spark_app, self.mounts, main_file), env=env, stdout=out,
                                         stderr=subprocess.STDOUT, cwd=root)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]
