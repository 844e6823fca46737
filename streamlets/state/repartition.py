"""Offline state repartitioning: a stopped query's checkpoint with a new number of state partitions.

What later Spark offers as `StreamingCheckpointManager.repartition(checkpoint, n)` (4.2+), done
here with Spark 4.0's public pieces (the installed PySpark; Maven Central here has no 4.2
connectors). A stateful operator keeps state in `spark.sql.shuffle.partitions` partitions, which
Spark pins in `offsets/N` at the first batch: a key lives in partition
`pmod(hash(key columns), partitions)` (HashPartitioning, Murmur3 seeded 42). To change it:

1. read each operator's state after the last committed batch N (the `statestore` data source),
   first checking that every row is where `pmod(hash(key), old)` puts it;
2. write it as `pmod(hash(key), new)` partitions through Spark's own state store provider (a
   small Java loop compiled in the driver by Janino, which Spark ships for its code generation),
   as snapshot files of version N+1 - the state after batch N - in place of the old versions;
3. record the new `spark.sql.shuffle.partitions` in `offsets/N`, where Spark reads the pinned
   settings on restart. The next start runs batch N+1 on the repartitioned state.

Unlike Spark's, no batch is added: an added batch that writes nothing leaves a gap in a file
sink's `_spark_metadata` log, which its readers refuse. Batch N keeps its source offsets,
watermark and commit; only the state files and the pinned partition count change.

The result is built in a hidden folder next to the checkpoint and swapped in with two renames; a
crash between them is finished at the next call. The old checkpoint is kept (hidden beside it,
`.<name>.before-repartition-<N>`, or in a folder the caller names).

Supported: operators whose state key is their partitioning key - streaming aggregations,
dropDuplicates (with or without watermark), (flat)mapGroupsWithState and applyInPandasWithState -
kept by the HDFS-backed state store (Spark's default provider). Refused with a reason: RocksDB
state, stream-stream joins (four stores, keyed by join key and index), session windows (prefix
keys) and transformWithState (column families); for those, export the state and import it into a
fresh query (streamlets.state.export, `initial_state`), where the streamlet folds imported state.
The state passes through the driver, one partition at a time. Local checkpoint folders only,
like state export.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..runtime.checkpoint import (BEFORE_REPARTITION, METADATA, OFFSETS, OPERATOR_METADATA, OPERATOR_METADATA_V2,
                                  SHUFFLE_PARTITIONS, STATE, CheckpointFormatError, commit_log, committed_batches,
                                  local_checkpoint, offsets_log, pin_state_partitions, planned_batches, query_folders,
                                  read_log)
from ..runtime.storage import LocalStorage, free_name, is_local, local_path
from .errors import StateError
from .export import StateExportError, read_raw_state, stateful_operators

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..runtime.runconfig import StreamletRunConfig

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
# Files of one state version in a partition folder (HDFS-backed: N.delta, N.snapshot, .N.delta.crc)
_VERSION_SUFFIXES = (".delta", ".snapshot", ".delta.crc", ".snapshot.crc")
_COMPLETE = ".repartition-complete"  # written last into a build: it may replace the checkpoint
T = TypeVar("T")


class RepartitionError(StateError):
    """The checkpoint cannot be repartitioned; the message names the checkpoint, the batch or
    the operator and says what to do. Nothing was changed."""


@dataclass
class Repartitioned:
    """What `repartition_checkpoint` did: `batch_id` is the last committed batch, which the state
    is as of, `rows` the state rows moved per `operator/store`, `previous` where the old
    checkpoint went (None if deleted or nothing changed)."""

    checkpoint: str
    batch_id: int
    from_partitions: int
    to_partitions: int
    changed: bool = False
    rows: dict[str, int] = field(default_factory=dict)
    previous: str | None = None


# The per-row loop runs in the JVM: a py4j call per row costs about a millisecond.
_WRITER_SOURCE = """
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;

public class StreamletsStateWriter {
  /** Puts (key struct, value struct, partition int) rows, sorted by partition, into a new version
   *  of providers[partition]'s store and commits each; returns the number of rows. */
  public static long write(scala.collection.Iterator rows, StateStoreProvider[] providers,
                           int keyFields, int valueFields, String storeName) {
    long n = 0;
    int current = -1;
    StateStore store = null;
    while (rows.hasNext()) {
      InternalRow r = (InternalRow) rows.next();
      int p = r.getInt(2);
      if (p != current) {
        if (store != null) store.commit();
        // Spark 4.2's getStore(version, uniqueId, two flags): the flags as Scala's defaults give them
        store = providers[p].getStore(0L, scala.Option.empty(), providers[p].getStore$default$3(),
                                      providers[p].getStore$default$4());
        current = p;
      }
      store.put((UnsafeRow) r.getStruct(0, keyFields), (UnsafeRow) r.getStruct(1, valueFields), storeName);
      n++;
    }
    if (store != null) store.commit();
    return n;
  }
}
"""
_writer_cache: dict[int, Any] = {}


def _writer(spark: "SparkSession") -> Any:
    """The compiled writer's `write` method (java.lang.reflect.Method), once per JVM."""
    jvm = spark.sparkContext._jvm
    key = id(spark.sparkContext._gateway)
    if key not in _writer_cache:
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(jvm.Thread.currentThread().getContextClassLoader())
        compiler.cook(_WRITER_SOURCE)
        cls = compiler.getClassLoader().loadClass("StreamletsStateWriter")
        _writer_cache[key] = next(m for m in cls.getMethods() if m.getName() == "write")
    return _writer_cache[key]


def _damaged(read: Callable[[], T]) -> T:
    """A checkpoint file read through streamlets.runtime.checkpoint; a damaged one is a RepartitionError."""
    try:
        return read()
    except CheckpointFormatError as e:
        raise RepartitionError(f"{e}; not touched") from None


def _read_log(path: Path) -> tuple[list[str], dict[str, Any]]:
    """A Spark log file's lines and JSON line (streamlets.runtime.checkpoint.read_log)."""
    return _damaged(lambda: read_log(LocalStorage(), str(path)))


def _committed_and_planned(checkpoint: Path) -> tuple[list[int], list[int]]:
    storage = LocalStorage()
    return committed_batches(storage, str(checkpoint)), planned_batches(storage, str(checkpoint))


def _operator_metadata(state_dir: Path, operator_id: int) -> dict[str, Any]:
    """`state/<op>/_metadata/metadata` (Spark's OperatorStateMetadataV1: "v1" then JSON)."""
    meta = state_dir / str(operator_id) / OPERATOR_METADATA / METADATA
    if (state_dir / str(operator_id) / OPERATOR_METADATA / OPERATOR_METADATA_V2).exists():
        raise RepartitionError(f"operator {operator_id} keeps transformWithState state "
                               f"({STATE}/{operator_id}/{OPERATOR_METADATA}/{OPERATOR_METADATA_V2}), "
                               "which has column families: export its state and import it into a fresh query instead")
    if not meta.is_file():
        raise RepartitionError(f"{meta} is missing: the operator's metadata (written by Spark 3.5 and later) is needed")
    return _read_log(meta)[1]


def _check_operators(spark: "SparkSession", path: Path, batch: int, old: int) -> list[dict[str, Any]]:
    """The stateful operators, after refusing those this module cannot move (module docstring)."""
    ops = stateful_operators(spark, path)
    by_id: dict[int, list[dict[str, Any]]] = {}
    for op in ops:
        by_id.setdefault(op["operator_id"], []).append(op)
    for op_id, stores in by_id.items():
        name = stores[0]["operator_name"]
        if len(stores) > 1 or stores[0]["store_name"] != "default":
            raise RepartitionError(
                f"{path}: operator {op_id} ({name}) keeps {len(stores)} state stores "
                f"({', '.join(s['store_name'] for s in stores)}), partitioned by part of their key (a stream-stream join): "
                "repartitioning it is not supported; export its state and import it into a fresh query")
        meta = _operator_metadata(path / STATE, op_id)
        info = meta.get("stateStoreInfo", [{}])[0]
        if info.get("numColsPrefixKey", 0):
            raise RepartitionError(
                f"{path}: operator {op_id} ({name}) keeps prefix-keyed state (a session window), partitioned by the "
                "grouping columns only: repartitioning it is not supported; export its state and import it instead")
        if stores[0]["partitions"] != old:
            raise RepartitionError(f"{path}: operator {op_id} has {stores[0]['partitions']} state partitions, but offsets/{batch} "
                                   f"pins {SHUFFLE_PARTITIONS}={old}: the checkpoint is inconsistent; not touched")
        misplaced = (read_raw_state(spark, path, op_id, "default", batch)
                     .where(f"pmod(hash(key), {old}) != partition_id").limit(1).count())
        if misplaced:
            raise RepartitionError(
                f"{path}: operator {op_id} ({name}) does not place its state by the hash of its whole key "
                f"(a row of partition p is not where pmod(hash(key), {old}) puts it): repartitioning it would lose keys; "
                "export its state and import it into a fresh query instead")
    return ops


def _write_operator(spark: "SparkSession", path: Path, target_state: Path, scratch_state: Path,
                    op: dict[str, Any], batch: int, partitions: int, conf: dict[str, str]) -> int:
    """Write one operator's state as `partitions` partitions of version batch+1 under
    `target_state/<op>/<p>/`. Returns the rows written."""
    from pyspark.sql import functions as F

    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    S = jvm.org.apache.spark.sql.execution.streaming.state
    op_id = op["operator_id"]
    table = (read_raw_state(spark, path, op_id, "default", batch)
             .select("key", "value", F.expr(f"pmod(hash(key), {partitions})").alias("partition"))
             .orderBy("partition"))
    jdf = table._jdf
    key_schema = jdf.schema().apply("key").dataType()
    value_schema = jdf.schema().apply("value").dataType()
    # The state store settings the checkpoint pinned (compression codec, format versions)
    sql_conf = spark._jsparkSession.sessionState().conf().clone()
    for k, v in conf.items():
        sql_conf.setConfString(k, v)
    # Committed versions are not cached in the driver: one partition's rows in memory at a time
    sql_conf.setConfString("spark.sql.streaming.maxBatchesToRetainInMemory", "0")
    store_conf = S.StateStoreConf(sql_conf, jvm.org.apache.spark.api.python.PythonUtils.toScalaMap({}))
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    none = jvm.scala.Option.empty()
    providers = gateway.new_array(S.StateStoreProvider, partitions)
    for p in range(partitions):
        store_id = S.StateStoreId(str(scratch_state), op_id, p, "default")
        providers[p] = S.StateStoreProvider.createAndInit(
            S.StateStoreProviderId(store_id, jvm.java.util.UUID.randomUUID()), key_schema, value_schema,
            S.NoPrefixKeyStateEncoderSpec(key_schema), False, store_conf, hadoop_conf, False, none)
    args = gateway.new_array(jvm.Object, 5)
    # executeToIterator streams partitions as serialized copies (toRdd rows are reused buffers)
    args[0] = jdf.queryExecution().executedPlan().executeToIterator()
    args[1] = providers
    args[2] = len(key_schema.fields())
    args[3] = len(value_schema.fields())
    args[4] = "default"
    try:
        rows = int(_writer(spark).invoke(None, args))
        for p in range(partitions):
            written = scratch_state / str(op_id) / str(p) / "1.delta"
            if not written.exists():  # a partition no key hashes to: an empty store
                provider = providers[p]
                flags = (getattr(provider, "getStore$default$3")(), getattr(provider, "getStore$default$4")())
                provider.getStore(0, none, *flags).commit()
    finally:
        for p in range(partitions):
            providers[p].close()
    # A delta holding only puts is a snapshot file (the HDFS-backed provider writes both as
    # key/value records ending in -1); version batch+1 is the state after the batch.
    for p in range(partitions):
        dest = target_state / str(op_id) / str(p)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(str(scratch_state / str(op_id) / str(p) / "1.delta"), dest / f"{batch + 1}.snapshot")
    return rows


def _copy_without_state_versions(src: Path, dst: Path) -> None:
    """Copy the checkpoint but the state version files of every partition (`_metadata` kept)."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        rel = Path(folder).relative_to(src).parts
        in_partition = len(rel) == 3 and rel[0] == STATE and rel[2].isdigit()
        return [n for n in names if n.lstrip(".").endswith(_VERSION_SUFFIXES)] if in_partition else []

    shutil.copytree(src, dst, ignore=ignore)


def repartition_streamlet(spark: "SparkSession", run: "StreamletRunConfig") -> list[str]:
    """Repartition each query checkpoint of a stopped streamlet (`run.checkpoint_root/<query>`)
    to `run.state_partitions`, before it starts; returns a line per query (changed or deferred).

    A query whose last batch was planned but not committed (a driver stopped mid-batch) is not
    touched: it runs that batch again with its pinned count and is repartitioned at a later
    start. Previous checkpoints are kept in `<checkpoint_root>.before-repartition/`. Local
    checkpoint folders only. Raises RepartitionError naming the query.
    """
    if not run.state_partitions:
        return []
    if not is_local(run.checkpoint_root):
        raise RepartitionError(f"{run.checkpoint_root}: repartitioning works on local checkpoint folders only")
    root = local_path(run.checkpoint_root)
    done = []
    for query in _query_names(root):
        checkpoint = root / query
        _recover(checkpoint)
        committed, planned = _committed_and_planned(checkpoint)
        if not committed:
            continue  # nothing pinned yet: its first batch takes the session's spark.sql.shuffle.partitions
        if planned and planned[-1] > committed[-1]:
            done.append(f"query {query!r}: batch {planned[-1]} was planned but not committed; it runs again with the "
                        "pinned partition count, and the state is repartitioned at a later start")
            continue
        try:
            result = repartition_checkpoint(spark, checkpoint, run.state_partitions,
                                            previous_dir=Path(f"{root}{BEFORE_REPARTITION}"))
        except RepartitionError as e:
            raise RepartitionError(f"streamlet {run.streamlet!r}, query {query!r}: {e}") from None
        if result.changed:
            moved = sum(result.rows.values())
            done.append(f"query {query!r}: {result.from_partitions} -> {result.to_partitions} state partitions "
                        f"({moved:,} state rows as of batch {result.batch_id}; previous checkpoint in {result.previous})")
    return done


def _query_names(root: Path) -> list[str]:
    """Query checkpoints under a streamlet's root, and queries a crash left mid-swap."""
    names = set(query_folders(LocalStorage(), str(root)))
    names |= {p.name[1:].split(".repartition-")[0] for p in root.glob(".*.repartition-*")}
    return sorted(names)


# Work folders beside a checkpoint are hidden (a leading dot): savepoints and the loop above only
# take folders without one for queries.
def _building(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.repartition-{tag}")


def _recover(path: Path) -> None:
    """Finish a swap a crash interrupted (a complete build, the checkpoint already moved aside),
    and drop unfinished builds and scratch folders."""
    for scratch in path.parent.glob(f".{path.name}.scratch-*"):
        shutil.rmtree(scratch, ignore_errors=True)
    for build in sorted(path.parent.glob(f".{path.name}.repartition-*")):
        if not path.exists() and (build / _COMPLETE).is_file():
            build.rename(path)
            (path / _COMPLETE).unlink()
        else:
            shutil.rmtree(build, ignore_errors=True)


@dataclass
class _Plan:
    path: Path
    batch: int
    offsets: list[str]  # offsets/N's lines: version, metadata JSON, one per source
    meta: dict[str, Any]  # offsets/N's metadata; its `conf` holds the settings Spark pinned
    result: Repartitioned

    @property
    def conf(self) -> dict[str, str]:
        return self.meta.get("conf", {})


def plan_repartition(checkpoint: str | Path, partitions: int) -> _Plan:
    """The file checks of `repartition_checkpoint`, without Spark: the checkpoint, its last
    committed batch and its current partition count. Raises RepartitionError."""
    if partitions < 1:
        raise RepartitionError(f"the number of state partitions must be at least 1, not {partitions}")
    _recover(Path(checkpoint).expanduser().resolve())
    try:
        path = local_checkpoint(checkpoint)
    except CheckpointFormatError as e:
        raise RepartitionError(str(e)) from None
    committed, planned = _committed_and_planned(path)
    if not committed:
        raise RepartitionError(f"{path}: no committed batch yet; a query without state starts with the session's "
                               f"{SHUFFLE_PARTITIONS}, set that instead")
    batch = committed[-1]
    if planned and planned[-1] > batch:
        raise RepartitionError(f"{path}: batch {planned[-1]} was planned but not committed (the query stopped mid-batch); "
                               "run the query until it commits, or restore a savepoint, then repartition")
    storage = LocalStorage()
    _damaged(lambda: pin_state_partitions(storage, str(path)))  # a first run in offset log format 2 pins none
    if _damaged(lambda: commit_log(storage, str(path), batch)).get("stateUniqueIds"):
        raise RepartitionError(f"{path}: the state files carry unique ids (state store checkpoint format version 2); "
                               "repartitioning supports format version 1 (Spark's default) only")
    offsets, meta = _damaged(lambda: offsets_log(storage, str(path), batch))
    conf = meta.get("conf", {})
    old = int(conf.get(SHUFFLE_PARTITIONS, "0") or 0)
    plan = _Plan(path, batch, offsets, meta, Repartitioned(str(path), batch, old, partitions))
    if old != partitions and conf.get(PROVIDER, HDFS_PROVIDER) != HDFS_PROVIDER:
        raise RepartitionError(
            f"{path}: the state is kept by {conf[PROVIDER].rsplit('.', 1)[-1]}; repartitioning supports the HDFS-backed "
            "state store (Spark's default) only: export the state and import it into a fresh query instead")
    return plan


def repartition_checkpoint(spark: "SparkSession", checkpoint: str | Path, partitions: int, *,
                           previous_dir: Path | None = None) -> Repartitioned:
    """Give a stopped query's checkpoint `partitions` state partitions (`spark.sql.shuffle.partitions`).

    The query must not be running (nothing here can tell). The last batch N must be committed:
    an `offsets/N+1` without a commit (a query stopped mid-batch) is refused. The same partition
    count as now changes nothing (`changed` is False). The previous checkpoint is kept as
    `.<name>.before-repartition-<N>` beside it, or as `<name>-<N>` in `previous_dir`.
    Raises RepartitionError (module docstring for what is supported); nothing is changed then.
    """
    from .restore import explain_spark_error

    plan = plan_repartition(checkpoint, partitions)
    path, batch, offsets, conf, result = plan.path, plan.batch, plan.offsets, plan.conf, plan.result
    old = result.from_partitions
    if old == partitions:
        return result
    tag = uuid.uuid4().hex[:8]
    building = _building(path, tag)
    scratch = path.with_name(f".{path.name}.scratch-{tag}")
    try:
        ops = _check_operators(spark, path, batch, old)
        _copy_without_state_versions(path, building)
        for op in ops:
            op_dir = building / STATE / str(op["operator_id"])
            for old_partition in range(partitions, old):  # scaling down: those partitions go
                shutil.rmtree(op_dir / str(old_partition), ignore_errors=True)
            key = f"{op['operator_id']}/{op['store_name']}"
            result.rows[key] = _write_operator(spark, path, building / STATE, scratch / STATE, op, batch,
                                               partitions, conf)
            op_meta_path = op_dir / OPERATOR_METADATA / METADATA
            op_meta = _operator_metadata(building / STATE, op["operator_id"])
            for info in op_meta.get("stateStoreInfo", []):
                info["numPartitions"] = partitions
            op_meta_path.write_text("v1\n" + json.dumps(op_meta, separators=(",", ":")))
            op_meta_path.with_name(".metadata.crc").unlink(missing_ok=True)
        # Spark pins the settings of the last batch on restart: the new partition count goes there
        meta = {**plan.meta, "conf": {**conf, SHUFFLE_PARTITIONS: str(partitions)}}
        (building / OFFSETS / str(batch)).write_text(
            "\n".join([offsets[0], json.dumps(meta, separators=(",", ":")), *offsets[2:]]))
        (building / OFFSETS / f".{batch}.crc").unlink(missing_ok=True)
        (building / _COMPLETE).write_text("")
    except BaseException as e:
        shutil.rmtree(building, ignore_errors=True)
        if isinstance(e, (RepartitionError, KeyboardInterrupt, SystemExit)):
            raise
        if isinstance(e, StateExportError):
            raise RepartitionError(str(e)) from None
        raise RepartitionError(f"{path}: {explain_spark_error(str(e)) or type(e).__name__}; not touched") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if previous_dir is not None:
        previous_dir.mkdir(parents=True, exist_ok=True)
        previous = Path(free_name(LocalStorage(), str(previous_dir / f"{path.name}-{batch}")))
    else:
        previous = Path(free_name(LocalStorage(), str(path.with_name(f".{path.name}{BEFORE_REPARTITION}-{batch}"))))
    path.rename(previous)
    try:
        building.rename(path)
    except OSError:
        previous.rename(path)
        raise
    (path / _COMPLETE).unlink()
    result.previous = str(previous)
    result.changed = True
    return result
