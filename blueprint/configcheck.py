"""Checking a run or deploy config file, and `key=value` overrides, against a resolved blueprint.

Config files are HOCON (Cloudflow's format; `.conf`, `.hocon`), YAML (`.yaml`, `.yml`) or JSON.
The scopes are Cloudflow's, without its `cloudflow.` prefix:

    streamlets.<name>.config-parameters.<key> = value    a declared parameter: typed and validated
    streamlets.<name>.volume-mounts.<mount> = text       a declared mount: local folder or PVC name
    streamlets.<name>.on-failure = stop|quarantine       a failed query: stays failed, or its poison records
                                                         are quarantined (streamlets.runtime.quarantine)
    streamlets.<name>.spark.<spark.* key> = value        Spark settings of that streamlet
    streamlets.<name>.kubernetes.driver|executor.cores|core-limit|memory|memory-overhead = value
    streamlets.<name>.kubernetes.executor.instances = n  executors (the streamlet's scale)
    streamlets.<name>.kubernetes.labels|annotations.<k> = text
    streamlets.<name>.delivery = exactly-once|at-least-once  its Kafka outlets (default exactly-once)
    streamlets.<name>.trigger = "real-time 5 seconds"    micro-batch | processing-time <d> | real-time [<d>]
    streamlets.<name>.progress-tracking = sync|async [<interval>]
                                                         micro-batch progress (async: at-least-once Kafka to
                                                         Kafka only; streamlets.runtime.progress_tracking)
    runtimes.spark.config.<spark.* key> = value          every Spark streamlet
    runtimes.spark.kubernetes.<as above>                 every Spark streamlet
    topics.<id>.partitions|replication-factor = n        a topic of the blueprint
    topics.<id>.config.<Kafka topic config> = value
    kafka.bootstrap-servers = "host:port,..."
    kafka.security.<key> = value                         how Kafka clients connect: protocol, ca-file,
                                                         verify-hostname, cert-file, key-file, key-password-file|env,
                                                         sasl-mechanism, username, password-file|env
                                                         (streamlets.kafka_security; files relative to the config file);
                                                         in a deploy config each secret a key of a Kubernetes Secret:
                                                         ca-secret, cert-secret, key-secret, key-password-secret,
                                                         password-secret = SECRET/KEY (spec.kafka.security)
    kafka.embedded-broker.security = none|sasl-ssl|mtls  `blueprint run`'s own broker, secured
    schema-registry.<key> = value                        the registry of `schema-registry: true` topics: url,
                                                         ca-file, username, password-file|env
                                                         (streamlets.schema_registry; `blueprint run`, `verify`)

`check_config` reports every unknown key, wrong type and failing value at once, with the file,
line and column where the file has them (HOCON positions are found again in the text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml
from yaml.constructor import SafeConstructor

from pydantic import ValidationError

from streamlets.errors import ConfigError
from streamlets.schema_registry import CONFIG_KEYS as REGISTRY_KEYS
from streamlets.schema_registry import LOCAL_KEYS as REGISTRY_LOCAL_KEYS
from streamlets.schema_registry import PATH_KEYS as REGISTRY_PATH_KEYS
from streamlets.schema_registry import SECRET_KEYS as REGISTRY_SECRET_KEYS
from streamlets.schema_registry import SchemaRegistry
from streamlets.kafka_security import CONFIG_KEYS, LOCAL_KEYS, PATH_KEYS, SECRET_KEYS, KafkaSecurity, secret_ref
from streamlets.runtime.object_store import STORAGE_KEYS, StorageConfigError, object_store
from streamlets.settings import ASYNC, AT_LEAST_ONCE, SETTINGS, parse_progress_tracking

from .errors import BlueprintLoadError
from .nodes import compose
from .problems import Problem, make_problem
from .scopes import (AUTOSCALING, BOOTSTRAP_SERVERS, EMBEDDED_BROKER, EMBEDDED_BROKER_SECURITY, KAFKA, KAFKA_SECURITY,
                     CONFIG_PARAMETERS, DELIVERY, KUBERNETES, ON_FAILURE, PROGRESS_TRACKING, STREAMLET_SETTINGS, TRIGGER,
                     POD_KEYS, POD_METADATA, POD_ROLES, RUNTIME_SECTIONS,
                     RUNTIMES, SCHEMA_REGISTRY, SPARK, STORAGE, STREAMLET_SECTIONS, STREAMLETS, TOP_LEVEL, TOPIC_SETTINGS, TOPICS,
                     VOLUME_MOUNTS, parse_scope, setting_value)
from .verify import Resolved
from .errors import BlueprintError

_MEMORY = re.compile(r"^[0-9]+[kmgtp]?b?$", re.IGNORECASE)  # Spark's memory strings: 512m, 2g
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m)?$")  # Kubernetes CPU quantities: 1, 0.5, 1200m
_SERVERS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:[0-9]+(,[A-Za-z0-9.\-\[\]:]+:[0-9]+)*$")


COMMAND_LINE = "command line"  # the source of `key=value` overrides


class ConfigReadError(BlueprintError):
    """The config file cannot be read (missing, a folder, unreadable)."""


@dataclass(frozen=True)
class Entry:
    """One setting: its dotted key split into parts, its value, where it was written."""

    parts: tuple[str, ...]
    value: Any
    source: str
    line: int | None = None
    column: int | None = None

    @property
    def key(self) -> str:
        """The dotted key, e.g. `streamlets.stats.delivery` (the parts joined with dots)."""
        return ".".join(self.parts)


def read_entries(path: Path) -> list[Entry]:
    """The settings of a config file, flattened to leaf values with their positions.

    Raises ConfigReadError if the file cannot be read, BlueprintLoadError (code malformed-config)
    if it is not HOCON, YAML or JSON or not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigReadError(f"{path}: cannot read config: {getattr(e, 'strerror', None) or e}") from None
    try:
        root = compose(path, text)
    except BlueprintLoadError as e:
        raise BlueprintLoadError(e.message, path, e.line, e.column, "malformed-config") from None
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise BlueprintLoadError("a config file must be a mapping with sections "
                             f"{', '.join(TOP_LEVEL)}", path, 1, 1, "malformed-config")
    return list(_flatten(root, (), str(path)))


def key_value(text: str) -> tuple[str, str] | None:
    """`KEY=VALUE` split at its first `=`, both stripped; None when there is no `=` or no key. The
    one reader of command-line pairs (config overrides, `--restore`, `--state-partitions`, `--arg`)."""
    key, sep, value = text.partition("=")
    return (key.strip(), value.strip()) if sep and key.strip() else None


def parse_overrides(overrides: Iterable[str]) -> tuple[list[Entry], list[Problem]]:
    """`key=value` pairs from the command line as entries, and a problem per malformed one."""
    entries, problems = [], []
    for text in overrides:
        pair = key_value(text)
        if pair is None:
            problems.append(make_problem("malformed-config", f"{text!r} is not key=value", COMMAND_LINE,
                                         hint="e.g. streamlets.stats.config-parameters.window=1h"))
            continue
        entries.append(Entry(tuple(pair[0].split(".")), pair[1], COMMAND_LINE))
    return entries, problems


def config_entries(files: Iterable[Path], overrides: Iterable[str]) -> tuple[list[Entry], list[Problem]]:
    """The entries of config `files` (in order: a later one wins), then of the `key=value`
    overrides, unchecked; and a malformed-config problem per file that is not HOCON, YAML or JSON
    (its entries left out) and per malformed override. The one reader of config files: `blueprint
    verify|run|build` and `kubectl streamlets deploy|configure` hand the entries on from here.
    Raises ConfigReadError if a file cannot be read."""
    entries, problems = [], []
    for path in files:
        try:
            entries += read_entries(path)
        except BlueprintLoadError as e:
            problems.append(make_problem(e.code, e.message, str(path), e.line, e.column))
    more, override_problems = parse_overrides(overrides)
    return entries + more, problems + override_problems


def check_config(r: Resolved, entries: list[Entry]) -> list[Problem]:
    """Every problem of the settings against the blueprint's streamlets, topics and declarations,
    plus config parameters that have neither a default nor a value."""
    problems = [p for e in entries for p in _check_entry(r, e)]
    scopes = [parse_scope(e.parts) for e in entries]
    given = {(s.owner, s.item) for s in scopes if s.is_streamlet(CONFIG_PARAMETERS)}
    problems += check_real_time(r, entries)
    problems += check_autoscaling(r, entries)
    problems += check_progress_tracking(r, entries)
    problems += check_kafka_security(entries)
    problems += check_schema_registry(entries)
    for name, cls in r.classes.items():
        for param in cls.config_parameters():
            if param.default is None and (name, param.key) not in given:
                ref = r.blueprint.streamlets[name]
                problems.append(make_problem(
                    "missing-config-value", f"streamlet {name!r}: config parameter {param.key!r} "
                    f"({param.type_name}) has no default and no value", str(r.blueprint.path), ref.line, ref.column,
                    f"set streamlets.{name}.config-parameters.{param.key} in the config file or as key=value"))
    return problems


def config_problems(r: Resolved, config: Path | None, overrides: Iterable[str]) -> list[Problem]:
    """Every problem of a config file and `key=value` overrides against a resolved blueprint: what
    `blueprint verify --config` reports, and what `blueprint run` refuses before anything starts.

    A file that is not HOCON, YAML or JSON is one malformed-config problem (its settings are not
    checked further). Raises ConfigReadError if the file cannot be read.
    """
    return checked_entries(r, config, overrides)[1]


def checked_entries(r: Resolved, config: Path | None, overrides: Iterable[str]) -> tuple[list[Entry], list[Problem]]:
    """The entries of a config file and `key=value` overrides (config_entries) and every problem
    of them (as config_problems): the entries are handed on as they were checked, not read again.
    Raises ConfigReadError if the file cannot be read."""
    entries, problems = config_entries([config] if config is not None else [], overrides)
    if any(p.file != COMMAND_LINE for p in problems):  # the file is no HOCON, YAML or JSON
        return entries, problems
    return entries, problems + check_config(r, entries)


def _flatten(node: yaml.Node, prefix: tuple[str, ...], source: str) -> Iterable[Entry]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            parts = tuple(p for p in str(key.value).split(".")) if isinstance(key, yaml.ScalarNode) else ("?",)
            if isinstance(value, yaml.MappingNode):  # an empty section sets nothing
                yield from _flatten(value, prefix + parts, source)
            else:
                line, column = _at(key)
                yield Entry(prefix + parts, _value(value), source, line, column)
    else:
        line, column = _at(node)
        yield Entry(prefix, _value(node), source, line, column)


def _value(node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return [_value(n) for n in node.value]
    if isinstance(node, yaml.MappingNode):
        return {}
    try:
        return SafeConstructor().construct_object(node, deep=True)
    except Exception:
        return node.value


def _at(node: yaml.Node) -> tuple[int | None, int | None]:
    mark = node.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def _check_entry(r: Resolved, e: Entry) -> list[Problem]:
    def problem(code: str, message: str, hint: str | None = None) -> list[Problem]:
        return [make_problem(code, f"{e.key}: {message}", e.source, e.line, e.column, hint)]

    scope = parse_scope(e.parts)
    if scope.top not in TOP_LEVEL:
        return problem("unknown-config-key", f"unknown top-level key {scope.top!r}", f"use one of {', '.join(TOP_LEVEL)}")
    if scope.top == STREAMLETS:
        return _check_streamlet_entry(r, e, problem)
    if scope.top == RUNTIMES:
        if not any(scope.is_runtime(section) for section in RUNTIME_SECTIONS):
            return problem("unknown-config-key", "runtime settings are runtimes.spark.config.<spark key> "
                                                 "or runtimes.spark.kubernetes.<...>")
        return _check_spark_key(scope.item, e.value, problem) if scope.section == "config" else \
            _check_kubernetes(scope.rest, e.value, problem)
    if scope.top == TOPICS:
        return _check_topic_entry(r, e, problem)
    if scope.top == STORAGE:
        return _check_storage_entry(e, problem)
    if scope.top == SCHEMA_REGISTRY:
        key = ".".join(e.parts[1:])
        if key in REGISTRY_SECRET_KEYS:
            try:
                secret_ref(e.value)
            except ValueError as err:
                return problem("invalid-config-value", str(err), "e.g. registry-ca/ca.crt")
            return []
        if key not in REGISTRY_KEYS:
            return problem("unknown-config-key", f"no schema registry setting {key!r}",
                           f"use one of {', '.join([*REGISTRY_KEYS, *REGISTRY_SECRET_KEYS])}")
        return []  # the values together: check_schema_registry
    # kafka
    if scope.section == KAFKA_SECURITY:
        if scope.item in SECRET_KEYS:
            try:
                secret_ref(e.value)
            except ValueError as err:
                return problem("invalid-config-value", str(err), "e.g. my-user/password")
            return []
        if scope.item not in CONFIG_KEYS:
            return problem("unknown-config-key", f"no Kafka security setting {scope.item!r}",
                           f"use one of {', '.join([*CONFIG_KEYS, *SECRET_KEYS])}")
        return []  # the values together: check_kafka_security
    if (scope.section, scope.rest) == (EMBEDDED_BROKER, ("security",)):
        if str(e.value) not in EMBEDDED_BROKER_SECURITY:
            return problem("invalid-config-value", f"{e.value!r}: use one of {', '.join(EMBEDDED_BROKER_SECURITY)}")
        return []
    if (scope.section, scope.rest) != (BOOTSTRAP_SERVERS, ()):
        return problem("unknown-config-key", "the kafka section has bootstrap-servers, security.<key> and "
                                             "embedded-broker.security")
    servers = ",".join(e.value) if isinstance(e.value, list) else str(e.value)
    if not _SERVERS.match(servers.replace(" ", "")):
        return problem("invalid-config-value", f"{e.value!r} is not a list of host:port")
    return []


def _security_values(entries: Iterable[Entry]) -> dict[str, Any]:
    """The `kafka.security.<key>` values by key, a later entry for a key winning; files relative to
    the folder of the entry's config file (the current folder for command-line entries)."""
    values: dict[str, Any] = {}
    for e in entries:
        scope = parse_scope(e.parts)
        if scope.top == KAFKA and scope.section == KAFKA_SECURITY and (scope.item in CONFIG_KEYS
                                                                       or scope.item in SECRET_KEYS):
            value = e.value
            if scope.item in PATH_KEYS:
                base = Path.cwd() if e.source == COMMAND_LINE else Path(e.source).parent
                value = str((base / str(value)).resolve())
            values[scope.item] = value
    return values


def _security(values: dict[str, Any]) -> KafkaSecurity:
    """KafkaSecurity.from_config, its ValidationError as a ValueError naming the key."""
    try:
        return KafkaSecurity.from_config(values)
    except ValidationError as err:
        first = err.errors()[0]
        field = next((k for k, f in CONFIG_KEYS.items() if first["loc"] and f == first["loc"][0]), None)
        what = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"kafka.security.{field}: {what}" if field else f"kafka.security: {what}") from None


def _registry_values(entries: Iterable[Entry]) -> dict[str, str]:
    """The `schema-registry.<key>` values by key, a later entry for a key winning; ca-file and
    password-file relative to the folder of the entry's config file (the current folder for
    command-line entries)."""
    values: dict[str, str] = {}
    for e in entries:
        key = ".".join(e.parts[1:])
        if e.parts and e.parts[0] == SCHEMA_REGISTRY and (key in REGISTRY_KEYS or key in REGISTRY_SECRET_KEYS):
            value = str(e.value)
            if key in REGISTRY_PATH_KEYS:
                base = Path.cwd() if e.source == COMMAND_LINE else Path(e.source).parent
                value = str((base / value).resolve())
            values[key] = value
    return values


def _registry(values: dict[str, str]) -> SchemaRegistry:
    """SchemaRegistry of the values by key (a deploy config's secrets as their SECRET/KEY text
    under the file keys), its ValidationError as a ValueError naming the key."""
    if "url" not in values:
        raise ValueError(f"{SCHEMA_REGISTRY}: the settings name no url: set {SCHEMA_REGISTRY}.url")
    fields = REGISTRY_KEYS
    try:
        return SchemaRegistry(**{fields[k]: v for k, v in values.items()})
    except ValidationError as err:
        first = err.errors()[0]
        field = next((k for k, f in fields.items() if first["loc"] and f == first["loc"][0] and k in values), None)
        what = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{SCHEMA_REGISTRY}.{field}: {what}" if field else f"{SCHEMA_REGISTRY}: {what}") from None


def schema_registry(entries: Iterable[Entry], secrets: bool = False) -> SchemaRegistry | None:
    """The schema registry of a run config's `schema-registry.*` entries (_registry_values), for
    the sandbox and `blueprint verify`; None when there is none. ValueError naming the key and
    what is wrong, among it a key of a Kubernetes Secret (`*-secret`, a deploy config's: this
    machine reads no Secret), unless `secrets`: then those are left out (verify, which may read a
    deploy config, reaches the registry from here)."""
    values = _registry_values(entries)
    secret = next((key for key in values if key in REGISTRY_SECRET_KEYS), None)
    if secret is not None and not secrets:
        raise ValueError(f"{SCHEMA_REGISTRY}.{secret} names a key of a Kubernetes Secret, which only a cluster's pods "
                         f"get (blueprint build); a run config names a file of this machine, "
                         f"{secret.replace('-secret', '-file')}")
    values = {k: v for k, v in values.items() if k not in REGISTRY_SECRET_KEYS}
    return _registry(values) if values else None


def deploy_schema_registry(entries: Iterable[Entry]) -> tuple[SchemaRegistry, dict[str, tuple[str, str]]] | None:
    """A deploy config's `schema-registry.*` (spec.schemaRegistry): the settings, checked by the
    model's rules, with each secret's file field holding `SECRET/KEY`, and the (Secret, key) of each
    by SchemaRegistry file field (ca_file, password_file); None when there is none. ValueError
    naming the key: a file or environment variable of this machine, a value that is not
    SECRET/KEY, or an inconsistent combination."""
    values = _registry_values(entries)
    if not values:
        return None
    refs = _deploy_secret_refs(values, SCHEMA_REGISTRY, REGISTRY_LOCAL_KEYS, REGISTRY_SECRET_KEYS)
    file_keys = {field: key for key, field in REGISTRY_KEYS.items()}
    values.update({file_keys[field]: f"{name}/{key}" for field, (name, key) in refs.items()})
    return _registry(values), refs


def check_schema_registry(entries: list[Entry], deploy: bool = False) -> list[Problem]:
    """The `schema-registry.*` settings together, one problem at the last of them: a deploy
    config's form (deploy_schema_registry) if `deploy`, else one of either form."""
    values = _registry_values(entries)
    if any(not _is_secret_ref(values[key]) for key in REGISTRY_SECRET_KEYS if key in values):
        return []  # _check_entry names the value that is no SECRET/KEY, once
    try:
        if deploy:
            deploy_schema_registry(entries)
        else:
            schema_registry(entries, secrets=True)
    except ValueError as err:
        last = [e for e in entries if e.parts and e.parts[0] == SCHEMA_REGISTRY][-1]
        return [make_problem("invalid-config-value", str(err), last.source, last.line, last.column)]
    return []


def _is_secret_ref(value: Any) -> bool:
    try:
        secret_ref(value)
    except ValueError:
        return False
    return True


def is_deploy_security(entries: Iterable[Entry]) -> bool:
    """Whether the `kafka.security.*` entries name Secrets (SECRET_KEYS): a deploy config's form."""
    return any(key in SECRET_KEYS for key in _security_values(entries))


def kafka_security(entries: Iterable[Entry]) -> KafkaSecurity | None:
    """The Kafka security of a run config's `kafka.security.*` entries (a later entry for a key
    wins; files as _security_values), for the sandbox and the CLIs that connect from this
    machine; None when there is none. ValueError naming the key and what is wrong, among it a key
    of a Kubernetes Secret (`*-secret`, a deploy config's: this machine reads no Secret)."""
    values = _security_values(entries)
    secret = next((key for key in values if key in SECRET_KEYS), None)
    if secret is not None:
        local, env = secret.replace("-secret", "-file"), secret.replace("-secret", "-env")
        raise ValueError(f"kafka.security.{secret} names a key of a Kubernetes Secret, which only a cluster's pods "
                         f"get (blueprint build); a run config names a file of this machine, {local}"
                         + (f", or an environment variable, {env}" if env in CONFIG_KEYS else ""))
    return _security(values) if values else None


def _deploy_secret_refs(values: dict[str, Any], scope: str, local_keys: Iterable[str],
                        secret_keys: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The (Secret, key) of each `*-secret` value of a deploy config's `scope` (kafka.security,
    schema-registry), by the model's file field, popped from `values`. ValueError naming the key
    for a file or environment variable of this machine (`local_keys`: pods have neither) or a
    value that is not SECRET/KEY."""
    local = next((key for key in values if key in local_keys), None)
    if local is not None:
        secret = local.replace("-env", "-file").replace("-file", "-secret")
        raise ValueError(f"{scope}.{local} is a {'file' if local.endswith('-file') else 'variable'} of this "
                         f"machine, which the pods do not have: in a deploy config name a key of a Secret, "
                         f"{secret} = SECRET/KEY")
    refs: dict[str, tuple[str, str]] = {}
    for key, field in secret_keys.items():
        if key in values:
            try:
                refs[field] = secret_ref(values.pop(key))
            except ValueError as err:
                raise ValueError(f"{scope}.{key}: {err}") from None
    return refs


def deploy_kafka_security(entries: Iterable[Entry]) -> tuple[KafkaSecurity, dict[str, tuple[str, str]]] | None:
    """A deploy config's `kafka.security.*` (spec.kafka.security): the settings, checked by the
    model's rules, with each secret's file field holding `SECRET/KEY`, and the (Secret, key) of
    each by KafkaSecurity file field (ca_file, password_file...); None when there is none.
    ValueError naming the key: a file or environment variable of this machine (LOCAL_KEYS: pods
    have neither), a value that is not SECRET/KEY, or an inconsistent combination."""
    values = _security_values(entries)
    if not values:
        return None
    refs = _deploy_secret_refs(values, "kafka.security", LOCAL_KEYS, SECRET_KEYS)
    file_keys = {field: key for key, field in CONFIG_KEYS.items()}
    values.update({file_keys[field]: f"{name}/{key}" for field, (name, key) in refs.items()})
    return _security(values), refs


def check_kafka_security(entries: list[Entry], deploy: bool | None = None) -> list[Problem]:
    """The `kafka.security.*` settings together, one problem at the last of them: in a deploy
    config's form (deploy_kafka_security) if `deploy`, else a run config's (kafka_security); None:
    the deploy config's form if any names a Secret (what verify, which reads both, checks)."""
    deploy = is_deploy_security(entries) if deploy is None else deploy
    values = _security_values(entries)
    if any(not _is_secret_ref(values[key]) for key in SECRET_KEYS if key in values):
        return []  # _check_entry names the value that is no SECRET/KEY, once
    try:
        (deploy_kafka_security if deploy else kafka_security)(entries)
    except ValueError as err:
        last = [e for e in entries if (parse_scope(e.parts).top, parse_scope(e.parts).section) == (KAFKA, KAFKA_SECURITY)][-1]
        return [make_problem("invalid-config-value", str(err), last.source, last.line, last.column)]
    return []


def check_real_time(r: Resolved, entries: list[Entry]) -> list[Problem]:
    """What Real-Time Mode cannot run, as far as declarations and config tell: a streamlet asking
    for it (streamlets.<name>.trigger, else its class's `trigger`) without a Kafka inlet, or whose
    inlets' topics have more partitions than its executors have cores (executor.instances x
    executor.cores, default 1 x 1: Real-Time Mode holds a core per partition)."""
    from streamlets.trigger import Trigger, TriggerError

    last: dict[tuple[str, ...], Entry] = {}
    for e in entries:
        last[e.parts] = e
    problems = []
    for name, cls in r.classes.items():
        ref = r.blueprint.streamlets[name]
        given = last.get((STREAMLETS, name, TRIGGER))
        try:
            trigger = Trigger.parse(str(given.value)) if given is not None else cls.trigger
        except TriggerError:
            continue  # reported as invalid-config-value
        if trigger is None or not trigger.real_time_mode:
            continue
        where = (given.source, given.line, given.column) if given is not None else (str(r.blueprint.path), ref.line, ref.column)
        inlets = [p.name for p in cls.shape().inlets]
        if not inlets:
            problems.append(make_problem("real-time-unsupported", f"streamlet {name!r} cannot run in real-time mode: "
                                         "it has no inlet, and Real-Time Mode reads from Kafka only", *where))
            continue
        partitions = 0
        for topic in r.blueprint.topics.values():
            if any(c.path and c.path.streamlet == name for c in topic.consumers):
                size = last.get(("topics", topic.id, "partitions"))
                partitions += int(str(size.value).strip()) if size is not None and str(size.value).strip().isdigit() \
                    else topic.partitions
        cores = int(_pod_quantity(last, name, "executor", "instances", default=1)
                    * max(1, int(_pod_quantity(last, name, "executor", "cores", default=1))))
        if partitions > cores:
            problems.append(make_problem(
                "real-time-too-few-cores", f"streamlet {name!r} cannot run in real-time mode: its inlets' topics have "
                f"{partitions} partitions but its executors {cores} core(s); Real-Time Mode needs a core per partition",
                *where, hint=f"set streamlets.{name}.kubernetes.executor.instances or executor.cores so that "
                             f"instances x cores >= {partitions}"))
            continue
        edges = _edges_from(r, name)
        if edges:  # Real-Time Mode cannot use foreachBatch: Spark's Kafka sink, at-least-once (runtime.exactly_once)
            problems.append(make_problem("at-least-once-edge", _at_least_once(edges, "Real-Time Mode's Kafka sink"), *where,
                                         hint="run it with a micro-batch trigger where downstream has a watermark"))
    return problems


def autoscaling_values(entries: Iterable[Entry]) -> dict[str, dict[str, Entry]]:
    """streamlets.<name>.autoscaling.<key> entries by streamlet and key (a later entry wins)."""
    out: dict[str, dict[str, Entry]] = {}
    for e in entries:
        scope = parse_scope(e.parts)
        if scope.is_streamlet(AUTOSCALING):
            out.setdefault(str(scope.owner), {})[scope.item] = e
    return out


def check_autoscaling(r: Resolved, entries: list[Entry]) -> list[Problem]:
    """Each streamlet's autoscaling settings, together (streamlets.autoscale.Autoscaling.from_config):
    an unknown key, a value of the wrong form or out of range, a maximum below the minimum. The
    problem points at the entry the message names, else the streamlet's last one."""
    from streamlets.autoscale import Autoscaling, AutoscaleSettingsError

    problems = []
    for name, given in autoscaling_values(entries).items():
        if name not in r.blueprint.streamlets:
            continue  # reported as unknown-config-key
        try:
            Autoscaling.from_config({k: e.value for k, e in given.items()})
        except AutoscaleSettingsError as err:
            named = str(err).split(":", 1)[0].split(" ", 1)[0].removeprefix(f"{AUTOSCALING}.")
            e = given.get(named) or list(given.values())[-1]
            problems.append(make_problem("invalid-config-value", f"streamlets.{name}.{err}", e.source, e.line, e.column,
                                         "the README's Autoscaling lists each setting and its range"))
    return problems


def check_progress_tracking(r: Resolved, entries: list[Entry]) -> list[Problem]:
    """Where asynchronous progress tracking (streamlets.<name>.progress-tracking = async) cannot
    run, as far as declarations and config tell (streamlets.runtime.progress_tracking): exactly-once
    outlets (delivery not at-least-once), Real-Time Mode, quarantine, a streamlet without an inlet or
    an outlet (Kafka source and Spark's Kafka sink). One async-progress-unsupported error each."""
    from streamlets.runtime.progress_tracking import streamlet_refusals
    from streamlets.trigger import Trigger, TriggerError

    last: dict[tuple[str, ...], Entry] = {e.parts: e for e in entries}
    problems = []
    for name, cls in r.classes.items():
        given = last.get((STREAMLETS, name, PROGRESS_TRACKING))
        try:
            if given is None or parse_progress_tracking(str(given.value))[0] != ASYNC:
                continue
        except ValueError:
            continue  # reported as invalid-config-value

        def setting(key: str, default: object, name: str = name) -> str:
            e = last.get((STREAMLETS, name, key))
            return str(e.value if e is not None else default)

        try:
            real_time = Trigger.parse(setting(TRIGGER, cls.trigger or "micro-batch")).real_time_mode
        except TriggerError:
            real_time = False  # reported as invalid-config-value
        shape = cls.shape()
        reasons = [] if shape.inlets and shape.outlets else [
            f"it has no {'inlet' if not shape.inlets else 'outlet'}; asynchronous progress tracking needs Kafka "
            "sources and Spark's Kafka sink"]
        reasons += streamlet_refusals(kafka=True, delivery=setting(DELIVERY, SETTINGS[DELIVERY].default), real_time=real_time,
                                      available_now=False, on_failure=setting(ON_FAILURE, cls.on_failure))
        if reasons:
            problems.append(make_problem("async-progress-unsupported", f"streamlet {name!r} cannot use asynchronous "
                                         "progress tracking: " + "; ".join(reasons), given.source, given.line,
                                         given.column, hint=f"set streamlets.{name}.progress-tracking = sync"))
    return problems


def _pod_quantity(last: dict[tuple[str, ...], Entry], name: str, *parts: str, default: float) -> float:
    """A pod setting of streamlet `name` (streamlets.<name>.kubernetes.<parts>, else
    runtimes.spark.kubernetes.<parts>) as a number (CPU quantities: 1200m = 1.2), else `default`."""
    e = last.get(("streamlets", name, "kubernetes", *parts)) or last.get(("runtimes", "spark", "kubernetes", *parts))
    m = _QUANTITY.match(str(e.value).strip()) if e is not None else None
    return default if not m else float(m.group(1)) / (1000 if m.group(3) else 1)


def _check_streamlet_entry(r: Resolved, e: Entry, problem) -> list[Problem]:
    scope = parse_scope(e.parts)
    if scope.is_streamlet_setting():  # streamlets.<name>.<setting> (streamlets.settings)
        name, setting = str(scope.owner), str(scope.section)
        if name not in r.blueprint.streamlets:
            return problem("unknown-config-key", f"the blueprint has no streamlet {name!r}",
                           f"streamlets: {', '.join(sorted(r.blueprint.streamlets))}")
        try:
            value = setting_value(setting, e.value)
        except ValueError as err:
            forms = STREAMLET_SETTINGS[setting]
            return problem("invalid-config-value", str(err),
                           f"use one of {', '.join(forms)}" if len(forms) > 1 else f"use {forms[0]}")
        edges = _edges_from(r, name) if (setting, value) == (DELIVERY, AT_LEAST_ONCE) else []
        if edges:
            return problem("at-least-once-edge", _at_least_once(edges, "delivery at-least-once"),
                           "leave delivery unset (exactly-once) unless downstream deduplicates and has no watermark")
        return []
    if not scope.complete:
        return problem("unknown-config-key", "streamlet settings are streamlets.<name>.<section>.<key> with section "
                                             f"one of {', '.join(STREAMLET_SECTIONS)}, or streamlets.<name>.<setting> "
                                             f"with setting one of {', '.join(STREAMLET_SETTINGS)}")
    name, section, rest = str(scope.owner), str(scope.section), scope.item
    if name not in r.blueprint.streamlets:
        return problem("unknown-config-key", f"the blueprint has no streamlet {name!r}",
                       f"streamlets: {', '.join(sorted(r.blueprint.streamlets))}")
    if section not in STREAMLET_SECTIONS:
        return problem("unknown-config-key", f"unknown section {section!r}", f"use one of {', '.join(STREAMLET_SECTIONS)}")
    if section == SPARK:
        return _check_spark_key(rest, e.value, problem)
    if section == KUBERNETES:
        return _check_kubernetes(scope.rest, e.value, problem)
    if section == AUTOSCALING:
        return []  # check_autoscaling: the settings of a streamlet are checked together
    cls = r.classes.get(name)
    if cls is None:
        return []  # its class did not load: reported by the verifier
    if section == VOLUME_MOUNTS:
        mounts = [m.name for m in cls.volume_mounts()]
        if rest not in mounts:
            return problem("unknown-config-key", f"streamlet {name!r} declares no volume mount {rest!r}",
                           f"declared: {', '.join(mounts) or 'none'}")
        if not isinstance(e.value, str) or not e.value.strip():
            return problem("invalid-config-value", "a volume mount is set to a folder or a claim name (text)")
        return []
    params = {p.key: p for p in cls.config_parameters()}
    if rest not in params:
        return problem("unknown-config-key", f"streamlet {name!r} declares no config parameter {rest!r}",
                       f"declared: {', '.join(params) or 'none'}")
    try:
        params[rest].parse(e.value)
    except ConfigError as err:
        return problem("invalid-config-value", str(err))
    return []


def _at_least_once(edges: list[str], why: str) -> str:
    return (f"at-least-once edge(s) {'; '.join(edges)} ({why}): a failed micro-batch's partial output is visible "
            "downstream, out of event-time order (a downstream watermark may drop its replay)")


def _edges_from(r: Resolved, name: str) -> list[str]:
    """`<name>.<outlet> -> <topic> -> <consumer>.<inlet>` for every consumer of the streamlet's outlets."""
    edges = []
    for topic_id, topic in r.blueprint.topics.items():
        outlets = [str(ref.path) for ref in topic.producers if ref.path and ref.path.streamlet == name]
        for out in outlets:
            edges += [f"{out} -> {topic_id} -> {ref.path}" for ref in topic.consumers if ref.path]
    return edges


def _check_spark_key(key: str, value: Any, problem) -> list[Problem]:
    if not key.startswith("spark."):
        return problem("unknown-config-key", f"{key!r} is not a Spark setting", "Spark settings start with spark.")
    if isinstance(value, (list, dict)) or value is None:
        return problem("invalid-config-value", f"{value!r} is not a Spark setting's value",
                       "a Spark setting is one text, number or true/false; several items go in one text, e.g. \"a,b\"")
    return []


def _check_kubernetes(parts: tuple[str, ...], value: Any, problem) -> list[Problem]:
    if len(parts) == 2 and parts[0] in POD_METADATA:
        return [] if isinstance(value, (str, int, float, bool)) else problem("invalid-config-value", "must be text")
    if len(parts) != 2 or parts[0] not in POD_ROLES or \
            parts[1] not in POD_KEYS + (("instances",) if parts[0] == "executor" else ()):
        return problem("unknown-config-key", "kubernetes settings are driver|executor.cores|core-limit|memory|"
                                             "memory-overhead, executor.instances, labels.<k>, annotations.<k>")
    text = str(value).strip()
    if parts[1] == "instances":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0 or text.isdigit()
        return [] if ok else problem("invalid-config-value", f"{value!r} is not a whole number of executors (0 or more)")
    if parts[1] in ("memory", "memory-overhead"):
        return [] if _MEMORY.match(text) else problem("invalid-config-value",
                                                      f"{value!r} is not a memory size such as 512m or 2g")
    m = _QUANTITY.match(text)
    if isinstance(value, bool) or not m or float(m.group(1)) <= 0:
        return problem("invalid-config-value", f"{value!r} is not a CPU quantity such as 1, 0.5 or 500m")
    return []


def _check_storage_entry(e: Entry, problem) -> list[Problem]:
    key = ".".join(e.parts[1:])
    code = "invalid-config-value" if key in STORAGE_KEYS else "unknown-config-key"
    try:  # streamlets.runtime.object_store checks each key (a root for the others to go with)
        object_store({key: e.value} if key == "checkpoints" else {"checkpoints": "s3a://bucket", key: e.value})
    except StorageConfigError as err:
        return problem(code, str(err).split(": ", 1)[-1])
    return []


def _check_topic_entry(r: Resolved, e: Entry, problem) -> list[Problem]:
    scope = parse_scope(e.parts)
    if scope.section is None:
        return problem("unknown-config-key", "topic settings are topics.<id>.partitions|replication-factor|config.<key>")
    topic_id, setting = scope.owner, scope.section
    if topic_id not in r.blueprint.topics:
        return problem("unknown-config-key", f"the blueprint has no topic {topic_id!r}",
                       f"topics: {', '.join(sorted(r.blueprint.topics)) or 'none'}")
    if setting == "config" and scope.rest:
        return [] if not isinstance(e.value, (list, dict)) else problem("invalid-config-value", "must be a single value")
    if setting in TOPIC_SETTINGS and not scope.rest:
        value = e.value
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return problem("invalid-config-value", f"{e.value!r} is not a positive whole number")
        return []
    return problem("unknown-config-key", f"unknown topic setting {'.'.join(e.parts[2:])!r}",
                   "use partitions, replication-factor or config.<Kafka topic config>")
