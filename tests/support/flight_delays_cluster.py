"""flight-delays deployed on the cluster of dev/cluster, as a user would (tests/e2e): the names,
`blueprint build` of the example, and the Deployment helper the e2e modules of the example share
(test_flight_delays_cluster.py: the state on S3 across two nodes; test_flight_delays_claim.py: the
old default, one ReadWriteOnce checkpoint claim)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from support.e2e import APPS, POLL_ERRORS, POLL_INTERVAL, REPO, pods_report
from support.spark import TEST_JAVA_OPTIONS
from support.waiting import wait_until

sys.path.insert(0, str(REPO / "examples" / "flight-delays"))

from flight_delays.prepare import BASE_MTIME, drop_file, prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

APP = "flight-delays"
EXAMPLE = REPO / "examples" / "flight-delays"
CLAIM = f"{APP}-checkpoints"
STREAMLETS = ("flights", "weather", "enrich", "stats", "files")
DATA_POD = "flight-data"
LABEL_APP = "streamlets.io/app"
# Seconds. Ten JVMs start on two cores: a driver is up in one to three minutes.
START_TIMEOUT = 600
RESULTS_TIMEOUT = 900


@functools.cache  # written once per process: every built_resource of it passes the same file
def _jvm_configs() -> tuple[Path, ...]:
    """A deploy config, first (the others override it), giving every driver and executor pod the
    tests' JVM options (support.spark) through Spark's settings for administrators,
    spark.driver.defaultJavaOptions and spark.executor.defaultJavaOptions, which Spark puts before
    the SparkApplication's own javaOptions: a dozen JVMs start on two cores. None when the
    options are "" (bench/bench_autoscale.py: the JVM's defaults)."""
    if not TEST_JAVA_OPTIONS:
        return ()
    path = Path(tempfile.mkdtemp(prefix="streamlets-e2e-jvm-")) / "jvm.conf"
    path.write_text("runtimes.spark.config {\n"
                    + "".join(f'  "spark.{role}.defaultJavaOptions" = "{TEST_JAVA_OPTIONS}"\n'
                              for role in ("driver", "executor")) + "}\n")
    return (path,)


def built_resource(blueprint: str, image: str, kafka: str, *configs: Path) -> dict:
    """`blueprint build <blueprint> --image <image> --config <each config> --kafka ...` of the
    example (later config files override earlier ones), as the StreamletApplication to apply
    (images pulled never: no registry here)."""
    args = [a for c in (*_jvm_configs(), *configs) for a in ("--config", str(c))]
    built = subprocess.run([sys.executable, "-m", "blueprint.cli", "build", str(EXAMPLE / blueprint), "--image", image,
                            *args, "--kafka", kafka, "-n", APPS], capture_output=True, text=True, timeout=300,
                           cwd=EXAMPLE)
    assert built.returncode == 0, built.stderr
    resource = yaml.safe_load(built.stdout)
    resource["spec"]["imagePullPolicy"] = "Never"  # no registry: the images are in containerd
    return resource


# The data pod's view of the volumes: /data/volumes/<streamlet>/<mount> (the checkpoint claim's
# own layout, so a data pod mounting that claim at /data sees the same folders).
VOLUMES = "/data/volumes"


class Deployment:
    """The deployed application and the helpers a test needs: kubectl, the data pod that reads
    and writes the volumes (as a user would: kubectl cp and exec), the result check.

    ``claims``: {path in the data pod: claim} it mounts (default: the checkpoint claim at /data);
    ``staging``: where a drop file waits before it is renamed into its folder, on the same claim
    (a rename, so a stream never sees half a file): "/data/staging" on the checkpoint claim, or
    None for a hidden ``.staging`` folder in the target folder itself (Spark's file source skips
    names starting with a dot), when each folder is a claim of its own."""

    def __init__(self, cluster, kafka: str, tmp: Path, *, claims: dict[str, str] | None = None,
                 staging: str | None = "/data/staging"):
        self.cluster, self.kafka, self.tmp = cluster, kafka, tmp
        self.claims = claims or {"/data": CLAIM}
        self.staging = staging
        self.months: list[int] = []

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None) -> str:
        return self.cluster.kubectl(*args, check=check, timeout=timeout, input=input).stdout

    def plugin(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """`kubectl streamlets ...` (our kubectl plugin) against the cluster."""
        return subprocess.run([sys.executable, "-m", "blueprint.cli.kubectl", *args, "-n", APPS],
                              capture_output=True, text=True, timeout=timeout, env=self.cluster.subprocess_env())

    def report(self) -> str:
        return pods_report(self.cluster, APPS)

    def pods(self, role: str | None = None) -> list[dict]:
        selector = f"{LABEL_APP}={APP}" + (f",spark-role={role}" if role else "")
        return json.loads(self.kubectl("get", "pods", "-n", APPS, "-l", selector, "-o", "json"))["items"]

    def running(self, role: str) -> dict[str, dict]:
        """streamlet -> a Running pod of that role (driver or executor)."""
        return {p["metadata"]["labels"].get("streamlets.io/streamlet"): p for p in self.pods(role)
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}

    # --- data in, results out, through a pod that mounts the claim ----------------------------

    def start_data_pod(self, image: str) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": DATA_POD, "namespace": APPS},
               "spec": {"securityContext": {"runAsUser": 185, "runAsGroup": 185, "fsGroup": 185},
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                                        "command": ["sleep", "infinity"],
                                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                                        "volumeMounts": [{"name": f"claim-{i}", "mountPath": path}
                                                         for i, path in enumerate(self.claims)]}],
                        "volumes": [{"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": claim}}
                                    for i, claim in enumerate(self.claims.values())]}}
        self.cluster.apply(pod, namespace=APPS)
        wait_until(lambda: json.loads(self.kubectl("get", "pod", DATA_POD, "-n", APPS, "-o", "json"))
                   ["status"].get("phase") == "Running", timeout=300, what="the data pod", interval=POLL_INTERVAL,
                   retry_on=POLL_ERRORS, on_timeout=self.report)

    def exec(self, script: str, timeout: float = 300) -> str:
        return self.kubectl("exec", "-n", APPS, DATA_POD, "--", "sh", "-c", script, timeout=timeout)

    def _staged(self, paths: list[Path], ingress: str) -> tuple[str, str]:
        """`paths` copied into the staging folder of `ingress`'s source folder: (staging, target)."""
        target = f"{VOLUMES}/{ingress}/source"
        staging = self.staging or f"{target}/.staging"
        self.exec(f"mkdir -p {staging} {target}")
        for path in paths:
            self.kubectl("cp", str(path), f"{APPS}/{DATA_POD}:{staging}/{path.name}", timeout=300)
        return staging, target

    def _drop(self, path: Path, ingress: str, month: int) -> None:
        """`path` staged, given the month's modification time (prepare.py's), renamed into place."""
        staging, target = self._staged([path], ingress)
        self.exec(f"touch -d @{BASE_MTIME + 60 * month} {staging}/{path.name} && mv {staging}/{path.name} {target}/")

    def feed(self, month: int, flights: str = "flights") -> None:
        """The month's weather, then its flights, into the ingresses' volume folders (`flights`:
        the ingress that takes the flights): copied to a staging folder of the claim, then renamed
        into place (a stream never sees half a file), with prepare.py's modification times."""
        local = self.tmp / "data"
        prepare(local, [month])
        for feed, ingress in (("weather", "weather"), ("flights", flights)):
            self._drop(drop_file(local, feed, month), ingress, month)
        self.months.append(month)

    def feed_paced(self, month: int, pauses: list[float]) -> None:
        """The month's weather at once, then its flights as len(pauses) files of consecutive rows
        (the file's time order), file i renamed into place pauses[i] seconds after file i - 1 (by
        a loop in the data pod, so kubectl's own latency does not pace it): a load at a set rate,
        each file about a day of flights for 30 pauses. Returns when the last file is in place."""
        local = self.tmp / "data"
        prepare(local, [month])
        self._drop(drop_file(local, "weather", month), "weather", month)
        whole = drop_file(local, "flights", month)
        header, *rows = whole.read_text().splitlines(keepends=True)
        folder = self.tmp / "paced" / f"{month:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        parts = []
        for i in range(len(pauses)):  # modification times a second apart, within the month's minute
            part = folder / f"{whole.stem}-{i:02d}.csv"
            part.write_text(header + "".join(rows[i * len(rows) // len(pauses):(i + 1) * len(rows) // len(pauses)]))
            parts.append(part)
        staging, target = self._staged(parts, "flights")
        self.exec(" && ".join(f"sleep {pause} && touch -d @{BASE_MTIME + 60 * month + i} {staging}/{part.name} "
                              f"&& mv {staging}/{part.name} {target}/"
                              for i, (pause, part) in enumerate(zip(pauses, parts, strict=True))), timeout=sum(pauses) + 120)
        self.months.append(month)

    def delete_driver_then_feed(self, streamlet: str, month: int) -> None:
        """Delete `streamlet`'s driver pod, feed `month` while it is gone, and wait for the Spark
        Operator to start a new one and for the output to equal the batch computation again."""
        old = self.running("driver")[streamlet]
        self.kubectl("delete", "pod", old["metadata"]["name"], "-n", APPS, "--wait=false")
        self.feed(month)
        wait_until(lambda: (p := self.running("driver").get(streamlet)) and p["metadata"]["uid"] != old["metadata"]["uid"],
                   timeout=START_TIMEOUT, what=f"the Spark Operator to start the {streamlet} driver again", interval=5,
                   retry_on=POLL_ERRORS, on_timeout=self.report)
        self.wait_results(f"after the {streamlet} driver was deleted")

    def undeploy(self) -> None:
        """The data pod deleted, then `kubectl streamlets undeploy`; waits until no pod of the
        application is left."""
        self.kubectl("delete", "pod", DATA_POD, "-n", APPS, "--wait=true", timeout=120)
        gone = self.plugin("undeploy", APP)
        assert gone.returncode == 0, gone.stdout + gone.stderr
        wait_until(lambda: not self.pods(), timeout=300, what="no pod of the application", interval=5,
                   retry_on=POLL_ERRORS, on_timeout=self.report)

    def results_differences(self) -> list[str] | None:
        """None while the output is incomplete, else the differences from the batch computation
        of the months fed so far (empty: equal)."""
        out = self.tmp / f"output-{time.monotonic_ns()}"
        self.kubectl("cp", f"{APPS}/{DATA_POD}:{VOLUMES}/files/output", str(out), timeout=300)
        df = load_results(out)
        expected = reference_stats(self.months)
        if df.empty or len(df) < len(expected):
            return None
        return differences(df, expected)

    def wait_results(self, what: str) -> None:
        def equal() -> bool:
            problems = self.results_differences()
            return problems is not None and not problems
        wait_until(equal, timeout=RESULTS_TIMEOUT, interval=15, retry_on=POLL_ERRORS,
                   what=f"{what}: the egress output equal to the batch computation of months {self.months}",
                   on_timeout=lambda: f"{self.results_differences()}\n{self.report()}")


