"""Pure functions from a StreamletApplication (its spec and metadata, as dicts) to the manifests
of its children: per streamlet a SparkApplication and a Secret with its run config, and one
PersistentVolumeClaim for the checkpoints. No API calls here: handlers.py applies what this renders.

Names: `<app>-<streamlet>` (SparkApplication), `<app>-<streamlet>-config` (Secret),
`<app>-checkpoints` (claim), where <app> is the resource's metadata.name.

The state (checkpoints, savepoints, state dumps: streamlets.runtime.layout) lives on the claim,
mounted at /checkpoints in every driver and executor, or, with spec.storage.checkpoints (or the
chart's `storage.checkpoints`), on an object store: then no claim is made, the run configs' roots
are `s3a://` URIs, the S3A settings (streamlets.runtime.object_store) go into sparkConf, and the
credentials reach the pods from the Secret of spec.storage.secretRef by secretKeyRef only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
from typing import Any

from streamlets import avro_limits
from streamlets.autoscale import AutoscaleSettingsError
from blueprint.deploy.crd import API_VERSION, GROUP, KIND, PLURAL, VERSION  # noqa: F401  (the CRD's one home)
from streamlets.runtime.layout import StateLayout
from streamlets.runtime.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV, ObjectStore
from streamlets.runtime.runconfig import METRICS_PORT, METRICS_PORT_NAME, StreamletRunConfig, scrape_annotations
from streamlets.errors import StreamletError
from blueprint.deploy.spec import (KAFKA_SECRET_FILES, REGISTRY_SECRET_FILES, ApplicationSpec, KafkaSecuritySpec, PodResources,
                                   S3ASpec, SavepointsSpec, SchemaRegistrySpec, SecretKeyRef, StorageSecretRef, StorageSpec,
                                   StreamletSpec)
from streamlets.kafka_security import KafkaSecurity
from streamlets.schema_registry import SchemaRegistry
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


# The operator's defaults for what spec.storage leaves unset (the chart's `storage` values), by field
STORAGE_DEFAULTS_ENV = {"size": "STREAMLETS_STORAGE_SIZE", "storage_class_name": "STREAMLETS_STORAGE_CLASS",
                        "access_mode": "STREAMLETS_STORAGE_ACCESS_MODE",
                        "checkpoints": "STREAMLETS_STORAGE_CHECKPOINTS"}
S3A_DEFAULTS_ENV = {"endpoint": "STREAMLETS_STORAGE_S3A_ENDPOINT", "path_style_access": "STREAMLETS_STORAGE_S3A_PATH_STYLE",
                    "region": "STREAMLETS_STORAGE_S3A_REGION"}
SECRET_DEFAULT_ENV = "STREAMLETS_STORAGE_SECRET"  # the Secret's name; its keys: StorageSecretRef's defaults
CLAIM_FIELDS = ("size", "storage_class_name", "access_mode", "existing_claim")


def storage(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> StorageSpec:
    """spec.storage with the operator's object-store defaults filled in: the chart's
    `storage.checkpoints` (and its s3a settings and Secret) apply to an application whose spec
    names neither an object store nor a claim field (a spec with a claim field keeps a claim).
    The claim's own defaults (size, class, access mode) are read where the claim is rendered."""
    env = os.environ if env is None else env
    given = spec.storage or StorageSpec()
    if given.checkpoints or any(getattr(given, f) for f in CLAIM_FIELDS):
        return given
    default = env.get(STORAGE_DEFAULTS_ENV["checkpoints"])
    if not default:
        return given
    s3a = S3ASpec(endpoint=env.get(S3A_DEFAULTS_ENV["endpoint"]) or None,
                  path_style_access=(env.get(S3A_DEFAULTS_ENV["path_style_access"]) or "").lower() == "true" or None,
                  region=env.get(S3A_DEFAULTS_ENV["region"]) or None)
    secret = env.get(SECRET_DEFAULT_ENV)
    return given.model_copy(update={"checkpoints": default, "s3a": given.s3a or s3a,
                                    "secret_ref": given.secret_ref or (StorageSecretRef(name=secret) if secret else None)})


def object_store(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> ObjectStore | None:
    """The object store of the application's state (storage(); streamlets.runtime.object_store), or
    None when the state is on the checkpoint claim."""
    st = storage(spec, env)
    if not st.checkpoints:
        return None
    s3a = st.s3a or S3ASpec()
    return ObjectStore(st.checkpoints, endpoint=s3a.endpoint, path_style_access=bool(s3a.path_style_access),
                       region=s3a.region)


def state_layout(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> StateLayout:
    """Where the runtime keeps the state: the object store's root, else the claim at /checkpoints."""
    store = object_store(spec, env)
    return store.layout() if store else CLAIM_LAYOUT


def credentials_env(ref: StorageSecretRef) -> list[dict[str, Any]]:
    """The environment variables the AWS SDK reads the credentials from ($AWS_ACCESS_KEY_ID,
    $AWS_SECRET_ACCESS_KEY: S3A's EnvironmentVariableCredentialsProvider), each from the Secret by
    secretKeyRef: the values never appear in a SparkApplication or a run config."""
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": key}}}
            for name, key in ((ACCESS_KEY_ENV, ref.access_key_id_key), (SECRET_KEY_ENV, ref.secret_access_key_key))]


def storage_problems(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> list[str]:
    """Why the state cannot go where spec.storage says (an object store without the Secret of its
    credentials, claim fields beside it, a volume mount that would be a folder of the checkpoint
    claim when there is none); empty when it can."""
    st = storage(spec, env)
    if not st.checkpoints:
        return []
    problems = []
    if st.secret_ref is None:
        problems.append(f"spec.storage.checkpoints {st.checkpoints}: set spec.storage.secretRef.name, the Secret with "
                        "the store's credentials (keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name yours in "
                        "accessKeyIdKey and secretAccessKeyKey)")
    given = [f for f in CLAIM_FIELDS if getattr(st, f)]
    if given:
        problems.append(f"spec.storage: {', '.join(given)} describe a checkpoint claim, and checkpoints "
                        f"{st.checkpoints} puts the state on an object store: set one or the other")
    for s in spec.streamlets:
        listed = s.volume_mounts or {}
        for m in s.descriptor.get("volume_mounts") or []:
            if m["name"] not in listed:
                problems.append(f"streamlet {s.name!r}: volume mount {m['name']!r} has no claim of its own: with the "
                                "state on an object store there is no checkpoint claim to hold it; map it to a claim "
                                f"(streamlets.{s.name}.volume-mounts.{m['name']} in the deploy config, "
                                "spec.streamlets[].volumeMounts)")
    return problems


# --- Kafka security (spec.kafka.security) --------------------------------------------------------

# each Secret spec.kafka.security or spec.schemaRegistry names, mounted once: <dir>/<secret>/<key>
SECRETS_DIR = "/etc/streamlets/secrets"
KAFKA_SECURITY_ENV = "STREAMLETS_KAFKA_SECURITY"  # the chart's kafka.security, as JSON in the spec's form


def kafka_security_spec(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> KafkaSecuritySpec | None:
    """spec.kafka.security, else the operator's default ($STREAMLETS_KAFKA_SECURITY, the chart's
    kafka.security as JSON), else None (PLAINTEXT). pydantic's ValidationError for a default that
    is not a KafkaSecuritySpec."""
    env = os.environ if env is None else env
    if spec.kafka.security is not None:
        return spec.kafka.security
    default = env.get(KAFKA_SECURITY_ENV)
    return KafkaSecuritySpec.model_validate_json(default) if default else None


def kafka_secret_refs(security: KafkaSecuritySpec | None) -> dict[str, SecretKeyRef]:
    """The Secret keys `security` names, by KafkaSecurity file field (ca_file, password_file...)."""
    if security is None:
        return {}
    return {file: ref for name, file in KAFKA_SECRET_FILES.items() if (ref := getattr(security, name)) is not None}


def mounted_secret(ref: SecretKeyRef) -> str:
    """Where a driver or executor finds a Secret's key: SECRETS_DIR/<secret>/<key>."""
    return f"{SECRETS_DIR}/{ref.name}/{ref.key}"


def kafka_security(spec: ApplicationSpec, env: dict[str, str] | Any = None,
                   path: Any = mounted_secret) -> KafkaSecurity:
    """The application's KafkaSecurity (streamlets.kafka_security), each secret a file: `path(ref)`,
    where the pods mount it (mounted_secret) or where the operator wrote it for its own clients
    (streamlets_operator.kafka). pydantic's ValidationError for an inconsistent combination (the
    model's rules: SASL settings without a SASL protocol, a certificate without its key...)."""
    security = kafka_security_spec(spec, env)
    if security is None:
        return KafkaSecurity()
    files = {field: path(ref) for field, ref in kafka_secret_refs(security).items()}
    return KafkaSecurity(protocol=security.protocol, sasl_mechanism=security.sasl_mechanism,
                         username=security.username,
                         verify_hostname=True if security.verify_hostname is None else security.verify_hostname,
                         **files)


REGISTRY_ENV = "STREAMLETS_SCHEMA_REGISTRY"  # the chart's schemaRegistry, as JSON in the spec's form


def schema_registry_spec(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> SchemaRegistrySpec | None:
    """spec.schemaRegistry, else the operator's default ($STREAMLETS_SCHEMA_REGISTRY, the chart's
    schemaRegistry as JSON), else None. pydantic's ValidationError for a default that is not a
    SchemaRegistrySpec."""
    env = os.environ if env is None else env
    if spec.schema_registry is not None:
        return spec.schema_registry
    default = env.get(REGISTRY_ENV)
    return SchemaRegistrySpec.model_validate_json(default) if default else None


def registry_secret_refs(spec: ApplicationSpec, env: dict[str, str] | Any = None) -> dict[str, SecretKeyRef]:
    """The Secret keys the application's schema registry (schema_registry_spec) names, by
    SchemaRegistry file field (ca_file, password_file)."""
    registry = schema_registry_spec(spec, env)
    if registry is None:
        return {}
    return {file: ref for name, file in REGISTRY_SECRET_FILES.items() if (ref := getattr(registry, name)) is not None}


def schema_registry(spec: ApplicationSpec, env: dict[str, str] | Any = None,
                    path: Any = mounted_secret) -> SchemaRegistry | None:
    """The application's SchemaRegistry (streamlets.schema_registry; schema_registry_spec), each
    secret a file `path(ref)` (where the pods mount it); None without one."""
    registry = schema_registry_spec(spec, env)
    if registry is None:
        return None
    files = {field: path(ref) for field, ref in registry_secret_refs(spec, env).items()}
    return SchemaRegistry(url=registry.url, username=registry.username, **files)


def registry_ports(spec: ApplicationSpec, name: str) -> list[str]:
    """The ports of streamlet `name` on topics with schemaRegistry (blueprint.topics.registry_ports's
    rule, on the resource), sorted."""
    return sorted({ref.split(".", 1)[1] for t in spec.topics or [] if t.schema_registry
                   for ref in (*t.producers, *t.consumers) if ref.split(".", 1)[0] == name})


def _secret_volumes(spec: ApplicationSpec, env: dict[str, str] | Any) -> tuple[list[dict], list[dict]]:
    """(volumes, mounts) of the Secrets spec.kafka.security and spec.schemaRegistry name: one volume
    per Secret with the keys used, mounted read-only at SECRETS_DIR/<secret> in the driver and the
    executors (whose Kafka and registry clients read them)."""
    keys: dict[str, set[str]] = {}
    for ref in [*kafka_secret_refs(kafka_security_spec(spec, env)).values(), *registry_secret_refs(spec, env).values()]:
        keys.setdefault(ref.name, set()).add(ref.key)
    volumes, mounts = [], []
    for i, (name, used) in enumerate(sorted(keys.items())):
        volumes.append({"name": f"secret-{i}",
                        "secret": {"secretName": name, "items": [{"key": k, "path": k} for k in sorted(used)]}})
        mounts.append({"name": f"secret-{i}", "mountPath": f"{SECRETS_DIR}/{name}", "readOnly": True})
    return volumes, mounts


def claim_name(app: str, spec: ApplicationSpec) -> str:
    """The checkpoint claim: spec.storage.existingClaim, else `<app>-checkpoints`."""
    return (spec.storage.existing_claim if spec.storage else None) or f"{app}-checkpoints"


DEFAULT_ACCESS_MODE = "ReadWriteOnce"  # the chart's storage.accessMode; most clouds' default class
NODE_TOPOLOGY_KEY = "kubernetes.io/hostname"
# The labels Spark and the Spark Operator put on the pods they start (Spark's `spark-role`:
# driver or executor; the operator's: the SparkApplication's name)
SPARK_ROLE, SPARK_APP_NAME = "spark-role", "sparkoperator.k8s.io/app-name"


def claim_access_modes(spec: ApplicationSpec, env: dict[str, str] | Any, found: list[str] | None = None) -> list[str]:
    """The checkpoint claim's access modes: `found` (those of the claim as it exists, read by the
    operator), else spec.storage.accessMode, else the operator's default
    ($STREAMLETS_STORAGE_ACCESS_MODE, the chart's storage.accessMode), else ReadWriteOnce; for an
    existing claim whose modes were not read, spec.storage.accessMode or none ([]: unknown)."""
    if found:
        return list(found)
    given = spec.storage or StorageSpec()
    if given.access_mode:
        return [given.access_mode]
    if given.existing_claim:
        return []
    return [env.get(STORAGE_DEFAULTS_ENV["access_mode"]) or DEFAULT_ACCESS_MODE]


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


def spread_affinity(app: str, streamlet: str) -> dict[str, Any]:
    """A preferred pod anti-affinity that spreads a streamlet's executors over the nodes
    (kubernetes.io/hostname), so that its tasks, and the exactly-once outlets' Kafka producers among
    them, run on as many machines as it has executors. Preferred, not required: a cluster with fewer
    nodes than executors still runs them all, some sharing a node."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {**labels(app, streamlet), SPARK_ROLE: "executor"}},
            "topologyKey": NODE_TOPOLOGY_KEY}}]}}


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

def validate(spec: dict[str, Any] | ApplicationSpec, env: dict[str, str] | None = None) -> list[str]:
    """Every reason the spec cannot be deployed (empty: it can). Checks what the CRD schema cannot:
    the spec model (blueprint.deploy.spec), unique names, Avro schemas that parse, port topics that
    name declared topics and declared ports, config parameters and volume mounts the descriptor
    declares, the object store of the state (storage_problems; `env`: the operator's defaults) and
    the run configs."""
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
        try:  # the CRD checks each field's bounds, not how they relate (max >= min, utilization band)
            s.autoscaling_settings()
        except AutoscaleSettingsError as e:
            problems.append(f"streamlet {name!r}: spec.streamlets[].{e}")
        if d.get("class_name") and s.class_name != d["class_name"]:
            problems.append(f"streamlet {name!r}: className {s.class_name!r} differs from the descriptor's "
                            f"class_name {d['class_name']!r}")
    for t in topics:
        for ref in (*t.producers, *t.consumers):
            if ref.split(".", 1)[0] not in seen:
                problems.append(f"topic {t.id!r}: {ref!r} names no streamlet of the application")
    if not problems:
        problems += storage_problems(app, env)
        try:
            kafka_security(app, env)
        except ValidationError as e:
            problems += [f"spec.kafka.security: {err['msg'].removeprefix('Value error, ')}" for err in e.errors()]
        try:
            registry = schema_registry(app, env)
        except ValidationError as e:
            problems += [f"spec.schemaRegistry: {err['msg'].removeprefix('Value error, ')}" for err in e.errors()]
        else:
            for t in topics:
                if t.schema_registry and registry is None:
                    problems.append(f"topic {t.id!r} has schemaRegistry true but spec.schemaRegistry is not set "
                                    "(nor the operator's default, the chart's schemaRegistry)")
    if not problems:
        for s in app.streamlets:
            try:
                run_config(app, s, env)
            except Exception as e:  # pydantic ValidationError and friends
                problems.append(f"streamlet {s.name!r}: invalid run config: {e}")
    return problems


# --- run config and Secret ----------------------------------------------------------------------

def run_config(spec: dict[str, Any] | ApplicationSpec, streamlet: dict[str, Any] | StreamletSpec,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """The streamlet's StreamletRunConfig as JSON data (validated by the model); its state roots
    are those of state_layout (`env`: the operator's defaults)."""
    app, s = typed(spec), _streamlet(streamlet)
    savepoints = app.savepoints or SavepointsSpec()
    layout = state_layout(app, env)
    config = StreamletRunConfig(
        app_id=app.app_id,
        streamlet=s.name,
        class_name=s.class_name,
        topics=dict(s.port_topics or {}),
        writer_schemas={k: json.loads(v) for k, v in (s.writer_schemas or {}).items()},
        bootstrap_servers=app.kafka.bootstrap_servers,
        kafka_security=kafka_security(app, env),
        schema_registry=schema_registry(app, env),
        registry_ports=registry_ports(app, s.name),
        config_parameters=dict(s.config_parameters or {}),
        volume_mounts={m["name"]: m["path"] for m in s.descriptor.get("volume_mounts") or []},
        checkpoint_root=layout.checkpoints(app.app_id, s.name),
        dead_letter_topic=app.dead_letter_topic,
        spark_conf=dict(s.spark_conf or {}),
        savepoint_root=savepoints.directory or layout.savepoints,
        state_dump_root=layout.dumps,
        savepoint_max_count=savepoints.max_count,
        savepoint_max_age_seconds=savepoints.max_age_seconds,
        restore_from=s.restore_from,
        state_partitions=s.state_partitions,
        reset_state_token=stateless_token(app, s) if app.upgrade_mode == "stateless" else None,
        **s.settings(),  # the single settings (streamlets.settings) that are set; unset ones take the run config's defaults
    )
    return config.model_dump(mode="json")


def stateless_token(spec: dict[str, Any] | ApplicationSpec, streamlet: dict[str, Any] | StreamletSpec) -> str:
    """Upgrade mode stateless: a token of what the streamlet runs (the image and its settings; scale,
    autoscaling and state partitions left out); when it changes, the driver starts without its old
    checkpoints."""
    return spec_hash({"image": typed(spec).image,
                      **{k: v for k, v in _streamlet(streamlet).dump().items()
                         if k not in ("scale", "autoscaling", "statePartitions")}})


def render_secret(body: dict[str, Any], streamlet: dict[str, Any] | StreamletSpec,
                  env: dict[str, str] | None = None) -> dict[str, Any]:
    """The Secret with a streamlet's run config (run_config as JSON under the key run.json, base64), annotated
    with the hash of its data. Raises pydantic's ValidationError for a spec or streamlet that is not valid."""
    app, streamlet = body["metadata"]["name"], _streamlet(streamlet)
    text = json.dumps(run_config(body["spec"], streamlet, env), indent=2, sort_keys=True)
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


def _volumes(app: str, claim: str | None, streamlet: StreamletSpec) -> tuple[list[dict], list[dict], list[dict]]:
    """(volumes, driver mounts, executor mounts). The checkpoint claim `claim` is mounted at /checkpoints
    (None: the state is on an object store, no claim); a volume mount the spec maps to a claim mounts
    that claim; an unlisted one gets a folder of the checkpoint claim (`volumes/<streamlet>/<mount>`;
    validate() refuses one without a checkpoint claim). A ReadWriteOncePod claim is mounted in the
    driver only: Kubernetes lets one pod use it, so an executor mounting it would never start."""
    volumes = [{"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    mounts = [{"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_DIR}] if claim else []
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


def _may_grow(streamlet: StreamletSpec) -> bool:
    """Whether the autoscaler may run more than one executor of the streamlet (mode active, no
    maximum or one above 1): its executors are spread over the nodes from the start."""
    auto = streamlet.autoscaling_settings()
    return auto.mode == "active" and (auto.settings.max_executors or 2) > 1


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
    ReadWriteOnce volume mount claim, that of the streamlet; else several executors (or an active
    autoscaler that may make them several) get spread_affinity (over the nodes). With the state on an object store
    (object_store), no claim: its S3A settings go into sparkConf (below the streamlet's own) and
    its credentials into the pods' environment (credentials_env)."""
    env = os.environ if env is None else env
    app, spec, streamlet = body["metadata"]["name"], typed(body["spec"]), _streamlet(streamlet)
    name = streamlet.name
    secret = secret or render_secret(body, streamlet, env)
    pod_labels = {**(streamlet.labels or {}), **labels(app, name)}
    pod_annotations = dict(streamlet.annotations or {})
    store = object_store(spec, env)
    volumes, driver_mounts, executor_mounts = _volumes(app, None if store else claim_name(app, spec), streamlet)
    secret_volumes, secret_mounts = _secret_volumes(spec, env)  # the Kafka and registry clients of each JVM read them
    volumes, driver_mounts, executor_mounts = (volumes + secret_volumes, driver_mounts + secret_mounts,
                                               executor_mounts + secret_mounts)
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
    secret_ref = storage(spec, env).secret_ref
    if store and secret_ref:
        driver["env"], executor["env"] = credentials_env(secret_ref), credentials_env(secret_ref)
    if not store and one_node(claim_access_modes(spec, env, claim_modes)):
        driver["affinity"] = executor["affinity"] = one_node_affinity(app)
    elif _one_node_mounts(streamlet):
        driver["affinity"] = executor["affinity"] = one_node_affinity(app, name)
    elif executors > 1 or _may_grow(streamlet):
        executor["affinity"] = spread_affinity(app, name)
    service_account = spec.service_account_name or env.get("STREAMLETS_SPARK_SERVICE_ACCOUNT")
    if service_account:
        driver["serviceAccount"] = service_account
    # No spark.jars.packages: the Kafka and Avro connectors are in the image's $SPARK_HOME/jars
    # (docker/streamlet.Dockerfile), so a pod resolves and downloads nothing when it starts.
    spark_conf = {**SPARK_METRICS_CONF, **(store.spark_conf() if store else {}), **(streamlet.spark_conf or {})}
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
    """The checkpoint claim, or None when spec.storage.existingClaim names one or the state is on an
    object store (object_store). Unset fields take the operator's defaults (STREAMLETS_STORAGE_SIZE,
    _CLASS, _ACCESS_MODE)."""
    env = os.environ if env is None else env
    app, spec = body["metadata"]["name"], typed(body["spec"])
    given = spec.storage or StorageSpec()
    if given.existing_claim or object_store(spec, env):
        return None
    claim_spec: dict[str, Any] = {
        "accessModes": claim_access_modes(spec, env),
        "resources": {"requests": {"storage": given.size or env.get(STORAGE_DEFAULTS_ENV["size"]) or "10Gi"}},
    }
    storage_class = given.storage_class_name or env.get(STORAGE_DEFAULTS_ENV["storage_class_name"])
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _metadata(body, claim_name(app, spec), None), "spec": claim_spec}


# --- everything ---------------------------------------------------------------------------------

def render_streamlet(body: dict[str, Any], streamlet: dict[str, Any] | StreamletSpec,
                     env: dict[str, str] | None = None,
                     claim_modes: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Secret, SparkApplication) of one streamlet."""
    secret = render_secret(body, streamlet, env)
    return secret, render_spark_application(body, streamlet, secret, env, claim_modes)


def render_all(body: dict[str, Any], env: dict[str, str] | None = None,
               claim_modes: list[str] | None = None) -> dict[str, Any]:
    """{'claim': PVC or None, 'streamlets': {name: (Secret, SparkApplication)}}; `claim_modes`: the
    access modes of the checkpoint claim as it exists (None: not read, or no claim yet). Raises
    SpecError with every problem if the spec is invalid or its checkpoint claim cannot hold
    checkpoints (storage_problem)."""
    env = os.environ if env is None else env
    problems = validate(body["spec"], env)
    if problems:
        raise SpecError("; ".join(problems))
    spec = typed(body["spec"])
    problem = None if object_store(spec, env) else storage_problem(claim_name(body["metadata"]["name"], spec),
                                                                     claim_access_modes(spec, env, claim_modes))
    if problem:
        raise SpecError(problem)
    return {"claim": render_claim(body, env),
            "streamlets": {s.name: render_streamlet(body, s, env, claim_modes) for s in spec.streamlets}}


def spec_hash(data: Any) -> str:
    """A short, stable hash of JSON-able `data`: the first 16 hex digits of the SHA-256 of its canonical JSON
    (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
