"""Named sources on real Kafka and Spark 4.2: a stateful streamlet whose new versions add an inlet,
read its inlets in another order and drop one continues from its checkpoint and from a savepoint,
with every record counted once; checkpoints written before sources were named (by position) are
matched to the names at the start; what cannot continue is refused with one message.

Each version counts its inlets' records per inlet (state: inlet -> count) into an outlet the
blueprint leaves unconnected (Spark's noop sink): the state is the answer."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.named_sources import NamedSourcesError
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.runner import StreamletRuntime, transport_for
from streamlets.schema import AvroSchema, encode
from streamlets.state.export import read_state
from streamlets.state.restore import check_restore, restore_savepoint
from streamlets.state.savepoint import take_savepoint
from support.kafka import produce, topics

pytestmark = pytest.mark.timeout(600)

IN_SCHEMA = {"type": "record", "name": "Rec", "namespace": "test.named", "fields": [{"name": "v", "type": "long"}]}
IN = AvroSchema.load(IN_SCHEMA)
OUT = {"type": "record", "name": "Count", "namespace": "test.named",
       "fields": [{"name": "src", "type": "string"}, {"name": "n", "type": "long"}]}


def counter(*order: str, named: bool = True, deduplicated: bool = False) -> type[Streamlet]:
    """A streamlet with inlets `<x>` for x in `order`, read in that order, counting records per
    inlet; `named=False` reads them as the SDK did before it named sources (by position);
    `deduplicated` adds a stateful operator (dropDuplicates) before the count."""
    def create_logic(self, ctx) -> None:
        from pyspark.sql import functions as F

        frames = []
        for x in order:
            inlet = getattr(self, f"in_{x}")
            df = ctx.read_stream(inlet) if named else ctx.transport.read_stream(ctx.spark, ctx.topic(inlet))
            frames.append(df.select(F.lit(x).alias("src")))
        union = functools.reduce(lambda a, b: a.unionByName(b), frames)
        if deduplicated:
            union = union.dropDuplicates(["src"])
        ctx.write_stream(union.groupBy("src").agg(F.count("*").alias("n")), self.out, output_mode="update")

    body = {f"in_{x}": AvroInlet(x, IN_SCHEMA) for x in order}
    return type(f"Counter_{''.join(order)}{'' if named else '_unnamed'}{'_dedup' if deduplicated else ''}", (Streamlet,),
                {**body, "out": AvroOutlet("out", OUT, key="src"), "create_logic": create_logic, "__module__": __name__})


class Inputs:
    """Topics t[x] for inlets a, b, c on the session broker, and the records produced so far."""

    def __init__(self, kafka_broker) -> None:
        self.bootstrap = kafka_broker.bootstrap_servers
        self.t = dict(zip("abc", topics(kafka_broker, "named-a", "named-b", "named-c"), strict=True))
        self.sent = {x: 0 for x in "abc"}

    def send(self, **counts: int) -> None:
        for x, n in counts.items():
            produce(self.bootstrap, self.t[x], [(0, encode(IN, {"v": self.sent[x] + i})) for i in range(n)])
            self.sent[x] += n

    def run_config(self, root: Path, app: str = "app") -> StreamletRunConfig:
        return StreamletRunConfig(app_id=app, streamlet="counter", class_name="x.Counter", available_now=True,
                                  topics=dict(self.t), bootstrap_servers=self.bootstrap,
                                  checkpoint_root=str(root / "ck" / app / "counter"))


def run_until_done(spark, cls, run: StreamletRunConfig) -> None:
    runtime = StreamletRuntime(spark, run.app_id, None, transport_for(run))
    try:
        runtime.start_class(cls, run)
        for q in runtime.queries():
            q.awaitTermination(240)
            assert q.exception() is None, q.exception()
    finally:
        runtime.stop()


def counts(spark, run: StreamletRunConfig) -> dict[str, int]:
    """Inlet -> records counted, from the aggregation's state (read_state: also where a first run in
    offset log format 2 left the partition count unpinned, which Spark's reader needs)."""
    return {r.key_src: r.value_count for r in read_state(spark, run.checkpoint_location("out")).collect()}


def offset_ids(run: StreamletRunConfig) -> list[str]:
    """The source ids of the newest offsets/N of the query (v2 logs: `<id>:<offsets>`), sorted."""
    folder = Path(run.checkpoint_location("out"), "offsets")
    newest = max(int(p.name) for p in folder.iterdir() if p.name.isdigit())
    lines = (folder / str(newest)).read_text().splitlines()
    return sorted(line.partition(":")[0] for line in lines[2:]) if lines[0] == "v2" else ["(by position)"] * len(lines[2:])


def restore_and_count(spark, inputs: Inputs, tmp_path: Path, sp: dict, cls: type[Streamlet]) -> None:
    """`cls` passes the restore check of savepoint `sp` and, restored as a branch, counts every
    record sent so far once."""
    branch = inputs.run_config(tmp_path, app="branch")
    check = check_restore(spark, sp, cls, branch)
    assert check.ok, check.problems
    restore_savepoint(sp, branch, branch=True)
    run_until_done(spark, cls, branch)
    assert counts(spark, branch) == inputs.sent


def test_inlets_added_reordered_and_dropped_continue_from_the_checkpoint_and_a_savepoint(spark, kafka_broker, tmp_path):
    inputs = Inputs(kafka_broker)
    run = inputs.run_config(tmp_path)
    inputs.send(a=3, b=2, c=4)
    run_until_done(spark, counter("a", "b"), run)
    assert counts(spark, run) == {"a": 3, "b": 2}
    assert offset_ids(run) == ["inlet_a", "inlet_b"]
    sp = take_savepoint(run.checkpoint_root, str(tmp_path / "sp"), app_id="app", streamlet="counter", cls=counter("a", "b"))
    # Spark 4.2 left the state's partition count out of the first run's offsets (format 2): pinned in the copy
    assert sp["queries"]["out"]["pinned_conf"]["spark.sql.shuffle.partitions"] == "2"

    inputs.send(a=1, b=1, c=1)
    run_until_done(spark, counter("a", "b", "c"), run)  # c added: read from its earliest offset
    assert counts(spark, run) == {"a": 4, "b": 3, "c": 5}
    later = take_savepoint(run.checkpoint_root, str(tmp_path / "sp"), app_id="app", streamlet="counter",
                           cls=counter("a", "b", "c"))
    inputs.send(a=1, b=1, c=1)
    run_until_done(spark, counter("c", "b", "a"), run)  # read in another order
    assert counts(spark, run) == {"a": 5, "b": 4, "c": 6}
    inputs.send(a=1, b=1, c=1)
    run_until_done(spark, counter("c", "a"), run)  # b dropped: its count stays in the state
    assert counts(spark, run) == {"a": 6, "b": 4, "c": 7}
    assert offset_ids(run) == ["inlet_a", "inlet_c"]

    # from the savepoint taken under the first version: the check accepts the new inlet, and the
    # restored branch counts every record once
    restore_and_count(spark, inputs, tmp_path, sp, counter("c", "a", "b"))
    # dropping an inlet passes the check too (its offsets are left behind, said in a note)
    dropped = check_restore(spark, sp, counter("a"), inputs.run_config(tmp_path, app="dropped"))
    assert dropped.ok and any("inlet_b" in n and "not read by the new code" in n for n in dropped.notes), dropped
    # what Spark cannot restore across is still refused, named sources or not (checked against a
    # savepoint past batch 0: the dry run replays the last batch, and batch 0 has no state before it)
    changed = check_restore(spark, later, counter("c", "a", deduplicated=True), inputs.run_config(tmp_path, app="changed"))
    assert not changed.ok and "stateful operators changed" in changed.problems[0], changed.problems


def test_a_checkpoint_by_position_is_named_at_the_start_or_refused_with_the_way_across(spark, kafka_broker, tmp_path):
    inputs = Inputs(kafka_broker)
    old = inputs.run_config(tmp_path)
    inputs.send(a=3, b=2, c=4)
    run_until_done(spark, counter("a", "b", named=False), old)  # as the SDK wrote checkpoints before
    assert offset_ids(old) == ["(by position)"] * 2
    sp = take_savepoint(old.checkpoint_root, str(tmp_path / "sp"), app_id="app", streamlet="counter",
                        cls=counter("a", "b", named=False))

    inputs.send(a=1, b=1)
    run_until_done(spark, counter("b", "c", "a"), old)  # a new version: matched by topic, then named
    assert counts(spark, old) == {"a": 4, "b": 3, "c": 4}
    assert offset_ids(old) == ["inlet_a", "inlet_b", "inlet_c"]

    # the savepoint by position: the check matches it too, and the restored branch continues
    restore_and_count(spark, inputs, tmp_path, sp, counter("a", "b", "c"))

    # a version with a source of its own (unnamed) on the named checkpoint: one line, the way out
    with pytest.raises(NamedSourcesError, match="streamlet 'counter', query 'out'.*keys its sources by name.*load_named"):
        run_until_done(spark, counter("a", "b", named=False), old)
