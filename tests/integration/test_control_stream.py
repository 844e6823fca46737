"""The control stream on a real Kafka broker: a running stateful streamlet (local Spark) answers
ping, dump-state, savepoint, reload-config and stop on its results topic; dump-state gives the
same rows as the offline export of the same batch; bad commands get error results and the
streamlet carries on."""

from __future__ import annotations

import time
import uuid

import pytest

from streamlets import IntegerParameter
from streamlets.runtime.control import (COMMAND_SCHEMA, Command, ControlListener, await_results, control_topic,
                                results_consumer, results_topic, send_command)
from streamlets.runtime.runner import StreamletRuntime, transport_for
from streamlets.state.savepoint import read_savepoint
from streamlets.state.export import export_state, read_export
from support.counts_app import Counts, expected, run_config, state_rows, write_file

pytestmark = pytest.mark.timeout(600)


class TunableCounts(Counts):
    """Counts with a config parameter, for reload-config."""

    limit = IntegerParameter("limit", "a parameter to reload", default=10)


def rows(df) -> set[tuple]:
    return {tuple(r) for r in df.select(*sorted(df.columns)).collect()}


@pytest.fixture
def running(spark, kafka_broker, tmp_path):
    from blueprint.sandbox.kafka_broker import create_topics

    app = f"ctl-{uuid.uuid4().hex[:6]}"
    create_topics(kafka_broker.bootstrap_servers, [(control_topic(app), 1, {}), (results_topic(app), 1, {}),
                                                   (f"{app}.counts", 1, {})])
    source = tmp_path / "in"
    source.mkdir()
    for i in range(3):
        write_file(source, i)
    run = run_config(tmp_path, "counts", source, app=app, bootstrap_servers=kafka_broker.bootstrap_servers,
                     trigger_interval="500 milliseconds")
    runtime = StreamletRuntime(spark, app, None, transport_for(run))
    ctx = runtime.start_class(TunableCounts, run)
    listener = ControlListener(run.bootstrap_servers, app, lambda: list(runtime.contexts), runtime.control)
    listener.start()
    assert listener.ready.wait(60)
    (query,) = ctx.queries
    deadline = time.monotonic() + 120
    while (query.lastProgress or {}).get("batchId", -1) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    yield app, run, runtime, source
    listener.stop()
    runtime.stop()


def ask(bootstrap: str, app: str, command: Command, timeout: float = 120) -> dict:
    consumer = results_consumer(bootstrap, app)
    try:
        send_command(bootstrap, app, command)
        (result,) = await_results(bootstrap, app, command.id, {"counts"}, timeout, consumer=consumer)
    finally:
        consumer.close()
    assert result["command_id"] == command.id and result["streamlet"] == "counts"
    return result


def test_commands_on_a_running_streamlet(spark, kafka_broker, running, tmp_path):
    app, run, runtime, source = running
    bootstrap = kafka_broker.bootstrap_servers

    pong = ask(bootstrap, app, Command("ping"))
    assert pong["status"] == "ok" and pong["batch_ids"]["out"] >= 2

    # dump-state: the state at the last committed batch, the same rows as the offline export
    dump = ask(bootstrap, app, Command("dump-state", target="counts", args={"format": "parquet"}))
    assert dump["status"] == "ok", dump
    batch = dump["batch_ids"]["out"]
    dumped = read_export(spark, f"{dump['location']}/out")
    offline = tmp_path / "offline"
    manifest = export_state(spark, run.checkpoint_location("out"), str(offline), "parquet", batch_id=batch)
    assert manifest["batch_id"] == batch
    assert rows(dumped) == rows(read_export(spark, str(offline)))
    assert {r["key_k"]: (r["value_count"], r["value_sum"]) for r in dumped.collect()} == expected(batch + 1)

    # savepoint through the control stream
    sp = ask(bootstrap, app, Command("savepoint", args={"reason": "from a test"}))
    assert sp["status"] == "ok", sp
    manifest = read_savepoint(sp["location"])
    assert manifest["reason"] == "from a test" and manifest["queries"]["out"]["batch_id"] == sp["batch_ids"]["out"]

    # bad commands: error results, the streamlet carries on
    bad = ask(bootstrap, app, Command("dump-state", args={"format": "xml"}))
    assert bad["status"] == "error" and "xml" in bad["message"]
    bad = ask(bootstrap, app, Command("reload-config", args={"limit": "many"}))
    assert bad["status"] == "error" and "limit" in bad["message"]
    # scale: a local master runs tasks in the driver, nothing to change in place
    bad = ask(bootstrap, app, Command("scale", target="counts", args={"executors": "3"}))
    assert bad["status"] == "error" and "cannot change its executors in place" in bad["message"], bad
    bad = ask(bootstrap, app, Command("scale", args={"executors": "none"}))
    assert bad["status"] == "error" and "args.executors" in bad["message"], bad
    assert all(q.isActive for q in runtime.queries())

    # reload-config: restarted from the checkpoint with the new value; nothing lost
    reloaded = ask(bootstrap, app, Command("reload-config", target="counts", args={"limit": "42"}))
    assert reloaded["status"] == "ok", reloaded
    ctx = runtime.contexts["counts"]
    assert ctx.config["limit"] == 42 and all(q.isActive for q in ctx.queries)
    for i in range(3, 5):
        write_file(source, i)
    deadline = time.monotonic() + 120
    while state_rows(spark, run.checkpoint_location("out")) != expected(5) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert state_rows(spark, run.checkpoint_location("out")) == expected(5)

    # stop-with-savepoint (upgrade mode savepoint): the queries stop first, so the savepoint is the
    # checkpoint's last committed batch and nothing runs after it, even with input arriving
    write_file(source, 5)
    final = ask(bootstrap, app, Command("savepoint", target="counts", args={"reason": "upgrade", "stop": "true"}))
    assert final["status"] == "ok" and final["message"].endswith("(queries stopped)"), final
    assert not any(q.isActive for q in runtime.queries()) and not runtime.restarting.is_set()
    from streamlets.runtime.checkpoint import committed_batches
    from streamlets.runtime.storage import LocalStorage

    last = committed_batches(LocalStorage(), run.checkpoint_location("out"))[-1]
    assert final["batch_ids"]["out"] == last == read_savepoint(final["location"])["queries"]["out"]["batch_id"]
    write_file(source, 6)
    time.sleep(2)  # four trigger intervals: a query still running would have committed a batch
    assert committed_batches(LocalStorage(), run.checkpoint_location("out"))[-1] == last

    # a command for another streamlet is not answered here; stop is
    other = Command("ping", target="somebody-else")
    send_command(bootstrap, app, other)
    assert await_results(bootstrap, app, other.id, None, 3) == []
    stopped = ask(bootstrap, app, Command("stop"))
    assert stopped["status"] == "ok" and stopped["message"] == "stopped 1 query(ies)"
    assert not any(q.isActive for q in runtime.queries())


def test_command_schema_is_the_documented_one():
    fields = {f["name"] for f in COMMAND_SCHEMA["fields"]}
    assert fields == {"id", "command", "target", "args", "issued_at"}
    (command,) = [f["type"] for f in COMMAND_SCHEMA["fields"] if f["name"] == "command"]
    # new symbols come last (`custom`, then `scale`): earlier commands keep their enum indexes, so
    # their bytes are the ones older listeners read (commands carry no writer schema)
    assert command["symbols"] == ["savepoint", "dump_state", "reload_config", "stop", "ping", "custom", "scale"]
    before = dict(COMMAND_SCHEMA, fields=[dict(f, type=dict(f["type"], symbols=f["type"]["symbols"][:-1]))
                                          if f["name"] == "command" else f for f in COMMAND_SCHEMA["fields"]])
    from streamlets.schema import AvroSchema, decode, encode
    record = Command("dump-state", "stats", {"format": "csv"}).record()
    old_reader = decode(AvroSchema.load(before), encode(AvroSchema.load(COMMAND_SCHEMA), record))
    assert {k: old_reader[k] for k in ("id", "command", "target", "args")} == {k: record[k] for k in ("id", "command", "target", "args")}
    with pytest.raises(ValueError, match="unknown command"):
        Command("explode").record()
