"""Logical types across Avro schema resolution on real Spark.

What `blueprint verify` calls compatible decodes, through the SDK's codec (Spark's from_avro with
the writer's schema and the reader's as `avroSchema`), to the value the Avro specification's
resolution gives; and a running inlet whose producer writes other logical types refuses to start.

The property test draws writer/reader schema pairs with logical types (decimals of several
precisions and scales on bytes and fixed, dates, times, UTC and local timestamps, UUIDs, logical
types the specification does not define or that are invalid on their type) in plain, nullable,
union, array, map and nested record fields, with promotions, aliases, added and dropped fields.
Each pair runs through `verify` as producer and consumer of one topic. The pairs verify calls
compatible get values encoded with the writer by fastavro; all of them are then decoded in one
Spark job, as the fields of one record of records (`p<i>`: pair i, in its own namespace), by
codec.decode_value, and compared with `expected`, the specification's resolution written here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from decimal import Decimal

import numpy as np
import pyspark
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from blueprint.loader import load_blueprint
from streamlets.logical_types import logical_type
from blueprint.verify import verify
from streamlets import AvroInlet, AvroOutlet, SchemaMismatchError, Streamlet
from streamlets.runtime.codec import RECORD, decode_value
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime
from streamlets.schema import AvroSchema, encode
from streamlets.runtime.transport import FileTransport

pytestmark = pytest.mark.timeout(900)

PAIRS_WANTED = int(os.environ.get("LOGICAL_TYPE_PAIRS", 1000))  # fewer only to debug the test itself
EXAMPLES = PAIRS_WANTED * 3 // 5  # a round: about a third of them are new schema pairs
ROWS = 2  # values per pair

# --- leaf types: (kind, params) -------------------------------------------------------------------

UNDERLYING = {
    "int": "int", "date": "int", "time-millis": "int",
    "long": "long", "time-micros": "long", "timestamp-millis": "long", "timestamp-micros": "long",
    "timestamp-nanos": "long", "local-timestamp-millis": "long", "local-timestamp-micros": "long",
    "date-on-long": "long",  # invalid (date annotates int): the specification ignores it
    "float": "float", "double": "double", "boolean": "boolean",
    "string": "string", "uuid": "string", "color-string": "string",  # color: a logical type nobody defines
    "bytes": "bytes", "decimal": "bytes", "decimal-fixed": "fixed", "enum": "enum",
}
PROMOTE = {"int": ("long", "float", "double"), "long": ("float", "double"), "float": ("double",),
           "string": ("bytes",), "bytes": ("string",)}
ALL_KINDS = sorted(UNDERLYING)
NUMERIC = [k for k, u in UNDERLYING.items() if u in ("int", "long", "float", "double", "boolean")]
TEXTUAL = [k for k, u in UNDERLYING.items() if u in ("string", "bytes")]
FIXED_PRECISION = {4: 9, 8: 18}  # fixed size -> the largest precision it holds


def leaf_schema(kind: str, params: dict):
    if kind in ("int", "long", "float", "double", "boolean", "string", "bytes"):
        return kind
    if kind == "decimal":
        return {"type": "bytes", "logicalType": "decimal", "precision": params["p"], "scale": params["s"]}
    if kind == "decimal-fixed":
        return {"type": "fixed", "name": params["name"], "size": params["size"], "logicalType": "decimal",
                "precision": params["p"], "scale": params["s"]}
    if kind == "enum":
        schema = {"type": "enum", "name": params["name"], "symbols": params["symbols"]}
        if params.get("default"):
            schema["default"] = params["default"]
        return schema
    if kind == "date-on-long":
        return {"type": "long", "logicalType": "date"}
    if kind == "color-string":
        return {"type": "string", "logicalType": "color"}
    return {"type": UNDERLYING[kind], "logicalType": kind}


# --- type trees: ("leaf", kind, params), ("null",), ("union", [trees]), ("array", t), ("map", t),
#     ("record", name, [(field name, tree, aliases, default or NO_DEFAULT)]) --------------------------

NO_DEFAULT = object()


def to_schema(tree):
    tag = tree[0]
    if tag == "leaf":
        return leaf_schema(tree[1], tree[2])
    if tag == "null":
        return "null"
    if tag == "union":
        return [to_schema(t) for t in tree[1]]
    if tag == "array":
        return {"type": "array", "items": to_schema(tree[1])}
    if tag == "map":
        return {"type": "map", "values": to_schema(tree[1])}
    fields = []
    for name, sub, aliases, default in tree[2]:
        f = {"name": name, "type": to_schema(sub)}
        if aliases:
            f["aliases"] = aliases
        if default is not NO_DEFAULT:
            f["default"] = default
        fields.append(f)
    return {"type": "record", "name": tree[1], "fields": fields}


class Namer:
    """Names of the named types of one pair (writer and reader share them, as resolution needs)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


@st.composite
def decimal_params(draw, fixed_size: int | None = None):
    p = draw(st.integers(1, FIXED_PRECISION[fixed_size] if fixed_size else 20))
    return {"p": p, "s": draw(st.integers(0, p))}


@st.composite
def writer_leaf(draw, namer: Namer, kinds=None):
    kind = draw(st.sampled_from(kinds or ALL_KINDS))
    if kind == "decimal":
        return ("leaf", kind, draw(decimal_params()))
    if kind == "decimal-fixed":
        size = draw(st.sampled_from(sorted(FIXED_PRECISION)))
        return ("leaf", kind, {"name": namer("F"), "size": size, **draw(decimal_params(size))})
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from("ABCD"), min_size=1, max_size=4, unique=True))
        return ("leaf", kind, {"name": namer("E"), "symbols": sorted(symbols)})
    return ("leaf", kind, {})


@st.composite
def reader_leaf(draw, w):
    """Mostly the writer's type; else another precision or scale, symbols, or a type of the same or a
    promoted underlying type (with or without a logical type)."""
    _, kind, params = w
    choice = draw(st.integers(0, 9))
    if choice < 4:
        return w
    if kind in ("decimal", "decimal-fixed") and choice < 7:
        return ("leaf", kind, {**params, **draw(decimal_params(params.get("size")))})
    if kind == "enum":
        symbols = sorted(draw(st.lists(st.sampled_from("ABCD"), min_size=1, max_size=4, unique=True)))
        default = draw(st.one_of(st.none(), st.sampled_from(symbols)))
        return ("leaf", kind, {"name": params["name"], "symbols": symbols, "default": default})
    if kind == "decimal-fixed":
        return w
    if choice == 9:  # any type: mostly one Avro cannot resolve
        other = draw(st.sampled_from([k for k in ALL_KINDS if k not in ("decimal-fixed", "enum")]))
        return ("leaf", other, draw(decimal_params()) if other == "decimal" else {})
    targets = (UNDERLYING[kind], *PROMOTE.get(UNDERLYING[kind], ()))
    other = draw(st.sampled_from([k for k in ALL_KINDS if UNDERLYING[k] in targets
                                  and k not in ("decimal-fixed", "enum")]))
    return ("leaf", other, draw(decimal_params()) if other == "decimal" else {})


ADDED = [  # reader-only fields: (tree, default as the schema writes it)
    (("leaf", "int", {}), 7),
    (("leaf", "string", {}), "x"),
    (("leaf", "date", {}), 19000),
    (("leaf", "timestamp-millis", {}), 1700000000123),
    (("leaf", "decimal", {"p": 6, "s": 2}), "\u0004\u00d2"),  # unscaled 1234: 12.34
    (("union", [("null",), ("leaf", "local-timestamp-micros", {})]), None),
]


@st.composite
def field_pair(draw, namer: Namer):
    shape = draw(st.sampled_from(["plain"] * 4 + ["nullable", "union", "array", "map", "record"]))
    if shape == "union":  # null, a number-like type and a text-like one: Spark's struct of members
        a, b = draw(writer_leaf(namer, NUMERIC)), draw(writer_leaf(namer, TEXTUAL))
        ra, rb = draw(reader_leaf(a)), draw(reader_leaf(b))
        if UNDERLYING[ra[1]] == UNDERLYING[rb[1]] or {UNDERLYING[ra[1]], UNDERLYING[rb[1]]} in ({"int", "long"}, {"float", "double"}):
            ra, rb = a, b  # a union holds one schema per type (and Spark merges int/long, float/double)
        branches = [("null",), ra, rb]
        return ("union", [("null",), a, b]), ("union", draw(st.permutations(branches)))
    if shape == "record":
        n = draw(st.integers(1, 2))
        wl = [draw(writer_leaf(namer)) for _ in range(n)]
        rl = [draw(reader_leaf(w)) for w in wl]
        name = namer("N")
        return (("record", name, [(f"v{i}", w, [], NO_DEFAULT) for i, w in enumerate(wl)]),
                ("record", name, [(f"v{i}", r, [], NO_DEFAULT) for i, r in enumerate(rl)]))
    w = draw(writer_leaf(namer))
    r = draw(reader_leaf(w))
    if shape == "plain":
        if draw(st.integers(0, 9)) == 0:
            return w, ("union", [("null",), r])  # a reader union: Avro picks the branch
        return w, r
    if shape == "nullable":
        return ("union", [("null",), w]), ("union", draw(st.permutations([("null",), r])))
    if shape == "array" and UNDERLYING[r[1]] == "double":
        shape = "map"  # Avro 1.12.0 reads arrays of double as floats: test_arrays_of_double_keep_their_precision
    return (shape, w), (shape, r)


@st.composite
def schema_pairs(draw):
    """(writer tree, reader tree): records of 1 to 3 fields; the reader may drop, add (with a
    default), rename (with the old name as alias) and reorder fields."""
    namer = Namer()
    n = draw(st.integers(1, 3))
    pairs = [draw(field_pair(namer)) for _ in range(n)]
    wfields = [(f"f{i}", w, [], NO_DEFAULT) for i, (w, _) in enumerate(pairs)]
    rfields = []
    for i, (_, r) in enumerate(pairs):
        fate = draw(st.integers(0, 9))
        if fate == 0 and n > 1:
            continue  # dropped by the reader
        if fate == 1:
            rfields.append((f"g{i}", r, [f"f{i}"], NO_DEFAULT))  # renamed, found by its alias
        else:
            rfields.append((f"f{i}", r, [], NO_DEFAULT))
    if draw(st.integers(0, 4)) == 0:
        tree, default = draw(st.sampled_from(ADDED))
        rfields.append(("added", tree, [], default))
    rfields = draw(st.permutations(rfields))
    return ("record", "R", wfields), ("record", "R", rfields)


# --- values, as fastavro takes them, tagged with the union branch they were written as -------------

EPOCH = dt.datetime(1970, 1, 1)
UTC = dt.timezone.utc


def leaf_values(kind: str, params: dict):
    if kind == "int":
        return st.integers(-2 ** 31, 2 ** 31 - 1)
    if kind in ("long", "timestamp-nanos", "date-on-long"):
        return st.integers(-2 ** 63, 2 ** 63 - 1)
    if kind == "date":
        return st.dates(dt.date(1600, 1, 1), dt.date(9999, 12, 31))
    if kind == "time-millis":
        return st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
    if kind == "time-micros":
        return st.times()
    if kind in ("timestamp-millis", "timestamp-micros"):
        values = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(UTC))
        return values.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)) if kind.endswith("millis") else values
    if kind in ("local-timestamp-millis", "local-timestamp-micros"):
        values = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
        return values.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)) if kind.endswith("millis") else values
    if kind == "float":
        return st.floats(width=32, allow_nan=False, allow_infinity=False)
    if kind == "double":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind in ("string", "color-string"):
        return st.text(max_size=8)
    if kind == "uuid":
        return st.uuids()
    if kind == "bytes":
        return st.text(max_size=8).map(lambda s: s.encode())  # UTF-8: a reader may take it as string
    if kind in ("decimal", "decimal-fixed"):
        bound = 10 ** params["p"] - 1
        return st.integers(-bound, bound).map(lambda n: Decimal(n).scaleb(-params["s"]))
    if kind == "enum":
        return st.sampled_from(params["symbols"])
    raise AssertionError(kind)


_VALUES: dict[str, st.SearchStrategy] = {}


def values(tree):
    """A strategy of tagged values: leaves as fastavro takes them, ("branch", i, value) for unions
    (built once per tree: building and validating strategies costs more than drawing from them)."""
    key = json.dumps(tree, default=str)
    if key not in _VALUES:
        _VALUES[key] = _values(tree)
    return _VALUES[key]


def _values(tree):
    tag = tree[0]
    if tag == "leaf":
        return leaf_values(tree[1], tree[2])
    if tag == "null":
        return st.none()
    if tag == "union":
        return st.one_of(*[values(t).map(lambda v, i=i: ("branch", i, v)) for i, t in enumerate(tree[1])])
    if tag == "array":
        return st.lists(values(tree[1]), max_size=3)
    if tag == "map":
        return st.dictionaries(st.text(max_size=4), values(tree[1]), max_size=3)
    return st.fixed_dictionaries({name: values(sub) for name, sub, _, _ in tree[2]})


def for_fastavro(tree, v):
    """A tagged value as fastavro writes it: a union branch of several non-null types in tuple notation."""
    tag = tree[0]
    if tag == "union":
        _, i, inner = v
        branch = tree[1][i]
        value = for_fastavro(branch, inner)
        if branch[0] == "null" or sum(b[0] != "null" for b in tree[1]) == 1:
            return value
        return (UNDERLYING[branch[1]], value)
    if tag == "array":
        return [for_fastavro(tree[1], x) for x in v]
    if tag == "map":
        return {k: for_fastavro(tree[1], x) for k, x in v.items()}
    if tag == "record":
        return {name: for_fastavro(sub, v[name]) for name, sub, _, _ in tree[2]}
    return v


# --- the specification's resolution, as PySpark shows the decoded value --------------------------

def written(kind: str, v):
    """The underlying value the writer writes for a leaf value (a number, text, bytes, symbol)."""
    if kind == "date":
        return (v - EPOCH.date()).days
    if kind in ("time-millis", "time-micros"):
        micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 10 ** 6 + v.microsecond
        return micros // 1000 if kind == "time-millis" else micros
    if kind in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
        delta = (v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v) - EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 10 ** 6 + delta.microseconds
        return micros // 1000 if kind.endswith("millis") else micros
    if kind == "float":
        return float(np.float32(v))
    if kind == "uuid":
        return str(v)
    if kind in ("decimal", "decimal-fixed"):
        return int(v.scaleb(int(-v.as_tuple().exponent)))  # the unscaled number
    return v


def promoted(value, wtype: str, rtype: str):
    if wtype == rtype:
        return value
    if rtype == "float":
        return float(np.float32(np.int64(value))) if wtype == "long" else float(np.float32(value))
    if rtype == "double":
        return float(value)
    if rtype == "long":
        return value
    if (wtype, rtype) == ("string", "bytes"):
        return value.encode()
    if (wtype, rtype) == ("bytes", "string"):
        return value.decode()
    raise AssertionError((wtype, rtype))


def as_read(kind: str, params: dict, value):
    """An underlying value read as the reader's leaf type, as PySpark collects it."""
    if kind == "date":
        return EPOCH.date() + dt.timedelta(days=value)
    if kind == "time-micros":  # Spark 4.2's spark-avro reads it as Spark's TIME type (datetime.time in PySpark)
        return (dt.datetime.min + dt.timedelta(microseconds=value)).time()
    if kind in ("timestamp-millis", "timestamp-micros"):
        micros = value * 1000 if kind.endswith("millis") else value
        return dt.datetime.fromtimestamp(micros // 10 ** 6).replace(microsecond=micros % 10 ** 6)  # PySpark's
    if kind in ("local-timestamp-millis", "local-timestamp-micros"):
        micros = value * 1000 if kind.endswith("millis") else value
        return EPOCH + dt.timedelta(microseconds=micros)
    if kind in ("decimal", "decimal-fixed"):
        return Decimal(value).scaleb(-params["s"])
    if kind == "bytes":
        return bytearray(value)
    if kind == "enum":
        return value if value in params["symbols"] else params["default"]
    return value


def reader_branch(w, branches):
    """The branch of a reader union Avro resolves a writer's type to: the first of the same
    type (named types: of the same name), else the first the type promotes to."""
    wt = "null" if w[0] == "null" else UNDERLYING[w[1]] if w[0] == "leaf" else w[0]
    types = ["null" if b[0] == "null" else UNDERLYING[b[1]] if b[0] == "leaf" else b[0] for b in branches]
    for i, t in enumerate(types):
        if t == wt:
            return i
    for i, t in enumerate(types):
        if t in PROMOTE.get(wt, ()):
            return i
    raise AssertionError(f"no branch of {branches} reads {w}")


def expected(w, r, v):
    """What a reader of tree `r` reads from the tagged value `v` written with tree `w`, by the Avro
    specification's resolution, in the form PySpark collects it (records as dicts, a union of
    several non-null types as Spark's struct of members `member<i>`)."""
    if w[0] == "union":
        _, i, inner = v
        return expected(w[1][i], r, inner)
    if r[0] == "union":
        i = reader_branch(w, r[1])
        value = expected(w, r[1][i], v)
        members = [b for b in r[1] if b[0] != "null"]
        if len(members) == 1 or value is None:  # a null union value is a null struct
            return value
        index = members.index(r[1][i])
        return {f"member{j}": (value if j == index else None) for j in range(len(members))}
    if w[0] == "null":
        return None
    if w[0] == "array":
        return [expected(w[1], r[1], x) for x in v]
    if w[0] == "map":
        return {k: expected(w[1], r[1], x) for k, x in v.items()}
    if w[0] == "record":
        writer_fields = {name: sub for name, sub, _, _ in w[2]}
        out = {}
        for name, sub, aliases, default in r[2]:
            source = next((n for n in [name, *aliases] if n in writer_fields), None)
            out[name] = (expected(writer_fields[source], sub, v[source]) if source is not None
                         else default_value(sub, default))
        return out
    value = promoted(written(w[1], v), UNDERLYING[w[1]], UNDERLYING[r[1]])
    return as_read(r[1], r[2], value)


def default_value(tree, default):
    """A reader field's default (as the schema writes it) as PySpark collects it."""
    if tree[0] == "union":  # the default is of the first branch
        return None if default is None else default_value(tree[1][0], default)
    kind = tree[1]
    if kind == "decimal":
        return as_read(kind, tree[2], int.from_bytes(default.encode("latin-1"), "big", signed=True))
    return as_read(kind, tree[2], default)


# --- verify on each pair, as a producer and a consumer of one topic -----------------------------------

def port_classes(writer: dict, reader: dict) -> dict[str, type]:
    producer = type("Producer", (Streamlet,), {"out": AvroOutlet("out", writer), "create_logic": lambda self, ctx: None})
    consumer = type("Consumer", (Streamlet,), {"inlet": AvroInlet("in", reader), "create_logic": lambda self, ctx: None})
    return {"src": producer, "sink": consumer}


@pytest.fixture(scope="module")
def topic_blueprint(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairs") / "blueprint.yaml"
    path.write_text("streamlets:\n  src: pairs.Producer\n  sink: pairs.Consumer\n"
                    "topics:\n  t: {producers: [src.out], consumers: [sink.in]}\n")
    return load_blueprint(path)


def test_what_verify_calls_compatible_decodes_on_spark_to_the_specifications_value(spark, topic_blueprint):
    seen: set[str] = set()
    compatible: list[tuple] = []  # (writer tree, reader tree, tagged values)
    verdicts = {"compatible": 0, "logical-type-mismatch": 0, "incompatible-schema": 0}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(pair=schema_pairs(), data=st.data())
    def judge(pair, data):
        w, r = pair
        drawn = [data.draw(values(w)) for _ in range(ROWS)]  # always: a replayed example draws the same
        writer, reader = to_schema(w), to_schema(r)
        key = json.dumps([writer, reader], sort_keys=True)
        if key in seen or len(seen) >= PAIRS_WANTED:
            return
        seen.add(key)
        problems = verify(topic_blueprint, port_classes(writer, reader))
        errors = {p.code for p in problems if p.severity == "error"}
        assert errors <= {"logical-type-mismatch", "incompatible-schema"}, problems
        assert not (errors and writer == reader), problems  # a schema always reads itself
        for code in errors:
            verdicts[code] += 1
        if not errors:
            verdicts["compatible"] += 1
            compatible.append((w, r, drawn))

    # Hypothesis draws many schema pairs again (with other values): rounds until enough. Each round
    # has its own seed: under CI (the CI variable) Hypothesis derandomizes, so unseeded rounds would
    # all replay the first one; a seed overrides that and keeps every run reproducible.
    for round_ in range(8):
        seed(20261123 + round_)(judge)()
        if len(seen) >= PAIRS_WANTED:
            break

    print(f"{len(seen)} schema pairs: {verdicts}")
    assert len(seen) >= PAIRS_WANTED, verdicts
    # The generator reaches every verdict often: sound pairs, wrong logical types, wrong structure.
    assert verdicts["compatible"] >= PAIRS_WANTED * 3 // 10, verdicts
    assert verdicts["logical-type-mismatch"] >= PAIRS_WANTED // 10, verdicts
    assert verdicts["incompatible-schema"] >= PAIRS_WANTED // 20, verdicts

    # All compatible pairs in one record of records: field p<i> is pair i, in namespace p<i>.
    writers = [dict(to_schema(w), namespace=f"p{i}") for i, (w, _, _) in enumerate(compatible)]
    readers = [dict(to_schema(r), namespace=f"p{i}") for i, (_, r, _) in enumerate(compatible)]
    writer = AvroSchema.load(composite(writers))
    reader = AvroSchema.load(composite(readers))
    parsed = writer.parsed()
    rows = [(encode(writer, {f"p{i}": for_fastavro(w, vs[k]) for i, (w, _, vs) in enumerate(compatible)}, parsed),)
            for k in range(ROWS)]
    raw = spark.createDataFrame(rows, "value binary")

    decoded = [row[RECORD].asDict(recursive=True)
               for row in decode_value(raw, reader, permissive=False, writer=writer).select(RECORD).collect()]

    wrong = []
    for i, (w, r, vs) in enumerate(compatible):
        for k in range(ROWS):
            want, got = expected(w, r, vs[k]), decoded[k][f"p{i}"]
            if got != want:
                wrong.append(f"writer {json.dumps(writers[i])}\nreader {json.dumps(readers[i])}\n"
                             f"value {vs[k]!r}: expected {want!r}, Spark decoded {got!r}")
    assert not wrong, f"{len(wrong)} of {len(compatible) * ROWS} values differ:\n" + "\n\n".join(wrong[:5])


def composite(records: list[dict]) -> dict:
    return {"type": "record", "name": "Pairs", "namespace": "all",
            "fields": [{"name": f"p{i}", "type": s} for i, s in enumerate(records)]}


# --- the runtime refuses a writer of other logical types ---------------------------------------------

DEC2 = {"type": "record", "name": "Payment", "namespace": "acc", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}
DEC3 = json.loads(json.dumps(DEC2).replace('"scale": 2', '"scale": 3'))


class Ledger(Streamlet):
    inlet = AvroInlet("in", DEC3)
    out = AvroOutlet("out", DEC3)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet), self.out)


def test_an_inlet_refuses_at_start_a_producer_of_other_decimal_scale(spark, tmp_path):
    assert AvroSchema.load(DEC2).fingerprint == AvroSchema.load(DEC3).fingerprint  # logical types are not in it
    transport = FileTransport(tmp_path / "topics")
    for port in ("in", "out"):
        transport.folder(port).mkdir(parents=True)
    run = StreamletRunConfig(app_id="ledger", streamlet="ledger", class_name=Ledger.class_name(),
                             topics={"in": "in", "out": "out"}, writer_schemas={"in": DEC2},
                             checkpoint_root=str(tmp_path / "checkpoints"), available_now=True)
    runtime = StreamletRuntime(spark, run.app_id, None, transport)
    try:
        with pytest.raises(SchemaMismatchError) as refused:
            runtime.start_class(Ledger, run)
        assert runtime.queries() == []  # refused before any query started: nothing decoded
    finally:
        runtime.stop()
    message = str(refused.value)
    assert "streamlet 'ledger', inlet 'in'" in message and "refusing to start" in message
    assert "field 'amount' is decimal(10,2) in the writer but decimal(10,3) in the reader" in message
    assert "12.34 would arrive as 1.234" in message


def test_decode_value_refuses_before_building_the_decoder(spark):
    raw = spark.createDataFrame([(encode(AvroSchema.load(DEC2), {"id": 1, "amount": Decimal("12.34")}),)], "value binary")
    with pytest.raises(SchemaMismatchError, match="field 'amount' is decimal"):
        decode_value(raw, AvroSchema.load(DEC3), permissive=True, writer=AvroSchema.load(DEC2))
    # what it refuses: Avro resolution ignores the scale, and Spark reads 12.34 as 1.234
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    got = raw.select(from_avro(F.col("value"), AvroSchema.load(DEC2).json, {"avroSchema": AvroSchema.load(DEC3).json})
                     .alias("r")).collect()[0]["r"]
    assert got["amount"] == Decimal("1.234")


def test_a_uuid_read_as_string_starts_and_reads_the_text(spark):
    writer = {"type": "record", "name": "T", "fields": [{"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
    reader = {"type": "record", "name": "T", "fields": [{"name": "id", "type": "string"}]}
    w, r = AvroSchema.load(writer), AvroSchema.load(reader)
    assert logical_type(writer["fields"][0]["type"]).name == "uuid"
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    raw = spark.createDataFrame([(encode(w, {"id": value}),)], "value binary")
    row = decode_value(raw, r, permissive=False, writer=w).select(RECORD).collect()[0][RECORD]
    assert row["id"] == str(value)


@pytest.mark.xfail(pyspark.__version__ == "4.0.0", strict=True,
                   reason="AVRO-4108: Avro 1.12.0 (in PySpark 4.0.0) stores arrays of double as floats; fixed in 1.12.1")
def test_arrays_of_double_keep_their_precision(spark):
    schema = AvroSchema.load({"type": "record", "name": "A", "fields": [{"name": "xs", "type": {"type": "array", "items": "double"}}]})
    xs = [0.1, 1e300, 2.0 ** 60 + 1.0]
    raw = spark.createDataFrame([(encode(schema, {"xs": xs}),)], "value binary")
    row = decode_value(raw, schema, permissive=False).select(RECORD).collect()[0][RECORD]
    assert row["xs"] == xs
