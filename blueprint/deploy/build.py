"""`blueprint build`: the StreamletApplication resource of a verified blueprint, for one image.

Settings are layered, highest first: command-line `key=value`, config files (in the order
given: a later file wins), the defaults the streamlets declare. The entries passed in are in
that order already (files first, overrides last): for each key the last entry wins.

    streamlets.<n>.config-parameters.<k>      -> streamlets[n].configParameters[k] (text)
    streamlets.<n>.volume-mounts.<m>          -> streamlets[n].volumeMounts[m] (a claim name)
    streamlets.<n>.<setting>                  -> streamlets[n].<setting in camelCase> (streamlets.settings:
                                                 onFailure, delivery, trigger, progressTracking), normal text
    runtimes.spark.config.<k>, then
    streamlets.<n>.spark.<k>                  -> streamlets[n].sparkConf[k]
    runtimes.spark.kubernetes.<...>, then
    streamlets.<n>.kubernetes.<...>           -> streamlets[n].driver|executor|labels|annotations,
                                                 executor.instances -> streamlets[n].scale.executors
    topics.<id>.partitions|replication-factor|config.<k> -> topics[id]
    kafka.bootstrap-servers                   -> kafka.bootstrapServers
    kafka.security.protocol|verify-hostname|sasl-mechanism|username, and
    kafka.security.<ca|cert|key|key-password|password>-secret = SECRET/KEY
                                              -> kafka.security (each secret a SecretKeyRef: the
                                                 operator mounts it; no secret value in the resource)

Nothing is rendered for a blueprint or config with errors: `build_resource` raises BuildError
with the problems `blueprint verify` would report (it runs the same checks).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..configcheck import (Entry, check_config, check_kafka_security, check_schema_registry, deploy_kafka_security,
                           deploy_schema_registry)
from .crd import API_VERSION, KIND
from .spec import (KAFKA_SECRET_FILES, REGISTRY_SECRET_FILES, ApplicationSpec, AutoscalingSpec, KafkaSecuritySpec, KafkaSpec, PodResources,
                   Scale, SchemaRegistrySpec, SecretKeyRef, StreamletSpec, TopicSpec)
from ..model import Blueprint
from ..problems import Problem, make_problem, report_order
from streamlets.autoscale import Autoscaling
from streamlets.settings import SETTINGS

from ..scopes import (AUTOSCALING, BOOTSTRAP_SERVERS, CONFIG_PARAMETERS, KAFKA, RUNTIMES, SPARK, STREAMLETS, TOPICS, VOLUME_MOUNTS, parse_scope,
                      setting_value)
from ..topics import dead_letter_topic, topic_bindings
from ..verify import Resolved, check
from ..errors import BlueprintError

DEFAULT_EXECUTORS = 1
POD_FIELDS = {"cores": "cores", "core-limit": "coreLimit", "memory": "memory", "memory-overhead": "memoryOverhead"}
# A PersistentVolumeClaim name (DNS subdomain): what a volume mount names in a cluster.
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class BuildError(BlueprintError):
    """The blueprint or its config has errors: nothing was rendered. `problems` has them all
    (warnings too), in report order."""

    def __init__(self, problems: list[Problem], file: str | Path | None = None) -> None:
        self.file = str(file) if file is not None else None  # the blueprint file, for the report
        self.problems = report_order(problems)
        self.errors = [p for p in self.problems if p.severity == "error"]
        listed = "; ".join(f"{p.code}: {p.message}" for p in self.errors)
        super().__init__(f"{len(self.errors)} error(s), nothing was built: {listed}")


class DeployInputError(BlueprintError):
    """`render_application` cannot start: a bad --image or --namespace, or a blueprint or config
    file that cannot be read. The message names the option or file (the CLIs' usage error, exit 2)."""


def render_application(file: str | Path, image: str, confs: list[Path], overrides: list[str],
                       kafka: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """The StreamletApplication of the blueprint `file` with deploy config files `confs` (a later
    one wins) and `key=value` `overrides` on top: what `blueprint build` prints and `kubectl
    streamlets deploy` applies.

    Raises DeployInputError for an empty image, a namespace that is no DNS label, or a blueprint
    or config file that cannot be read; BuildError (with `file` and every problem, in report
    order) if the blueprint, a config file or the overrides have errors. Streamlet modules
    imported here print to stderr (stdout is for the resource).
    """
    from streamlets.names import is_dns_label

    from ..configcheck import ConfigReadError, config_entries
    from ..loader import BlueprintLoadError, BlueprintReadError, load_blueprint
    from ..verify import resolve

    if not image.strip():
        raise DeployInputError("--image must name an image")
    if namespace is not None and not is_dns_label(namespace):
        raise DeployInputError(f"--namespace {namespace!r} is not a namespace name (a DNS label)")
    try:
        blueprint = load_blueprint(file)
    except BlueprintReadError as e:
        raise DeployInputError(str(e)) from None
    except BlueprintLoadError as e:
        problems = [make_problem(p.code, p.message, str(file), p.line, p.column) for p in e.problems]
        raise BuildError(problems + [make_problem(e.code, e.message, str(file), e.line, e.column)], file) from None
    try:
        entries, problems = config_entries(confs, overrides)
    except ConfigReadError as e:
        raise DeployInputError(str(e)) from None
    if problems:
        raise BuildError(problems, file)
    with contextlib.redirect_stdout(sys.stderr):  # streamlet modules may print while importing
        resolved = resolve(blueprint)
    try:
        return build_resource(blueprint, resolved, image, entries, kafka=kafka, namespace=namespace)
    except BuildError as e:
        raise BuildError(e.problems, file) from None


def build_resource(blueprint: Blueprint, resolved: Resolved, image: str, entries: list[Entry], *,
                   kafka: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """The StreamletApplication (apiVersion streamlets.io/v1alpha1) as a dict ready for YAML.

    `resolved` is `blueprint.verify.resolve(blueprint)`; `entries` are config file entries in
    the order given, then the command-line overrides. `kafka` (HOST:PORT,...) wins over
    kafka.bootstrap-servers. Raises BuildError if verify or the config check report errors,
    if no Kafka bootstrap servers are set, or if a volume mount names no valid claim; ValueError
    for an empty image.
    """
    if not isinstance(image, str) or not image.strip():
        raise ValueError("an image is required (--image)")
    if kafka is not None:  # checked like any setting, and over every other one
        entries = [*entries, Entry(("kafka", "bootstrap-servers"), kafka, "--kafka")]
    problems = check(resolved) + check_config(resolved, entries)
    if any(p.severity == "error" for p in problems):
        raise BuildError(problems)
    s = _Settings(entries)
    build_problems = s.mount_problems() + check_kafka_security(entries, deploy=True) + \
        check_schema_registry(entries, deploy=True)  # pods read Secrets only
    servers = s.bootstrap_servers
    if not servers:
        build_problems.append(make_problem(
            "missing-config-value", "kafka.bootstrap-servers is not set: the operator needs the Kafka cluster "
            "of the application", "deploy config", hint="set kafka.bootstrap-servers in a config file, "
            "as kafka.bootstrap-servers=HOST:PORT, or give --kafka HOST:PORT"))
    if build_problems:
        raise BuildError(problems + build_problems)

    app_id = blueprint.app_id
    metadata: dict[str, Any] = {"name": app_id}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {"app.kubernetes.io/name": app_id}
    spec = ApplicationSpec(
        app_id=app_id,
        image=image.strip(),
        kafka=_kafka(servers, entries),
        **({"schema_registry": registry} if (registry := _schema_registry(entries)) is not None else {}),
        upgrade_mode="last-state",
        dead_letter_topic=dead_letter_topic(blueprint),
        streamlets=[_streamlet(blueprint, resolved, name, s) for name in blueprint.streamlets],
        topics=[_topic(blueprint, topic_id, s) for topic_id in blueprint.topics],
    )
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": _descriptor_last(spec.dump())}


def _kafka(servers: str, entries: list[Entry]) -> KafkaSpec:
    """spec.kafka: the bootstrap servers, and the security when the config has any (unset, the
    operator's default applies: the chart's kafka.security)."""
    security = _kafka_security(entries)
    return KafkaSpec(bootstrap_servers=servers) if security is None else \
        KafkaSpec(bootstrap_servers=servers, security=security)


def _kafka_security(entries: list[Entry]) -> KafkaSecuritySpec | None:
    """spec.kafka.security of the deploy config's kafka.security.* (configcheck.deploy_kafka_security,
    checked by build_resource already: no error is left); None when the config has none."""
    found = deploy_kafka_security(entries)
    if found is None:
        return None
    security, refs = found
    return KafkaSecuritySpec(**_set(protocol=security.protocol, sasl_mechanism=security.sasl_mechanism,
                                    username=security.username,
                                    verify_hostname=None if security.verify_hostname else False,
                                    **_secret_key_refs(refs, KAFKA_SECRET_FILES)))


def _secret_key_refs(refs: dict[str, tuple[str, str]], secret_files: dict[str, str]) -> dict[str, SecretKeyRef]:
    """A spec's SecretKeyRef fields of the (Secret, key) pairs a deploy config names, by the model's
    file field (`secret_files`: spec field -> that file field)."""
    fields = {file: name for name, file in secret_files.items()}
    return {fields[file]: SecretKeyRef(name=name, key=key) for file, (name, key) in refs.items()}


def _set(**given: Any) -> dict[str, Any]:
    """The fields that are set: unset ones are left out of the resource."""
    return {k: v for k, v in given.items() if v is not None}


def _schema_registry(entries: list[Entry]) -> SchemaRegistrySpec | None:
    """spec.schemaRegistry of the deploy config's schema-registry.* (configcheck.deploy_schema_registry,
    checked by build_resource already); None when the config has none."""
    found = deploy_schema_registry(entries)
    if found is None:
        return None
    registry, refs = found
    return SchemaRegistrySpec(**_set(url=registry.url, username=registry.username,
                                     **_secret_key_refs(refs, REGISTRY_SECRET_FILES)))


def _descriptor_last(spec: dict[str, Any]) -> dict[str, Any]:
    """Each streamlet's descriptor last: long (schemas), and read by tools more than people."""
    for entry in spec["streamlets"]:
        entry["descriptor"] = entry.pop("descriptor")
    return spec


class _Settings:
    """The entries sorted into their scopes; a later entry for a key replaces an earlier one."""

    def __init__(self, entries: list[Entry]) -> None:
        self.params: dict[str, dict[str, Any]] = {}
        self.mounts: dict[str, dict[str, Entry]] = {}
        self.spark: dict[str | None, dict[str, Any]] = {}  # None: runtimes.spark.config
        self.kube: dict[str | None, dict[tuple[str, str], Any]] = {}  # None: runtimes.spark.kubernetes
        self.topics: dict[str, dict[str, Any]] = {}
        self.topic_config: dict[str, dict[str, Any]] = {}
        self.bootstrap_servers: str | None = None
        self.settings: dict[str, dict[str, str]] = {}  # streamlets.<name>.<setting> (streamlets.settings), normal text
        self.autoscaling: dict[str, dict[str, Any]] = {}  # streamlets.<name>.autoscaling.<key> (streamlets.autoscale)
        for e in entries:
            self._add(e)

    def _add(self, e: Entry) -> None:
        # The entries passed check_config: every key is a known scope (blueprint.scopes).
        scope = parse_scope(e.parts)
        if scope.top == STREAMLETS:
            name, section = scope.owner, scope.section
            if scope.is_streamlet_setting():
                self.settings.setdefault(name, {})[SETTINGS[section].field] = setting_value(section, e.value)
            elif section == CONFIG_PARAMETERS:
                self.params.setdefault(name, {})[scope.item] = e.value
            elif section == VOLUME_MOUNTS:
                self.mounts.setdefault(name, {})[scope.item] = e
            elif section == SPARK:
                self.spark.setdefault(name, {})[scope.item] = e.value
            elif section == AUTOSCALING:
                self.autoscaling.setdefault(name, {})[scope.item] = e.value
            else:
                self.kube.setdefault(name, {})[scope.pod_setting()] = e.value
        elif scope.top == RUNTIMES:
            if scope.section == "config":
                self.spark.setdefault(None, {})[scope.item] = e.value
            else:
                self.kube.setdefault(None, {})[scope.pod_setting()] = e.value
        elif scope.top == TOPICS:
            if scope.section == "config":
                self.topic_config.setdefault(scope.owner, {})[scope.item] = e.value
            else:
                self.topics.setdefault(scope.owner, {})[scope.section] = e.value
        elif scope.top == KAFKA and scope.section == BOOTSTRAP_SERVERS:
            value = e.value
            self.bootstrap_servers = ",".join(map(str, value)) if isinstance(value, list) else str(value).replace(" ", "")

    def kubernetes(self, name: str) -> dict[tuple[str, str], Any]:
        return {**self.kube.get(None, {}), **self.kube.get(name, {})}

    def spark_conf(self, name: str) -> dict[str, str]:
        return {k: _text(v) for k, v in {**self.spark.get(None, {}), **self.spark.get(name, {})}.items()}

    def mount_problems(self) -> list[Problem]:
        """Volume mounts set to something that is no PersistentVolumeClaim name (a local folder)."""
        return [make_problem("invalid-config-value", f"{e.key}: {e.value!r} is not a PersistentVolumeClaim name",
                             e.source, e.line, e.column,
                             "in a deploy config a volume mount names a claim (lowercase letters, digits, '-', "
                             "'.'); local folders are for `blueprint run`")
                for mounts in self.mounts.values() for e in mounts.values()
                if not (isinstance(e.value, str) and len(e.value) <= 253 and _CLAIM.match(e.value))]


def _streamlet(bp: Blueprint, r: Resolved, name: str, s: _Settings) -> StreamletSpec:
    descriptor = r.descriptors[name]
    values = s.params.get(name, {})
    params = {p.key: _text(values[p.key] if p.key in values else p.default) for p in descriptor.config_parameters
              if p.key in values or p.default is not None}
    port_topics, writers = topic_bindings(bp, name, r.classes)
    kube = s.kubernetes(name)
    pods = {role: PodResources(**{field: _text(kube[(role, key)]).strip() for key, field in POD_FIELDS.items()
                                  if (role, key) in kube})
            for role in ("driver", "executor") if any((role, key) in kube for key in POD_FIELDS)}
    optional = {  # set when not empty
        "spark_conf": s.spark_conf(name),
        "config_parameters": params,
        "volume_mounts": {m: e.value for m, e in s.mounts.get(name, {}).items()},
        "port_topics": port_topics,
        "writer_schemas": {inlet: schema_text(schema) for inlet, schema in writers.items()},
        "labels": {k: _text(v) for (kind, k), v in kube.items() if kind == "labels"},
        "annotations": {k: _text(v) for (kind, k), v in kube.items() if kind == "annotations"},
        "autoscaling": (AutoscalingSpec.model_validate(Autoscaling.from_config(s.autoscaling[name]).resource())
                        if name in s.autoscaling else None),
        # the single settings that are set (streamlets.settings): unset, the run config's default applies
        **s.settings.get(name, {}),
    }
    return StreamletSpec(
        name=name, class_name=descriptor.class_name,
        scale=Scale(executors=int(str(kube.get(("executor", "instances"), DEFAULT_EXECUTORS)).strip())),
        descriptor=_descriptor(descriptor), **pods, **{k: v for k, v in optional.items() if v})


def _descriptor(descriptor) -> dict[str, Any]:
    """The descriptor as JSON data, with each port's Avro schema as JSON text: the API server
    drops null values from objects, and an Avro field's `"default": null` makes it optional.
    Absent optional fields (None) are left out for the same reason."""
    data = descriptor.model_dump(mode="json", by_alias=True)
    for port in (*data.get("inlets", []), *data.get("outlets", [])):
        port["schema"] = schema_text(port["schema"])
    if data.get("trigger") is None:
        data.pop("trigger", None)
    for param in data.get("config_parameters", []):
        for key in ("default", "pattern"):
            if param.get(key) is None:
                param.pop(key, None)
    return data


def _topic(bp: Blueprint, topic_id: str, s: _Settings) -> TopicSpec:
    topic = bp.topics[topic_id]
    settings = s.topics.get(topic_id, {})
    replication = settings.get("replication-factor", topic.replication_factor)
    config = {**{k: _text(v) for k, v in topic.config.items()},
              **{k: _text(v) for k, v in s.topic_config.get(topic_id, {}).items()}}
    optional = {"replication_factor": int(str(replication).strip()) if replication is not None else None,
                "config": config or None}
    return TopicSpec(id=topic_id, name=topic.kafka_name(bp.app_id),
                     partitions=int(str(settings.get("partitions", topic.partitions)).strip()),
                     **{k: v for k, v in optional.items() if v is not None}, managed=topic.managed,
                     **({"schema_registry": True} if topic.schema_registry else {}),
                     producers=[ref.text for ref in topic.producers], consumers=[ref.text for ref in topic.consumers])


def schema_text(schema: dict[str, Any]) -> str:
    """An Avro schema as compact JSON text (field order kept); `json.loads` gives it back exactly."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _text(value: Any) -> str:
    """A setting as the text the runtime parses back: true/false, numbers as written, lists as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
