"""Avro logical types across schema resolution: what `blueprint verify` checks and a running inlet refuses.

Avro schema resolution pairs a writer's schema with a reader's by their underlying types only:
the avro package's compatibility checker and Java's ResolvingDecoder (which Spark's `from_avro`
uses) ignore logical types, and the Parsing Canonical Form behind schema fingerprints drops them.
So a value can keep its bytes and change its meaning: a decimal written with scale 2 and read
with scale 3 turns 12.34 into 1.234; milliseconds read as microseconds move 2024 to 1970.

`mismatches(writer, reader)` walks the two schemas as resolution pairs them (record fields by
name or the reader's aliases, array items, map values, each writer union branch to the reader
branch Avro picks for it) and lists every place where the logical types differ. As the
specification says, two decimals match only if their precision and scale match; a logical type
the specification does not define, or one that is invalid for its underlying type (a decimal
whose scale exceeds its precision, `date` on a long), is ignored and the underlying type used.
Other logical types must be the same on both sides, except the pairs in SAFE_PAIRS.

Pure Python on the schemas' JSON data (dicts as `AvroSchema.schema` holds them), in the SDK's
layer so that both `blueprint verify` and the runtime's start-up check
(streamlets.runtime.codec.check_logical_types) use it; it imports no pyspark.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any, NamedTuple

__all__ = ["LogicalType", "Mismatch", "SAFE_PAIRS", "logical_type", "mismatches", "same_logical_types"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})

# Logical type -> the underlying types the specification defines it on (1.12); elsewhere it is ignored.
DEFINED_ON: dict[str, tuple[str, ...]] = {
    "decimal": ("bytes", "fixed"),
    "big-decimal": ("bytes",),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}

# Writer -> reader pairs of (logical type name or None, underlying type) that resolve to the same
# meaning although the logical types differ: a UUID read as a plain string is the UUID's text.
SAFE_PAIRS: frozenset[tuple[tuple[str | None, str], tuple[str | None, str]]] = frozenset({
    (("uuid", "string"), (None, "string")),
})

# Avro's promotions of underlying types (writer -> reader).
PROMOTIONS = frozenset({("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
                        ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")})

_EPOCH = dt.datetime(1970, 1, 1)
_UNITS = {"millis": 10 ** 3, "micros": 10 ** 6, "nanos": 10 ** 9}
_MEANINGS = {
    "date": "days since 1970-01-01",
    "time-millis": "milliseconds after midnight",
    "time-micros": "microseconds after midnight",
    "uuid": "UUIDs",
    "duration": "durations (months, days, milliseconds)",
    "big-decimal": "decimals that carry their own scale",
}
# A sample value of each logical type, as its underlying number, for the messages' examples.
_SAMPLE_INSTANT = dt.datetime(2024, 5, 1, 12, 0)
_SAMPLES = {
    "date": (_SAMPLE_INSTANT - _EPOCH).days,
    "time-millis": 12 * 3600 * 10 ** 3,
    "time-micros": 12 * 3600 * 10 ** 6,
    **{f"{kind}timestamp-{unit}": int((_SAMPLE_INSTANT - _EPOCH).total_seconds()) * factor
       for kind in ("", "local-") for unit, factor in _UNITS.items()},
}


class LogicalType(NamedTuple):
    """A logical type in effect: its name, the underlying Avro type, and a decimal's precision and scale."""

    name: str | None  # None: no logical type (none given, or one the specification ignores)
    underlying: str
    precision: int | None = None
    scale: int | None = None

    def __str__(self) -> str:
        if self.name == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.name is None:
            return f"{self.underlying} without logical type"
        return self.name

    @property
    def key(self) -> tuple[str | None, str]:
        """(logical type name or None, underlying Avro type): what two fields must share to read each other's
        values as written."""
        return self.name, self.underlying

    @property
    def meaning(self) -> tuple[str | None, int | None, int | None]:
        """What a value means, the underlying type aside (int -> long is a promotion, not a change)."""
        return self.name, self.precision, self.scale

    def describe(self) -> str:
        """What the underlying value means, for messages: "milliseconds since 1970-01-01T00:00Z"."""
        if self.name is None:
            return f"plain {self.underlying} values"
        if self.name == "decimal":
            return f"decimals of scale {self.scale} (the unscaled number times 10^-{self.scale})"
        if self.name in _MEANINGS:
            return _MEANINGS[self.name]
        local, _, unit = self.name.rpartition("-")
        if local.endswith("timestamp"):
            zone = "local time, no time zone" if local.startswith("local-") else "UTC"
            return f"{unit[:-1]}seconds since 1970-01-01T00:00 ({zone})"
        return f"{self.name} values"

    def render(self, number: int) -> str | None:
        """An underlying number as this type shows it (for examples), or None if it has no such form."""
        try:
            if self.name is None:
                return str(number) if self.underlying in ("int", "long") else None
            if self.name == "decimal":
                return str(Decimal(number).scaleb(-self.scale))
            if self.name == "date":
                return (_EPOCH + dt.timedelta(days=number)).date().isoformat()
            if self.name in ("time-millis", "time-micros"):
                factor = _UNITS[self.name.rpartition("-")[2]]
                return str(dt.timedelta(seconds=number / factor)) + " after midnight"
            if "timestamp-" in self.name:
                factor = _UNITS[self.name.rpartition("-")[2]]
                shown = (_EPOCH + dt.timedelta(microseconds=number * 10 ** 6 // factor)).isoformat()
                return shown + ("" if self.name.startswith("local-") else "Z")
        except (OverflowError, ValueError):
            return None
        return None


class Mismatch(NamedTuple):
    """One place where a reader would give a written value another meaning.

    `field` is the dotted path of the field (`[]` after an array, `{}` after a map: its items or
    values), `writer` and `reader` the logical types in effect, `consequence` what goes wrong.
    """

    field: str
    writer: LogicalType
    reader: LogicalType
    consequence: str

    @property
    def message(self) -> str:
        """One line for a report: the field, what the writer and the reader declare, and what a reader would
        get."""
        return f"field {self.field!r} is {self.writer} in the writer but {self.reader} in the reader: {self.consequence}"


def logical_type(node: Any) -> LogicalType | None:
    """The logical type in effect on a primitive or fixed schema node, None for other nodes.

    A name the specification does not define, or one invalid on its underlying type (see
    DEFINED_ON; a decimal needs 0 < precision, 0 <= scale <= precision and, on a fixed, a
    precision its size can hold; uuid needs fixed size 16, duration 12) is ignored.
    """
    if isinstance(node, str):
        return LogicalType(None, node) if node in PRIMITIVES else None
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        return None
    underlying = node["type"]
    if underlying not in PRIMITIVES and underlying != "fixed":
        return None
    plain = LogicalType(None, underlying)
    name = node.get("logicalType")
    if not isinstance(name, str) or underlying not in DEFINED_ON.get(name, ()):
        return plain
    size = node.get("size")
    if name == "decimal":
        precision, scale = node.get("precision"), node.get("scale", 0)
        if not (_whole(precision) and _whole(scale) and 0 < precision and 0 <= scale <= precision):
            return plain
        if underlying == "fixed" and (not _whole(size) or size < 1
                                      or precision > math.floor(math.log10(2 ** (8 * size - 1) - 1))):
            return plain
        return LogicalType(name, underlying, precision, scale)
    if underlying == "fixed" and size != {"uuid": 16, "duration": 12}.get(name):
        return plain
    return LogicalType(name, underlying)


def mismatches(writer: dict | list | str, reader: dict | list | str) -> list[Mismatch]:
    """Every place where `reader` would read what `writer` writes with another logical type.

    Both are Avro schemas as JSON data (named types defined at their first use, as in a
    parsed .avsc). Places whose underlying types do not resolve are skipped: that is the
    structural compatibility check's finding, not this one's. Never raises for a valid schema.
    """
    out: list[Mismatch] = []
    _Walk(_Names(writer), _Names(reader), out).pair(writer, None, reader, None, "")
    return out


def same_logical_types(a: dict | list | str, b: dict | list | str) -> bool:
    """True if neither schema would read the other's values with another logical type."""
    return not mismatches(a, b) and not mismatches(b, a)


def consequence(writer: LogicalType, reader: LogicalType) -> str:
    """What goes wrong when a value written as `writer` is read as `reader`, with an example where there is one."""
    if writer.name == reader.name == "decimal":
        if writer.scale != reader.scale:
            number = 1234
            return (f"the reader scales the written digits by 10^-{reader.scale} instead of 10^-{writer.scale}: "
                    f"{writer.render(number)} would arrive as {reader.render(number)}")
        if reader.precision < writer.precision:
            return (f"values of more than {reader.precision} digits do not fit the reader's precision: "
                    f"decoding them fails (a dead letter, or the query stops)")
        return ("the Avro specification matches decimals only when precision and scale both match, "
                "so a reader that follows it refuses these values")
    text = f"{writer.describe()} would be read as {reader.describe()}"
    if writer.name == "decimal":
        sample = 1234
    elif writer.name is None:
        sample = _SAMPLES["date"] if writer.underlying in ("int", "long") else None
    else:
        sample = _SAMPLES.get(writer.name)
    if sample is not None:
        before, after = writer.render(sample), reader.render(sample)
        if before is not None and after is not None and before != after:
            text += f": {before} would arrive as {after}"
    return text


class _Names:
    """The named types (records, enums, fixed) of one schema by full name, wherever they are defined."""

    def __init__(self, schema: Any) -> None:
        self.types: dict[str, tuple[dict, str | None]] = {}  # full name -> (node, its namespace)
        self._collect(schema, None)

    def _collect(self, node: Any, namespace: str | None) -> None:
        if isinstance(node, list):
            for branch in node:
                self._collect(branch, namespace)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind in NAMED:
            full, inner = _full_name(node, namespace)
            self.types.setdefault(full, (node, inner))
            for alias in node.get("aliases") or []:
                if isinstance(alias, str):
                    self.types.setdefault(alias if "." in alias or not inner else f"{inner}.{alias}", (node, inner))
            if kind in ("record", "error"):
                for f in node.get("fields") or []:
                    if isinstance(f, dict):
                        self._collect(f.get("type"), inner)
        elif kind == "array":
            self._collect(node.get("items"), namespace)
        elif kind == "map":
            self._collect(node.get("values"), namespace)
        elif isinstance(kind, (dict, list)):
            self._collect(kind, namespace)

    def deref(self, node: Any, namespace: str | None) -> tuple[Any, str | None]:
        """A reference resolved to its definition, and `{"type": {...}}` wrappers unwrapped."""
        for _ in range(64):  # wrappers nest at most as deep as the schema is written
            if isinstance(node, str) and node not in PRIMITIVES:
                key = node if "." in node or not namespace else f"{namespace}.{node}"
                found = self.types.get(key) or self.types.get(node)
                if found is None:
                    return node, namespace
                node, namespace = found[0], found[1]
                return node, namespace
            if isinstance(node, dict) and isinstance(node.get("type"), (dict, list)):
                node = node["type"]
                continue
            if isinstance(node, dict) and node.get("type") in NAMED:
                return node, _full_name(node, namespace)[1]
            return node, namespace
        return node, namespace


class _Walk:
    def __init__(self, writer: _Names, reader: _Names, out: list[Mismatch]) -> None:
        self.w, self.r, self.out = writer, reader, out
        self.seen: set[tuple[int, int]] = set()

    def pair(self, w: Any, wns: str | None, r: Any, rns: str | None, path: str) -> None:
        w, wns = self.w.deref(w, wns)
        r, rns = self.r.deref(r, rns)
        if isinstance(w, list):  # each branch the writer may have written
            for branch in w:
                self.pair(branch, wns, r, rns, path)
            return
        if isinstance(r, list):
            branch = self._branch(w, wns, r, rns)
            if branch is not None:
                self.pair(w, wns, branch, rns, path)
            return
        wt, rt = _kind(w), _kind(r)
        if wt in ("record", "error") and rt in ("record", "error"):
            if (id(w), id(r)) in self.seen:  # a recursive type: its fields are being walked
                return
            self.seen.add((id(w), id(r)))
            written = {f.get("name"): f for f in w.get("fields") or [] if isinstance(f, dict)}
            for f in r.get("fields") or []:
                if not isinstance(f, dict):
                    continue
                names = [f.get("name"), *(f.get("aliases") or [])]
                match = next((written[n] for n in names if n in written), None)
                if match is not None:
                    self.pair(match.get("type"), wns, f.get("type"), rns, _join(path, str(f.get("name"))))
        elif wt == rt == "array" and isinstance(w, dict) and isinstance(r, dict):
            self.pair(w.get("items"), wns, r.get("items"), rns, path + "[]")
        elif wt == rt == "map" and isinstance(w, dict) and isinstance(r, dict):
            self.pair(w.get("values"), wns, r.get("values"), rns, path + "{}")
        elif wt == rt or (wt, rt) in PROMOTIONS:
            lw, lr = logical_type(w), logical_type(r)
            if lw is None or lr is None or lw.meaning == lr.meaning or (lw.key, lr.key) in SAFE_PAIRS:
                return
            self.out.append(Mismatch(path or "(the value)", lw, lr, consequence(lw, lr)))

    def _branch(self, w: Any, wns: str | None, branches: list, rns: str | None) -> Any:
        """The reader's union branch Avro resolves a writer's type to (Java's first matching branch)."""
        wt = _kind(w)
        resolved = [self.r.deref(b, rns)[0] for b in branches]
        records = []
        for b in resolved:
            if _kind(b) != wt:
                continue
            if wt not in NAMED:
                return b
            if _full_name(w, wns)[0] == _full_name(b, rns)[0]:
                return b
            if wt in ("record", "error"):
                records.append(b)
        if records:  # Avro takes a record of another name whose fields resolve, preferring the same short name
            same = [b for b in records if str(b.get("name", "")).rpartition(".")[2] == str(w.get("name", "")).rpartition(".")[2]]
            return (same or records)[0]
        for b in resolved:
            if (wt, _kind(b)) in PROMOTIONS:
                return b
        return None


def _kind(node: Any) -> str | None:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and isinstance(node.get("type"), str):
        return node["type"]
    if isinstance(node, list):
        return "union"
    return None


def _full_name(node: dict, namespace: str | None) -> tuple[str, str | None]:
    """A named type's full name and the namespace its own members resolve against."""
    name = str(node.get("name", ""))
    if "." in name:
        return name, name.rpartition(".")[0]
    ns = node.get("namespace", namespace) or None
    return (f"{ns}.{name}" if ns else name), ns


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
