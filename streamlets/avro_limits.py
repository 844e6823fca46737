"""Bounds on what an Avro decoder may allocate for one value, in every JVM that decodes.

A value of a few bytes can begin with a varint announcing a string, bytes or array of
gigabytes; Avro's Java decoder allocates the announced size before it finds the value is short,
and the JVM (a sandbox's, a driver's or an executor's) dies of OutOfMemoryError. Avro (1.11.3
and later; Spark 4.0 and 4.1 bundle Avro 1.12) checks announced lengths against system limits
read once, when `org.apache.avro.SystemLimitException` loads, from three Java system
properties:

    org.apache.avro.limits.string.maxLength          bytes of one string
    org.apache.avro.limits.bytes.maxLength           bytes of one bytes value
    org.apache.avro.limits.collectionItems.maxLength items of one array or map

No part of a value can be longer than the value, and no value is longer than the largest Kafka
message: the ceiling is Kafka's default `message.max.bytes`, 1,048,588 bytes, or
$STREAMLETS_MAX_VALUE_BYTES (a whole number of bytes) where topics allow larger messages. A
value announcing more fails to decode with `SystemLimitException`; from_avro in PERMISSIVE mode
makes it a malformed value, which goes to the dead-letter topic and is counted.

Items that encode to zero bytes (null, fixed of size 0, records of such fields) are the one
case where the count of an array is not bounded by its value's length; `blueprint verify`
refuses inlet schemas with such arrays (problem `zero-size-array-items`, see
`zero_size_arrays`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's message.max.bytes default
ENV = "STREAMLETS_MAX_VALUE_BYTES"
PROPERTIES = (
    "org.apache.avro.limits.string.maxLength",
    "org.apache.avro.limits.bytes.maxLength",
    "org.apache.avro.limits.collectionItems.maxLength",
)
_JVM_ARRAY_LIMIT = 2_147_483_639  # Avro's own bound (largest Java array)


class AvroLimitsError(ValueError):
    """$STREAMLETS_MAX_VALUE_BYTES is not a whole number of bytes in range."""


def max_value_bytes(env: Mapping[str, str] | None = None) -> int:
    """The ceiling in bytes: $STREAMLETS_MAX_VALUE_BYTES, or Kafka's default max message size.

    Raises AvroLimitsError naming the variable if it is set to something else than a whole
    number from 1 to 2,147,483,639."""
    env = os.environ if env is None else env
    text = (env.get(ENV) or "").strip().replace("_", "")
    if not text:
        return KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    if not text.isdigit() or not 1 <= int(text) <= _JVM_ARRAY_LIMIT:
        raise AvroLimitsError(f"${ENV}={env.get(ENV)!r}: expected the largest value in bytes, a whole number "
                              f"from 1 to {_JVM_ARRAY_LIMIT} (default {KAFKA_DEFAULT_MAX_MESSAGE_BYTES}, Kafka's "
                              "message.max.bytes)")
    return int(text)


def system_properties(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The three Avro system properties, each set to the ceiling."""
    limit = str(max_value_bytes(env))
    return {p: limit for p in PROPERTIES}


def java_options(env: Mapping[str, str] | None = None) -> str:
    """The properties as JVM options (`-Dorg.apache.avro.limits...=1048588 ...`), for
    spark.driver.extraJavaOptions, spark.executor.extraJavaOptions and a SparkApplication's
    driver/executor javaOptions."""
    return " ".join(f"-D{k}={v}" for k, v in system_properties(env).items())


def with_limits(options: str | None, env: Mapping[str, str] | None = None) -> str:
    """JVM options `options` with the limits in front (a later -D of the user's wins)."""
    return f"{java_options(env)} {options}".strip() if options else java_options(env)


def apply_to_jvm(jvm: Any, env: Mapping[str, str] | None = None) -> bool:
    """Make the limits hold in a running JVM (py4j's `spark._jvm`); True if they hold.

    A JVM started with the options already has them. Otherwise the properties are set now,
    which Avro honours if it has not decoded anything yet (it reads them once). The check asks
    Avro itself: a length one above the ceiling must be refused.
    """
    limit = max_value_bytes(env)
    system = jvm.java.lang.System
    for key, value in system_properties(env).items():
        if system.getProperty(key) is None:
            system.setProperty(key, value)
    return limits_hold(jvm, limit)


def limits_hold(jvm: Any, limit: int | None = None) -> bool:
    """True if Avro in this JVM refuses a string, bytes and collection length of `limit` + 1."""
    limit = max_value_bytes() if limit is None else limit
    limits = jvm.org.apache.avro.SystemLimitException
    for check in (lambda: limits.checkMaxStringLength(limit + 1), lambda: limits.checkMaxBytesLength(limit + 1),
                  lambda: limits.checkMaxCollectionLength(0, limit + 1)):
        try:
            check()
        except Exception:  # py4j's Py4JJavaError wrapping SystemLimitException: the limit holds
            continue
        return False
    return True


# --- schemas whose arrays are not bounded by the value's length ------------------------------------

def _min_size(t: Any, names: dict[str, Any], namespace: str | None, busy: frozenset[str]) -> int:
    """Fewest bytes an Avro binary encoding of type `t` can take (1 stands for "at least one")."""
    if isinstance(t, str):
        if t == "null":
            return 0
        if t in ("boolean", "int", "long", "string", "bytes", "enum"):
            return 1
        if t == "float":
            return 4
        if t == "double":
            return 8
        full = t if "." in t or not namespace else f"{namespace}.{t}"
        named = names.get(full) or names.get(t)
        if named is None or full in busy or t in busy:
            return 1  # unknown here, or a recursive reference (terminates only through a union)
        return _min_size(named, names, namespace, busy)
    if isinstance(t, list):
        return 1  # the branch index
    kind = t.get("type")
    if kind in ("array", "map"):
        return 1  # the block count
    if kind == "enum":
        names[t["name"]] = t
        return 1
    if kind == "fixed":
        names[t["name"]] = t
        return int(t.get("size", 1))
    if kind in ("record", "error"):
        ns = t.get("namespace", namespace)
        full = t["name"] if "." in t["name"] or not ns else f"{ns}.{t['name']}"
        names[full] = names[t["name"]] = t
        return sum(_min_size(f["type"], names, ns, busy | {full, t["name"]}) for f in t.get("fields", []))
    return _min_size(kind, names, namespace, busy)


def zero_size_arrays(schema: dict[str, Any]) -> list[str]:
    """Paths (`field.sub[]`) of arrays in `schema` whose items can encode to zero bytes.

    Such an array's item count is bounded only by the collection limit, not by the value's
    length: a 3-byte value can announce a million items. Empty list: every array is bounded.
    """
    found: list[str] = []
    names: dict[str, Any] = {}
    seen: set[int] = set()

    def walk(t: Any, path: str, namespace: str | None) -> None:
        if isinstance(t, str):
            full = t if "." in t or not namespace else f"{namespace}.{t}"
            named = names.get(full) or names.get(t)
            if named is not None and id(named) not in seen:
                walk(named, path, namespace)
            return
        if isinstance(t, list):
            for branch in t:
                walk(branch, path, namespace)
            return
        kind = t.get("type")
        if kind in ("record", "error"):
            if id(t) in seen:
                return
            seen.add(id(t))
            ns = t.get("namespace", namespace)
            full = t["name"] if "." in t["name"] or not ns else f"{ns}.{t['name']}"
            names[full] = names[t["name"]] = t
            for f in t.get("fields", []):
                walk(f["type"], f"{path}.{f['name']}" if path else f["name"], ns)
        elif kind in ("enum", "fixed"):
            names[t["name"]] = t
        elif kind == "array":
            if _min_size(t["items"], dict(names), namespace, frozenset()) == 0:
                found.append(f"{path}[]" if path else "[]")
            walk(t["items"], f"{path}[]", namespace)
        elif kind == "map":
            walk(t["values"], f"{path}{{}}", namespace)
        elif isinstance(kind, (dict, list)):
            walk(kind, path, namespace)

    walk(schema, "", schema.get("namespace") if isinstance(schema, dict) else None)
    return found
