"""What `blueprint verify` reports: the Problem record and the registry of every problem code.

Each code has a severity, the group it is reported under and a default hint. The registry is
the one list of codes: the verifier, the JSON schema of the report (verify-report.schema.json)
and the README's table are kept in step with it by tests.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Literal, NamedTuple

from pydantic import BaseModel

Severity = Literal["error", "warning"]

# Report order of the groups, and their headings in the text report.
GROUPS: dict[str, str] = {
    "blueprint": "blueprint file",
    "streamlets": "streamlet classes",
    "ports": "ports and connections",
    "topics": "topics",
    "schemas": "schemas",
    "graph": "application graph",
    "config": "run and deploy config",
}


class Code(NamedTuple):
    severity: Severity
    group: str
    summary: str  # what the problem is, for docs
    hint: str | None = None


DNS_HINT = "use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit"

CODES: dict[str, Code] = {
    # blueprint file
    "unreadable-file": Code("error", "blueprint", "the file cannot be read (exit status 2)"),
    "malformed-blueprint": Code("error", "blueprint", "not YAML/HOCON, or not a mapping"),
    "missing-streamlets": Code("error", "blueprint", "no `streamlets` section", "add `streamlets:` with instance name: module.Class"),
    "empty-streamlets": Code("error", "blueprint", "the `streamlets` section names no streamlet", "add instance name: module.Class entries"),
    "unknown-key": Code("error", "blueprint", "a key the blueprint format does not have"),
    "duplicate-key": Code("error", "blueprint", "a key given twice in one mapping"),
    "wrong-type": Code("error", "blueprint", "a value of the wrong type (text, list, number, mapping)"),
    "invalid-app-id": Code("error", "blueprint", "app-id is not a DNS label", DNS_HINT),
    # streamlets
    "duplicate-streamlet": Code("error", "streamlets", "two streamlet instances with one name", "give each instance its own name"),
    "invalid-streamlet-name": Code("error", "streamlets", "an instance name that is not a DNS label",
                                   DNS_HINT + "; it names Kubernetes resources"),
    "invalid-class-path": Code("error", "streamlets", "a class path that is not module.Class",
                               "write the module path and class name separated by dots, e.g. my_app.ingress.Ingress"),
    "module-not-found": Code("error", "streamlets", "the class's module cannot be found",
                             "class paths resolve against the blueprint's folder"),
    "class-not-found": Code("error", "streamlets", "the module has no such class"),
    "ambiguous-class": Code("error", "streamlets", "a bare class name that several modules define",
                            "write the full path module.Class"),
    "not-a-streamlet": Code("error", "streamlets", "the class is not a Streamlet subclass", "subclass streamlets.Streamlet"),
    "abstract-streamlet": Code("error", "streamlets", "the class does not implement create_logic", "implement create_logic(self, ctx)"),
    "import-failed": Code("error", "streamlets", "the module raised while it was imported (error, file and line)"),
    "instantiation-failed": Code("error", "streamlets", "the class raised when instantiated without arguments",
                                 "streamlets are instantiated without arguments; read settings from config parameters"),
    "invalid-schema": Code("error", "streamlets", "a port's Avro schema cannot be read or parsed"),
    "invalid-partition-key": Code("error", "streamlets", "an outlet's partition key is not a field of its schema"),
    "invalid-error-handling": Code("error", "streamlets", "an inlet's error_handling is not dead-letter or fail"),
    "invalid-config-key": Code("error", "streamlets", "a config parameter key with other characters than letters, digits, '-', '_', '.'"),
    "duplicate-config-key": Code("error", "streamlets", "two config parameters with one key"),
    "invalid-validation-pattern": Code("error", "streamlets", "a RegExpParameter pattern that does not compile"),
    "invalid-default": Code("error", "streamlets", "a config parameter default that fails its own validation"),
    "invalid-volume-name": Code("error", "streamlets", "a volume mount name that is not a DNS label"),
    "duplicate-volume-name": Code("error", "streamlets", "two volume mounts with one name"),
    "invalid-volume-path": Code("error", "streamlets", "a volume mount path that is empty, relative or contains '..'"),
    "duplicate-volume-path": Code("error", "streamlets", "two volume mounts at one path"),
    "invalid-access-mode": Code("error", "streamlets", "a volume mount access mode Kubernetes does not have"),
    "invalid-trigger": Code("error", "streamlets", "a class's `trigger` that is not a streamlets.trigger.Trigger or its text form",
                            "use Trigger.micro_batch(), Trigger.processing_time('1 second') or Trigger.real_time('5 seconds')"),
    # ports
    "invalid-port-name": Code("error", "ports", "a port name that is not a DNS label"),
    "duplicate-port-name": Code("error", "ports", "two ports of one streamlet with one name"),
    "malformed-port-path": Code("error", "ports", "a producer or consumer that is not streamlet.port"),
    "unknown-streamlet": Code("error", "ports", "a port path naming no streamlet of the blueprint"),
    "unknown-port": Code("error", "ports", "a port path naming no port of the streamlet (with the nearest names)"),
    "wrong-port-role": Code("error", "ports", "an inlet among producers or an outlet among consumers"),
    "port-on-many-topics": Code("error", "ports", "a port bound to more than one topic"),
    "unconnected-inlet": Code("error", "ports", "an inlet no topic feeds"),
    "unconnected-outlet": Code("warning", "ports",
                               "an outlet no topic takes: its query runs, its records are discarded (Spark's noop sink); an error with --strict"),
    # topics
    "invalid-topic-name": Code("error", "topics", "a Kafka topic name with other characters than [a-zA-Z0-9._-] or over 249 long"),
    "duplicate-topic": Code("error", "topics", "a topic id given twice"),
    "duplicate-kafka-topic": Code("error", "topics", "two topic ids that resolve to the same Kafka topic name"),
    "topic-without-producers": Code("warning", "topics", "a topic no outlet writes to (an error with --strict)"),
    "topic-without-consumers": Code("warning", "topics", "a topic no inlet reads (an error with --strict)"),
    "empty-topic": Code("warning", "topics", "a topic with neither producers nor consumers", "connect ports to it or remove it"),
    # schemas
    "incompatible-schema": Code("error", "schemas", "an inlet cannot read what a producer of its topic writes (Avro schema resolution)",
                                "a reader may add fields only with a default, drop fields, and widen types: "
                                "int -> long -> float -> double, string <-> bytes"),
    "logical-type-mismatch": Code("error", "schemas", "an inlet would read a field of a producer with another Avro logical type "
                                  "(decimal precision or scale, timestamp unit, date, uuid...): the value changes its meaning",
                                  "give the reader the writer's logical type (a decimal: the same precision and scale); "
                                  "to change a field's meaning, add a field under a new name"),
    "producers-disagree": Code("error", "schemas", "producers of one topic write different schemas (or logical types)",
                               "values carry no schema id, so a topic holds one writer schema: "
                               "give the producers the same schema, or use one topic each"),
    "uncomparable-schema": Code("warning", "schemas", "two schemas the Avro checker could not compare"),
    "registry-incompatible": Code("error", "schemas", "an outlet's schema breaks the compatibility level of its topic's "
                                  "subject in the schema registry (verify --schema-registry)",
                                  "evolve the schema as the level allows (BACKWARD: add fields with a default, drop "
                                  "fields), or change the subject's level with the team that owns it"),
    "registry-unreadable-version": Code("error", "schemas", "an inlet cannot read a schema version registered under its "
                                        "topic's subject (verify --schema-registry)",
                                        "give the inlet defaults for the fields older versions lack"),
    "registry-unavailable": Code("error", "schemas", "the schema registry cannot be asked (verify --schema-registry)",
                                 "check schema-registry.url and its credentials"),
    "zero-size-array-items": Code("error", "schemas", "an inlet decodes an array whose items encode to zero bytes "
                                  "(null, fixed of size 0, a record of such fields): a value of a few bytes can announce "
                                  "a million items",
                                  "give the items a type that takes bytes (e.g. boolean or a union with null), or use a count"),
    # graph
    "cycle": Code("error", "graph", "streamlets that feed back into themselves (with the path)",
                  "break the loop: a cycle through Kafka topics re-processes its own output forever"),
    # config
    "unreadable-config": Code("error", "config", "the config file cannot be read (exit status 2)"),
    "malformed-config": Code("error", "config", "the config file is not HOCON, YAML or JSON, or an override is not key=value"),
    "unknown-config-key": Code("error", "config", "a config key outside the known scopes, or naming an unknown streamlet, topic, parameter or mount"),
    "invalid-config-value": Code("error", "config", "a value of the wrong type or failing its parameter's validation"),
    "missing-config-value": Code("error", "config", "a config parameter without default and without a value"),
    "at-least-once-edge": Code("warning", "config", "a streamlet set to delivery at-least-once, or in Real-Time Mode: names each edge "
                               "from its outlets, where a failed micro-batch's partial output is visible downstream"),
    "real-time-unsupported": Code("error", "config", "a streamlet in real-time mode that Real-Time Mode cannot run "
                                  "(no Kafka inlet)", "run it with trigger micro-batch"),
    "real-time-too-few-cores": Code("error", "config", "a streamlet in real-time mode whose inlets have more Kafka "
                                    "partitions than its executors have cores"),
    "async-progress-unsupported": Code("error", "config", "a streamlet set to progress-tracking async that asynchronous "
                                       "progress tracking cannot run (exactly-once outlets, Real-Time Mode, quarantine, "
                                       "no inlet or outlet)", "set delivery = at-least-once, or progress-tracking = sync"),
}


class Problem(BaseModel):
    """One finding, located in the blueprint (or config) file; line and column are 1-based or None."""

    severity: Severity
    code: str
    group: str
    message: str
    file: str
    line: int | None = None
    column: int | None = None
    hint: str | None = None


def make_problem(code: str, message: str, file: str, line: int | None = None, column: int | None = None,
                 hint: str | None = None, severity: Severity | None = None) -> Problem:
    """A Problem of a registered code: severity and group from the registry, its hint by default."""
    spec = CODES[code]
    return Problem(severity=severity or spec.severity, code=code, group=spec.group, message=message, file=file,
                   line=line, column=column, hint=hint if hint is not None else spec.hint)


def report_order(problems: list[Problem]) -> list[Problem]:
    """Grouped (GROUPS order), errors before warnings, then by place in the file."""
    order = {g: i for i, g in enumerate(GROUPS)}
    return sorted(problems, key=lambda p: (order.get(p.group, len(order)), p.severity != "error",
                                           p.file, p.line or 0, p.column or 0))


def nearest(name: str, known: Iterable[str]) -> list[str]:
    """The at most three of `known` nearest to a misspelt `name` (difflib's ratio of at least 0.6)."""
    return difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)


def suggest(name: str, known: Iterable[str], what: str, form: str = "{}") -> str:
    """A hint for a misspelt name: "did you mean 'a' or 'b'?" naming the nearest of `known`
    (see nearest), else "<what>: <all of them>", or "there are no <what>".

    `form` shows each name (`"my_app.ingress.{}"` puts a module path before class names);
    only the names themselves are compared.
    """
    known = sorted(set(known))
    near = nearest(name, known)
    if near:
        return "did you mean " + " or ".join(repr(form.format(n)) for n in near) + "?"
    return f"{what}: {', '.join(form.format(n) for n in known)}" if known else f"there are no {what}"
