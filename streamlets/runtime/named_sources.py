"""Starting a query with named sources (streamlets.sources), and the checkpoints written before.

At a query's start (StreamletContext's start path) `start_conf` looks at the query's streaming
sources (the leaves of its analyzed plan) and at its checkpoint's newest `offsets/N`:

- every source named, checkpoint new or keyed by name: the query starts with NAMED_START (Spark's
  source evolution on, offset log format 2, which keys offsets by name). It may then add, drop
  and reorder sources: a new source starts where its reader says (an inlet: the earliest offset),
  a dropped one's offsets are left behind.
- a source unnamed (a streamlet's own `spark.readStream...load()`): the query starts as before,
  its offsets by position; a checkpoint that keys its sources by name refuses it
  (NamedSourcesError), as Spark would fail it ("All sources should be named").
- every source named, checkpoint by position (written before sources were named, or by a
  version with an unnamed source): the checkpoint is rewritten to names first
  (checkpoint.rewrite_sources_by_name), each position given the named source it was: by
  position when the number of sources is the same and each Kafka position read the topic its
  named source reads, else by topic (a Kafka position whose topics no named source reads is a
  dropped source). A position neither way matches refuses the start (NamedSourcesError, naming
  the way across). The rewrite waits while the newest batch is planned but not committed (it
  changes the batch's offset log entry, which an exactly-once outlet's ledger identifies it by):
  a query whose sources still match by position replays that batch by position, and is
  rewritten at a later start.

Spark 4.2's format 2 does not pin `spark.sql.shuffle.partitions` in the batches of a query's
first run, so a restart would load the state with the session's number: the start pins the
state's own in the committed batches (checkpoint.pin_state_partitions) and sets it for a replayed
uncommitted batch without it. It also
turns off Spark's check for an unfinished offline repartitioning on restart, which fails
(`None.get`) on a batch without the pinned number (our own repartitioning,
streamlets.state.repartition, adds no batch).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..errors import StreamletError
from ..sources import SOURCE_EVOLUTION
from .checkpoint import (SHUFFLE_PARTITIONS, committed_batches, named_by_position, pin_state_partitions, pinned_conf,
                         planned_batches, rewrite_sources_by_name, source_entries)
from .storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

OFFSET_LOG_FORMAT = "spark.sql.streaming.offsetLog.formatVersion"
CHECK_UNFINISHED_REPARTITION = "spark.sql.streaming.checkUnfinishedRepartitionOnRestart"
NAMED_START = {SOURCE_EVOLUTION: "true", OFFSET_LOG_FORMAT: "2", CHECK_UNFINISHED_REPARTITION: "false"}
_STREAMING_LEAVES = ("StreamingRelationV2", "StreamingRelation")
_NAME = re.compile(r'name="([A-Za-z0-9_]+)"')


class NamedSourcesError(StreamletError):
    """A query cannot start on its checkpoint: the checkpoint keys its sources by name and the
    query has an unnamed one, or by position and they cannot be matched to the query's names.
    The message names the streamlet, the query and the way across."""


def plan_sources(df: "DataFrame") -> list[str | None]:
    """The streaming sources of `df`'s analyzed plan, in Spark's order (the plan's leaves, depth
    first): each one's name, None if unnamed. One entry per source even if the plan reads it
    twice."""
    out: list[str | None] = []
    seen: set[Any] = set()

    def walk(node: Any) -> None:
        if node.getClass().getSimpleName() in _STREAMING_LEAVES:
            if node not in seen:  # the JVM node's equals: one source read twice is one source
                seen.add(node)
                found = _NAME.search(str(node.sourceIdentifyingName()))
                out.append(found.group(1) if found else None)
            return
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().analyzed())  # noqa: SLF001
    return out


def kafka_topics(offsets: Any) -> set[str] | None:
    """The topics of a Kafka source's offsets ({topic: {partition: offset}}); None for another source."""
    if isinstance(offsets, dict) and offsets and all(isinstance(v, dict) for v in offsets.values()):
        return set(offsets)
    return None


def match_positions(old: list[Any], names: list[str], topics: dict[str, str]) -> dict[int, str | None]:
    """Each position of a positional checkpoint's sources (`old`: their offsets, in order) -> the
    named source it was (None: no longer read). `names`: the query's sources in plan order;
    `topics`: name -> the Kafka topic it reads (the SDK's inlets). By position when the counts
    agree and every Kafka position read its named source's topic; else by topic. ValueError
    saying why when a position matches neither way (not Kafka, or its topic read by two)."""
    def same(i: int) -> bool:
        found = kafka_topics(old[i])
        return found is None or found == {topics.get(names[i])}

    if len(old) == len(names) and all(same(i) for i in range(len(old))):
        return dict(enumerate(names))
    out: dict[int, str | None] = {}
    for i, offsets in enumerate(old):
        found = kafka_topics(offsets)
        if found is None:
            raise ValueError(f"source {i} of the checkpoint is not a Kafka source, and the sources differ in number "
                             f"({len(old)} in the checkpoint, {len(names)} now)")
        readers = [n for n in names if topics.get(n) is not None and {topics[n]} == found]
        if len(readers) > 1:
            raise ValueError(f"source {i} of the checkpoint read {', '.join(sorted(found))}, which {len(readers)} sources "
                             f"read now ({', '.join(readers)})")
        out[i] = readers[0] if readers else None
    taken = [n for n in out.values() if n]
    if len(taken) != len(set(taken)):
        raise ValueError("two sources of the checkpoint read the same topic")
    return out


def start_conf(storage: Storage, location: str, sources: list[str | None], topics: dict[str, str], *,
               where: str, replay_ok: bool = False) -> dict[str, str]:
    """The SQL settings a query with `sources` (plan_sources) starts with on its checkpoint
    `location` (module docstring), after rewriting a positional checkpoint to names where that
    applies. `topics`: source name -> the Kafka topic it reads; `where`: "streamlet 'x', query 'y'"
    for messages; `replay_ok`: rewrite even when the newest batch is not committed (a dry run,
    whose sinks write nothing). Raises NamedSourcesError."""
    if not sources:
        return {}
    named = all(sources)
    planned = planned_batches(storage, location)
    if not planned:
        return dict(NAMED_START) if named else {}
    newest = planned[-1]
    entries = source_entries(storage, location, newest)
    ids = [i for i, _ in entries]
    by_position = named_by_position(ids) if entries else False
    if not named:
        if not by_position:
            unnamed = sum(1 for s in sources if s is None)
            raise NamedSourcesError(
                f"{where}: its checkpoint {location} keys its sources by name ({', '.join(str(i) for i in ids)}), "
                f"but {unnamed} source(s) of the query are unnamed: name every source the query reads "
                "(streamlets.sources.load_named for a source of the streamlet's own)")
        return {}
    conf = dict(NAMED_START)
    if by_position:
        names = [s for s in sources if s]
        try:
            mapping = match_positions([o for _, o in entries], names, topics)
        except ValueError as e:
            raise NamedSourcesError(
                f"{where}: its checkpoint {location} keys its sources by position (written before its sources were "
                f"named) and they cannot be matched to the query's named sources ({', '.join(names)}): {e}. The way "
                "across: start the version the checkpoint was written by once with this SDK (its sources then match "
                "by position and are named), then this one; or start this one without the state") from None
        committed = committed_batches(storage, location)
        if not replay_ok and (not committed or committed[-1] != newest):
            if mapping == dict(enumerate(names)):
                return {}  # replays the uncommitted batch by position; named at a later start
            raise NamedSourcesError(
                f"{where}: its checkpoint {location} keys its sources by position and its batch {newest} was "
                "planned but not committed; the query's sources changed, so that batch cannot be replayed: start "
                "the previous version until the batch commits, then this one")
        rewrite_sources_by_name(storage, location, mapping, {SOURCE_EVOLUTION: "true"})
    partitions = pin_state_partitions(storage, location)
    if partitions and SHUFFLE_PARTITIONS not in pinned_conf(storage, location, newest):
        conf[SHUFFLE_PARTITIONS] = str(partitions)  # an uncommitted batch without the pin, replayed
    return conf
