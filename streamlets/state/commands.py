"""The state layer's plug-ins to the runtime (streamlets.runtime.registry): the `savepoint` and
`dump-state` control commands, and the reader of imported state. Imported by streamlets.state,
so importing any state module registers them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..errors import StreamletError
from ..runtime.control import Outcome
from ..runtime.registry import command, initial_state_reader
from ..runtime.storage import storage_for
from .export import export_state, stateful_operators
from .export_files import read_export_stream
from ..runtime.checkpoint import query_folders
from .savepoint import batch_ids, prune_savepoints, take_savepoint

if TYPE_CHECKING:
    from ..runtime.runner import StreamletRuntime

initial_state_reader(read_export_stream)


@command("savepoint")
def savepoint(runtime: "StreamletRuntime", streamlet: str, args: dict[str, str], command_id: str) -> Outcome:
    """A savepoint of the streamlet (streamlets.state.savepoint), pruned to the run config's
    savepoint_max_count / savepoint_max_age_seconds; `location` is its folder.

    `args.stop = true` is Flink's stop-with-savepoint (what the operator sends before an upgrade
    in upgrade mode `savepoint`): the streamlet's queries stop first, so that no batch runs after
    the savepoint and whatever continues from the checkpoints continues from it. The process then
    ends as after a `stop` command (a driver exits 0)."""
    ctx = runtime.contexts[streamlet]
    run = ctx.run
    stop = str(args.get("stop", "")).lower() in ("true", "yes", "1")
    # the driver's loop leaves the stopped queries alone until the savepoint is taken and answered
    with runtime.stops_expected() if stop else contextlib.nullcontext():
        if stop:
            runtime.stop_queries(streamlet)
        sp = take_savepoint(run.checkpoint_root, run.savepoints(), app_id=run.app_id, streamlet=streamlet,
                            cls=type(ctx.streamlet), reason=args.get("reason", "control stream"), spark=ctx.spark)
        if run.savepoint_max_count or run.savepoint_max_age_seconds:
            prune_savepoints(run.savepoints(), run.app_id, streamlet, keep=run.savepoint_max_count,
                             max_age_seconds=run.savepoint_max_age_seconds, spark=ctx.spark)
    ids = batch_ids(sp)
    none = sorted(q for q, b in ids.items() if b is None)
    return Outcome(f"savepoint {sp['id']}" + (" (queries stopped)" if stop else "")
                   + (f"; no batch committed yet by {', '.join(none)}: restored, it starts from its first batch" if none else ""),
                   sp["path"], {q: b for q, b in ids.items() if b is not None})


@command("dump-state")
def dump_state(runtime: "StreamletRuntime", streamlet: str, args: dict[str, str], command_id: str) -> Outcome:
    """The state of each stateful query at its last committed batch, exported with
    streamlets.state.export (`args.format`: jsonl, parquet or csv) under the run config's
    state-dumps folder; StreamletError if the streamlet holds no state."""
    ctx = runtime.contexts[streamlet]
    run = ctx.run
    fmt = args.get("format", "jsonl")
    location = f"{run.state_dumps().rstrip('/')}/{command_id}/{streamlet}"
    dumped = {}
    for q in query_folders(storage_for(run.checkpoint_root, ctx.spark), run.checkpoint_root):
        if stateful_operators(ctx.spark, run.checkpoint_location(q)):
            manifest = export_state(ctx.spark, run.checkpoint_location(q), f"{location}/{q}", fmt)
            dumped[q] = manifest["batch_id"]
    if not dumped:
        raise StreamletError(f"streamlet {run.streamlet!r} holds no state (no stateful query has committed a batch)")
    return Outcome(f"state of {len(dumped)} query(ies) as {fmt}", location, dumped)
