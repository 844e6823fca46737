"""Pure functions from a StreamletApplication (its spec and metadata, as dicts) to the manifests
of its children: per streamlet a SparkApplication and a Secret with its run config, and one
PersistentVolumeClaim for the checkpoints. No API calls here: handlers.py applies what this renders.

Names: `<app>-<streamlet>` (SparkApplication), `<app>-<streamlet>-config` (Secret),
`<app>-checkpoints` (claim), where <app> is the resource's metadata.name.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
from typing import Any

from streamlets import avro_limits
from blueprint.deploy.crd import API_VERSION, GROUP, KIND, PLURAL, VERSION  # noqa: F401  (the CRD's one home)
from streamlets.runtime.layout import StateLayout
from streamlets.runtime.runconfig import METRICS_PORT, METRICS_PORT_NAME, StreamletRunConfig, scrape_annotations
from streamlets.errors import StreamletError
from blueprint.deploy.spec import ApplicationSpec, PodResources, SavepointsSpec, StorageSpec, StreamletSpec
from pydantic import ValidationError

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
SPARK_API_VERSION = f"{SPARK_GROUP}/{SPARK_VERSION}"

LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_APP = "streamlets.io/app"
LABEL_STREAMLET = "streamlets.io/streamlet"
ANNOTATION_HASH = "streamlets.io/spec-hash"
MANAGER = "streamlets-operator"

SPARK_RUNTIME_VERSION = "4.2.0"
MAIN_FILE = "local:///opt/streamlets/runner.py"
CONFIG_DIR = "/etc/streamlets"
CONFIG_KEY = "run.json"
CHECKPOINT_DIR = "/checkpoints"
# The checkpoint claim's folders (streamlets.runtime.layout): as mounted at CHECKPOINT_DIR, and
# relative to the claim (volume subPaths).
CLAIM_LAYOUT = StateLayout(CHECKPOINT_DIR, checkpoint_folder="")
IN_CLAIM = StateLayout("", checkpoint_folder="")
CHECKPOINT_VOLUME = "checkpoints"
CONFIG_VOLUME = "streamlet-config"
# Metrics (README, "Metrics on a cluster"). Spark's own, through its PrometheusServlet on the driver
# UI's port (4040, the container port Spark itself names `spark-ui` on the driver pod): the driver's
# and streaming queries' metrics at /metrics/prometheus, the executors' at
# /metrics/executors/prometheus. A stable metrics namespace keeps the metric names from carrying
# the Spark application id, which changes with every restart. A streamlet's sparkConf overrides these.
SPARK_UI_PORT, SPARK_UI_PORT_NAME = 4040, "spark-ui"
SPARK_METRICS_CONF = {
    "spark.ui.enabled": "true",
    "spark.ui.prometheus.enabled": "true",
    "spark.metrics.namespace": "streamlets",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.metrics.conf.master.sink.prometheusServlet.path": "/metrics/master/prometheus",
    "spark.metrics.conf.applications.sink.prometheusServlet.path": "/metrics/applications/prometheus",
}
# Ours: the driver serves streamlets.runtime.metrics on a named container port (the Spark
# Operator's webhook adds driver.ports to the pod), announced by the prometheus.io annotations.
# `spark-ui` is not repeated here: a second port of that name would make the pod invalid.
DRIVER_PORTS = ({"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"},)
RESTART_POLICY = {"type": "OnFailure", "onFailureRetries": 3, "onFailureRetryInterval": 10,
                  "onSubmissionFailureRetries": 5, "onSubmissionFailureRetryInterval": 20}


class SpecError(StreamletError, ValueError):
    """The spec cannot be deployed (it passed the CRD schema, but is inconsistent)."""


# --- names --------------------------------------------------------------------------------------

def spark_app_name(app: str, streamlet: str) -> str:
    """The name of a streamlet's SparkApplication (and its driver's spark-app-name label):
    `<app>-<streamlet>`."""
    return f"{app}-{streamlet}"


def secret_name(app: str, streamlet: str) -> str:
    """The name of the Secret with a streamlet's run config: `<app>-<streamlet>-config`."""
    return f"{app}-{streamlet}-config"


def claim_name(app: str, spec: ApplicationSpec) -> str:
    """The checkpoint claim: spec.storage.existingClaim, else `<app>-checkpoints`."""
    return (spec.storage.existing_claim if spec.storage else None) or f"{app}-checkpoints"


DEFAULT_ACCESS_MODE = "ReadWriteOnce"  # the chart's storage.accessMode; most clouds' default class
NODE_TOPOLOGY_KEY = "kubernetes.io/hostname"


def claim_access_modes(spec: ApplicationSpec, env: dict[str, str] | Any, found: list[str] | None = None) -> list[str]:
    """The checkpoint claim's access modes: `found` (those of the claim as it exists, read by the
    operator), else spec.storage.accessMode, else the operator's default
    ($STREAMLETS_STORAGE_ACCESS_MODE, the chart's storage.accessMode), else ReadWriteOnce; for an
    existing claim whose modes were not read, spec.storage.accessMode or none ([]: unknown)."""
    if found:
        return list(found)
    storage = spec.storage or StorageSpec()
    if storage.access_mode:
        return [storage.access_mode]
    if storage.existing_claim:
        return []
    return [env.get("STREAMLETS_STORAGE_ACCESS_MODE") or DEFAULT_ACCESS_MODE]


def storage_problem(claim: str, modes: list[str]) -> str | None:
    """Why the checkpoint claim cannot hold an application's checkpoints, or None. Every driver and
    executor of every streamlet writes there (Spark's state stores write from the executors), so
    it must be writable by several pods: ReadWriteOncePod admits one pod, ReadOnlyMany no writer."""
    if not modes or {"ReadWriteMany", "ReadWriteOnce"} & set(modes):
        return None
    return (f"the checkpoint claim {claim} is {', '.join(modes)}: every driver and executor of the application "
            "writes checkpoints there, so it must be ReadWriteMany (pods on any node) or ReadWriteOnce (the "
            "application's pods kept on one node); or put the checkpoints on an object store")


def one_node(modes: list[str]) -> bool:
    """Whether the application's pods must share a node: a ReadWriteOnce checkpoint claim is attached
    to one node at a time (pods elsewhere would wait in ContainerCreating: Multi-Attach error)."""
    return "ReadWriteOnce" in modes and "ReadWriteMany" not in modes


def one_node_affinity(app: str, streamlet: str | None = None) -> dict[str, Any]:
    """A pod affinity that schedules a pod on the node of the application's other pods (of one
    streamlet's, given `streamlet`); the first goes anywhere: Kubernetes lets a pod that matches its
    own term start where none runs."""
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels(app, streamlet) if streamlet else {LABEL_APP: app}},
         "topologyKey": NODE_TOPOLOGY_KEY}]}}


def _one_node_mounts(streamlet: StreamletSpec) -> list[str]:
    """The streamlet's volume mounts mapped to claims of their own that are ReadWriteOnce: its
    driver and executors mount them, so they must share a node."""
    listed = streamlet.volume_mounts or {}
    return [m["name"] for m in streamlet.descriptor.get("volume_mounts") or []
            if m["name"] in listed and m.get("access_mode") == "ReadWriteOnce"]


def typed(spec: dict[str, Any] | ApplicationSpec) -> ApplicationSpec:
    """The spec as its model (blueprint.deploy.spec); pydantic's ValidationError if it is none."""
    return spec if isinstance(spec, ApplicationSpec) else ApplicationSpec.model_validate(spec)


def _streamlet(streamlet: dict[str, Any] | StreamletSpec) -> StreamletSpec:
    return StreamletSpec.model_validate(streamlet) if isinstance(streamlet, dict) else streamlet


# --- metadata -----------------------------------------------------------------------------------

def owner_reference(body: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to the StreamletApplication `body` (controller, blocking its deletion), for the
    children the operator creates."""
    meta = body["metadata"]
    return {"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def labels(app: str, streamlet: str | None = None) -> dict[str, str]:
    """The labels of the application's children: app.kubernetes.io/part-of, managed-by and the app label, plus
    the streamlet label when `streamlet` is given."""
    out = {LABEL_PART_OF: app, LABEL_MANAGED_BY: MANAGER, LABEL_APP: app}
    if streamlet is not None:
        out[LABEL_STREAMLET] = streamlet
    return out


def _metadata(body: dict[str, Any], name: str, streamlet: str | None, annotations: dict[str, str] | None = None):
    meta = body["metadata"]
    out: dict[str, Any] = {"name": name, "namespace": meta.get("namespace"),
                           "labels": labels(meta["name"], streamlet), "ownerReferences": [owner_reference(body)]}
    if annotations:
        out["annotations"] = annotations
    return out


# --- validation ---------------------------------------------------------------------------------

def validate(spec: dict[str, Any] | ApplicationSpec) -> list[str]:
    """Every reason the spec cannot be deployed (empty: it can). Checks what the CRD schema cannot:
    the spec model (blueprint.deploy.spec), unique names, Avro schemas that parse, port topics that
    name declared topics and declared ports, config parameters and volume mounts the descriptor
    declares, and the run configs."""
    try:
        app = typed(spec)
    except ValidationError as e:
        return [f"spec.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
    problems: list[str] = []
    topics = app.topics or []
    seen: set[str] = set()
    for s in app.streamlets:
        if s.name in seen:
            problems.append(f"streamlet name {s.name!r} is used twice")
        seen.add(s.name)
    for key in ("id", "name"):
        values = [getattr(t, key) for t in topics]
        for dup in sorted({v for v in values if values.count(v) > 1}):
            problems.append(f"topic {key} {dup!r} is used twice")
    topic_names = {t.name for t in topics}
    if app.dead_letter_topic:
        topic_names.add(app.dead_letter_topic)
    from streamlets.runtime.system_topics import control_topic  # a ControlInlet reads the control topic

    topic_names.add(control_topic(app.app_id))
    for s in app.streamlets:
        name, d = s.name, s.descriptor
        ports = {}
        for kind in ("inlets", "outlets"):
            for p in d.get(kind) or []:
                ports[p.get("name")] = kind[:-1]
                try:
                    parsed = json.loads(p.get("schema", ""))
                except ValueError as e:
                    problems.append(f"streamlet {name!r}: the schema of {kind[:-1]} {p.get('name')!r} is not JSON: {e}")
                    continue
                if not isinstance(parsed, (dict, list, str)):
                    problems.append(f"streamlet {name!r}: the schema of {kind[:-1]} {p.get('name')!r} is not an Avro schema")
        for inlet, text in (s.writer_schemas or {}).items():
            try:
                json.loads(text)
            except ValueError as e:
                problems.append(f"streamlet {name!r}: writer schema of inlet {inlet!r} is not JSON: {e}")
            if ports.get(inlet) != "inlet":
                problems.append(f"streamlet {name!r}: writerSchemas names {inlet!r}, which is no inlet of {d.get('class_name')}")
        for port, topic in (s.port_topics or {}).items():
            if port not in ports:
                problems.append(f"streamlet {name!r}: portTopics names port {port!r}, which {d.get('class_name')} does not declare")
            if topic not in topic_names:
                problems.append(f"streamlet {name!r}: port {port!r} is bound to topic {topic!r}, which spec.topics does not list")
        declared = {p.get("key") for p in d.get("config_parameters") or []}
        for key in s.config_parameters or {}:
            if key not in declared:
                problems.append(f"streamlet {name!r}: config parameter {key!r} is not declared by {d.get('class_name')}")
        mounts = {m.get("name") for m in d.get("volume_mounts") or []}
        for m in s.volume_mounts or {}:
            if m not in mounts:
                problems.append(f"streamlet {name!r}: volume mount {m!r} is not declared by {d.get('class_name')}")
        if d.get("class_name") and s.class_name != d["class_name"]:
            problems.append(f"streamlet {name!r}: className {s.class_name!r} differs from the descriptor's "
                            f"class_name {d['class_name']!r}")
    for t in topics:
        for ref in (*t.producers, *t.consumers):
            if ref.split(".", 1)[0] not in seen:
                problems.append(f"topic {t.id!r}: {ref!r} names no streamlet of the application")
    if not problems:
        for s in app.streamlets:
            try:
                run_config(app, s)
            except Exception as e:  # pydantic ValidationError and friends
                problems.append(f"streamlet {s.name!r}: invalid run config: {e}")
    return problems


# --- run config and Secret ----------------------------------------------------------------------

def run_config(spec: dict[str, Any] | ApplicationSpec, streamlet: dict[str, Any] | StreamletSpec) -> dict[str, Any]:
    """The streamlet's StreamletRunConfig as JSON data (validated by the model)."""
    app, s = typed(spec), _streamlet(streamlet)
    savepoints = app.savepoints or SavepointsSpec()
    config = StreamletRunConfig(
        app_id=app.app_id,
        streamlet=s.name,
        class_name=s.class_name,
        topics=dict(s.port_topics or {}),
        writer_schemas={k: json.loads(v) for k, v in (s.writer_schemas or {}).items()},
        bootstrap_servers=app.kafka.bootstrap_servers,
        config_parameters=dict(s.config_parameters or {}),
        volume_mounts={m["name"]: m["path"] for m in s.descriptor.get("volume_mounts") or []},
        checkpoint_root=CLAIM_LAYOUT.checkpoints(app.app_id, s.name),
        dead_letter_topic=app.dead_letter_topic,
        spark_conf=dict(s.spark_conf or {}),
        savepoint_root=savepoints.directory or CLAIM_LAYOUT.savepoints,
        state_dump_root=CLAIM_LAYOUT.dumps,
        savepoint_max_count=savepoints.max_count,
        savepoint_max_age_seconds=savepoints.max_age_seconds,
        restore_from=s.restore_from,
        state_partitions=s.state_partitions,
        reset_state_token=stateless_token(app, s) if app.upgrade_mode == "stateless" else None,
        **s.settings(),  # the single settings (streamlets.settings) that are set; unset ones take the run config's defaults
    )
    return config.model_dump(mode="json")


def stateless_token(spec: dict[str, Any] | ApplicationSpec, streamlet: dict[str, Any] | StreamletSpec) -> str:
    """Upgrade mode stateless: a token of what the streamlet runs (the image and its settings,
    scale and state partitions left out); when it changes, the driver starts without its old checkpoints."""
    return spec_hash({"image": typed(spec).image,
                      **{k: v for k, v in _streamlet(streamlet).dump().items() if k not in ("scale", "statePartitions")}})


def render_secret(body: dict[str, Any], streamlet: dict[str, Any] | StreamletSpec) -> dict[str, Any]:
    """The Secret with a streamlet's run config (run_config as JSON under the key run.json, base64), annotated
    with the hash of its data. Raises pydantic's ValidationError for a spec or streamlet that is not valid."""
    app, streamlet = body["metadata"]["name"], _streamlet(streamlet)
    text = json.dumps(run_config(body["spec"], streamlet), indent=2, sort_keys=True)
    data = {CONFIG_KEY: base64.b64encode(text.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _metadata(body, secret_name(app, streamlet.name), streamlet.name,
                                  {ANNOTATION_HASH: spec_hash(data)}),
            "data": data}


# --- SparkApplication ---------------------------------------------------------------------------

def _pod(settings: PodResources | None) -> dict[str, Any]:
    """driver/executor settings of the spec -> SparkApplication fields (cores is an integer there:
    fractional CPUs become coreRequest)."""
    given = (settings or PodResources()).dump()
    out: dict[str, Any] = {"cores": 1}
    cores = given.get("cores")
    if cores:
        value = float(cores[:-1]) / 1000 if cores.endswith("m") else float(cores)
        out["cores"] = max(1, math.ceil(value))
        out["coreRequest"] = cores
    for key in ("coreLimit", "memory", "memoryOverhead"):
        if given.get(key):
            out[key] = given[key]
    return out


def _volumes(app: str, claim: str, streamlet: StreamletSpec) -> tuple[list[dict], list[dict], list[dict]]:
    """(volumes, driver mounts, executor mounts). The checkpoint claim `claim` is mounted at /checkpoints;
    a volume mount the spec maps to a claim mounts that claim; an unlisted one gets a folder of the
    checkpoint claim (`volumes/<streamlet>/<mount>`). A ReadWriteOncePod claim is mounted in the
    driver only: Kubernetes lets one pod use it, so an executor mounting it would never start."""
    volumes = [{"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": claim}}]
    mounts = [{"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_DIR}]
    driver_only = []
    listed = streamlet.volume_mounts or {}
    for i, m in enumerate(streamlet.descriptor.get("volume_mounts") or []):
        read_only = m.get("access_mode") == "ReadOnlyMany"
        if m["name"] in listed:
            vol = f"mount-{i}"
            volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": listed[m["name"]], "readOnly": read_only}})
            mount = {"name": vol, "mountPath": m["path"], "readOnly": read_only}
            (driver_only if m.get("access_mode") == "ReadWriteOncePod" else mounts).append(mount)
        else:
            mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": m["path"],
                           "subPath": IN_CLAIM.volume(streamlet.name, m["name"])})
    volumes.append({"name": CONFIG_VOLUME, "secret": {"secretName": secret_name(app, streamlet.name)}})
    driver_mounts = [*mounts, *driver_only, {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
    return volumes, driver_mounts, mounts


def render_spark_application(body: dict[str, Any], streamlet: dict[str, Any] | StreamletSpec,
                             secret: dict[str, Any] | None = None,
                             env: dict[str, str] | None = None,
                             claim_modes: list[str] | None = None) -> dict[str, Any]:
    """The streamlet's SparkApplication, annotated with the hash of its spec and its Secret's data.
    The driver runs as spec.serviceAccountName, else as $STREAMLETS_SPARK_SERVICE_ACCOUNT (the
    chart's `sparkServiceAccount`: a ServiceAccount whose Role lets a driver create its executor
    pods, services and config maps; Spark's spark.kubernetes.authenticate.driver.serviceAccountName).
    With a ReadWriteOnce checkpoint claim (claim_access_modes, `claim_modes` as read from the
    cluster), the driver and executors get one_node_affinity of the application; else with a
    ReadWriteOnce volume mount claim, that of the streamlet."""
    env = os.environ if env is None else env
    app, spec, streamlet = body["metadata"]["name"], typed(body["spec"]), _streamlet(streamlet)
    name = streamlet.name
    secret = secret or render_secret(body, streamlet)
    pod_labels = {**(streamlet.labels or {}), **labels(app, name)}
    pod_annotations = dict(streamlet.annotations or {})
    volumes, driver_mounts, executor_mounts = _volumes(app, claim_name(app, spec), streamlet)
    executors = streamlet.scale.executors
    # the driver is scraped (the streamlet's own annotations win); executors are not: their
    # metrics reach Prometheus through the driver (/metrics/executors/prometheus)
    driver = {**_pod(streamlet.driver), "labels": pod_labels, "volumeMounts": driver_mounts,
              "annotations": {**scrape_annotations(METRICS_PORT), **pod_annotations},
              "ports": [dict(p) for p in DRIVER_PORTS]}
    executor = {**_pod(streamlet.executor), "instances": max(1, executors), "labels": pod_labels,
                "volumeMounts": executor_mounts}
    if pod_annotations:
        executor["annotations"] = pod_annotations
    if one_node(claim_access_modes(spec, env, claim_modes)):
        driver["affinity"] = executor["affinity"] = one_node_affinity(app)
    elif _one_node_mounts(streamlet):
        driver["affinity"] = executor["affinity"] = one_node_affinity(app, name)
    service_account = spec.service_account_name or env.get("STREAMLETS_SPARK_SERVICE_ACCOUNT")
    if service_account:
        driver["serviceAccount"] = service_account
    # No spark.jars.packages: the Kafka and Avro connectors are in the image's $SPARK_HOME/jars
    # (docker/streamlet.Dockerfile), so a pod resolves and downloads nothing when it starts.
    spark_conf = {**SPARK_METRICS_CONF, **(streamlet.spark_conf or {})}
    if streamlet.state_partitions:  # a fresh query starts with them too (its first batch pins them)
        spark_conf["spark.sql.shuffle.partitions"] = str(streamlet.state_partitions)
    # Avro's allocation limits in the driver's and the executors' JVMs (streamlets.avro_limits).
    # The Spark Operator turns javaOptions into spark.*.extraJavaOptions after sparkConf, so the
    # user's own options of sparkConf are carried along with the limits.
    for pod, key in ((driver, "spark.driver.extraJavaOptions"), (executor, "spark.executor.extraJavaOptions")):
        pod["javaOptions"] = avro_limits.with_limits(spark_conf.get(key))
        if key in spark_conf:
            spark_conf[key] = pod["javaOptions"]
    sa_spec: dict[str, Any] = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "mainApplicationFile": MAIN_FILE,
        "arguments": ["--config", f"{CONFIG_DIR}/{CONFIG_KEY}"],
        "sparkVersion": SPARK_RUNTIME_VERSION,
        "sparkConf": spark_conf,
        "restartPolicy": dict(RESTART_POLICY),
        "volumes": volumes,
        "driver": driver,
        "executor": executor,
    }
    if executors == 0:  # scaled to zero: the Spark Operator keeps the application, suspended
        sa_spec["suspend"] = True
    digest = spec_hash({"spec": sa_spec, "secret": secret["data"]})
    return {"apiVersion": SPARK_API_VERSION, "kind": "SparkApplication",
            "metadata": _metadata(body, spark_app_name(app, name), name, {ANNOTATION_HASH: digest}),
            "spec": sa_spec}


# --- PersistentVolumeClaim ----------------------------------------------------------------------

def render_claim(body: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The checkpoint claim, or None when spec.storage.existingClaim names one. Unset fields take
    the operator's defaults (STREAMLETS_STORAGE_SIZE, _CLASS, _ACCESS_MODE)."""
    env = os.environ if env is None else env
    app, spec = body["metadata"]["name"], typed(body["spec"])
    storage = spec.storage or StorageSpec()
    if storage.existing_claim:
        return None
    claim_spec: dict[str, Any] = {
        "accessModes": claim_access_modes(spec, env),
        "resources": {"requests": {"storage": storage.size or env.get("STREAMLETS_STORAGE_SIZE") or "10Gi"}},
    }
    storage_class = storage.storage_class_name or env.get("STREAMLETS_STORAGE_CLASS")
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _metadata(body, claim_name(app, spec), None), "spec": claim_spec}


# --- everything ---------------------------------------------------------------------------------

def render_streamlet(body: dict[str, Any], streamlet: dict[str, Any] | StreamletSpec,
                     env: dict[str, str] | None = None,
                     claim_modes: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Secret, SparkApplication) of one streamlet."""
    secret = render_secret(body, streamlet)
    return secret, render_spark_application(body, streamlet, secret, env, claim_modes)


def render_all(body: dict[str, Any], env: dict[str, str] | None = None,
               claim_modes: list[str] | None = None) -> dict[str, Any]:
    """{'claim': PVC or None, 'streamlets': {name: (Secret, SparkApplication)}}; `claim_modes`: the
    access modes of the checkpoint claim as it exists (None: not read, or no claim yet). Raises
    SpecError with every problem if the spec is invalid or its checkpoint claim cannot hold
    checkpoints (storage_problem)."""
    problems = validate(body["spec"])
    if problems:
        raise SpecError("; ".join(problems))
    spec = typed(body["spec"])
    env = os.environ if env is None else env
    problem = storage_problem(claim_name(body["metadata"]["name"], spec), claim_access_modes(spec, env, claim_modes))
    if problem:
        raise SpecError(problem)
    return {"claim": render_claim(body, env),
            "streamlets": {s.name: render_streamlet(body, s, env, claim_modes) for s in spec.streamlets}}


def spec_hash(data: Any) -> str:
    """A short, stable hash of JSON-able `data`: the first 16 hex digits of the SHA-256 of its canonical JSON
    (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
