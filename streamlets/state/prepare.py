"""Before a driver starts its streamlet: the run config's upgrade settings acted on, once each
(stateless reset, restore from a savepoint, repartitioned state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import StreamletError
from ..runtime.runconfig import StreamletRunConfig
from ..runtime.storage import free_name, storage_for
from ..streamlet import Streamlet
from .repartition import RepartitionError, repartition_streamlet
from .restore import check_restore, restore_savepoint
from .savepoint import SavepointError, read_savepoint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def prepare_checkpoints(spark: "SparkSession", cls: type[Streamlet], run: StreamletRunConfig) -> list[str]:
    """Before a driver starts its streamlet: act on the run config's upgrade settings, once each.
    Returns what was done (for the log).

    - `reset_state_token` differs from `<checkpoint_root>.state-token`: the checkpoints are moved
      to `<checkpoint_root>.reset-<token>` (upgrade mode stateless);
    - `restore_from` differs from `<checkpoint_root>.restored-from`: the savepoint is checked
      against this code (streamlets.state.restore) and copied over the checkpoints;
    - `state_partitions` differs from what the checkpoints pinned: they are repartitioned
      (streamlets.state.repartition).

    Raises StreamletError (the driver exits 1, the SparkApplication fails) if the savepoint
    cannot be read or restored across the change, or the state cannot be repartitioned.
    """
    storage = storage_for(run.checkpoint_root, spark)
    root = run.checkpoint_root.rstrip("/")
    done = []

    def recorded(path: str) -> str | None:
        return storage.read_text(path).strip() if storage.exists(path) else None

    if run.reset_state_token and recorded(f"{root}.state-token") != run.reset_state_token:
        if storage.exists(root):
            aside = free_name(storage, f"{root}.reset-{run.reset_state_token}")
            try:
                storage.rename(root, aside)
            except OSError as e:
                raise StreamletError(f"cannot move the checkpoints {root} aside (upgrade mode stateless): {e}") from None
            done.append(f"checkpoints moved to {aside} (upgrade mode stateless)")
        storage.write_text(f"{root}.state-token", run.reset_state_token)
    if run.restore_from and recorded(f"{root}.restored-from") != run.restore_from:
        try:
            sp = read_savepoint(run.restore_from, spark)
            check = check_restore(spark, sp, cls, run)
            if not check.ok:
                raise StreamletError(f"cannot start from savepoint {sp['id']}: " + "; ".join(check.problems))
            moved = restore_savepoint(sp, run, branch=sp["app_id"] != run.app_id, replace=True, spark=spark)
        except (SavepointError, OSError) as e:
            raise StreamletError(f"cannot restore {run.restore_from}: {e}") from None
        storage.write_text(f"{root}.restored-from", run.restore_from)
        done.append(f"restored from {run.restore_from}" + (f" (previous checkpoints in {moved})" if moved else ""))
    if run.state_partitions:
        try:
            done += repartition_streamlet(spark, run)
        except (RepartitionError, OSError) as e:  # RepartitionError also carries Spark's failures
            raise StreamletError(f"cannot repartition the state: {e}") from None
    return done
