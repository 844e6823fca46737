"""Savepoints on the flight-delays aggregation, through the CLI, with real Kafka and Spark.

The application runs January; a savepoint of `stats` is taken while it runs; February arrives
and the application finishes it: its windows equal the batch computation. The savepoint is then
restored into a second application (a branch: `stats` and `files` only, reading the first one's
enriched-flights topic): it processes February from the savepoint's offsets, and the first
application's output as of the savepoint followed by the branch's equals the batch computation
too. The same savepoint is refused for a `stats` whose grouping changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.sandbox import REPO, blueprint_cmd, start_blueprint
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

BRANCH = """\
app-id: flight-delays-whatif
streamlets:
  stats: {stats}
  files: flight_delays.egress.DelayStatsFiles
topics:
  enriched-flights:
    name: flight-delays.enriched-flights   # the first application's topic
    managed: false
    consumers: [stats.in]
  delay-stats:
    producers: [stats.out]
    consumers: [files.in]
    partitions: 3
"""

REGROUPED = '''\
from pyspark.sql import functions as F

from flight_delays.stats import DepartureDelayStats


class ByCarrier(DepartureDelayStats):
    """Grouped by carrier as well: a different state key for the aggregation."""

    def create_logic(self, ctx) -> None:
        flights = (ctx.read_stream(self.inlet).withWatermark("sched_dep_time", "6 hours")
                   .dropDuplicatesWithinWatermark(["flight_id"]))
        stats = (flights.groupBy(F.window("sched_dep_time", "1 hour"), "origin", "carrier")
                 .agg(F.count(F.lit(1)).alias("flights"), F.sum(F.col("cancelled").cast("long")).alias("cancelled"),
                      F.avg("dep_delay").alias("mean_dep_delay"), F.max("dep_delay").alias("max_dep_delay"))
                 .select("origin", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                         "flights", "cancelled", "mean_dep_delay", "max_dep_delay", F.current_timestamp().alias("updated_at")))
        ctx.write_stream(stats, self.outlet, output_mode="update")
'''


def cli(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(APP), str(REPO)])}
    return subprocess.run(blueprint_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


# Every 4th flight of a month (~6,700): the month's days, hours, airports and weather, a quarter
# of the records to process (issue 26); nothing here depends on the volume.
EVERY = 4


def same_windows(output: Path, months: list[int]) -> bool:
    return output.exists() and differences(load_results(output), reference_stats(months, EVERY)) == []


def test_savepoint_while_running_then_continue_and_branch(tmp_path, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    prepare(tmp_path / "data", [1], EVERY)
    conf = tmp_path / "run.conf"
    conf.write_text(f'streamlets {{\n  flights.volume-mounts.source = "{tmp_path}/data/flights"\n'
                    f'  weather.volume-mounts.source = "{tmp_path}/data/weather"\n'
                    f'  files.volume-mounts.output = "{tmp_path}/output"\n}}\n')
    state = tmp_path / "state"
    proc = start_blueprint("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(state), "--kafka", bootstrap,
                           log=tmp_path / "first.log")
    try:
        wait_until(lambda: same_windows(tmp_path / "output", [1]), timeout=600, what="January's windows")
        took = cli("savepoint", "take", BLUEPRINT, "--streamlet", "stats", "--state-dir", str(state),
                   "--reason", "before February", cwd=tmp_path)
        assert took.returncode == 0, took.stdout + took.stderr
        listed = cli("savepoint", "list", BLUEPRINT, "--state-dir", str(state), "--json", cwd=tmp_path)
        (sp,) = json.loads(listed.stdout)
        assert sp["streamlet"] == "stats" and sp["reason"] == "before February" and sp["queries"]["out"]["batch_id"] >= 0
        snapshot = tmp_path / "output-at-savepoint"
        shutil.copytree(tmp_path / "output", snapshot)

        prepare(tmp_path / "data", [2], EVERY)  # February's drop files: the running application continues
        wait_until(lambda: same_windows(tmp_path / "output", [1, 2]), timeout=600, what="February's windows")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, (tmp_path / "first.log").read_text()[-3000:]

    # a change Spark cannot restore across is refused, naming it; nothing is started
    (tmp_path / "regrouped.py").write_text(REGROUPED)
    (tmp_path / "regrouped.yaml").write_text(BRANCH.format(stats="regrouped.ByCarrier"))
    branch_conf = tmp_path / "branch.conf"
    branch_conf.write_text(f'streamlets.files.volume-mounts.output = "{tmp_path}/branch-output"\n')
    refused = cli("run", "regrouped.yaml", "--config", str(branch_conf), "--state-dir", str(tmp_path / "regrouped-state"),
                  "--kafka", bootstrap, "--exit-when-done", "--restore", f"stats={sp['path']}", cwd=tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "cannot start from savepoint" in refused.stderr and "key schema" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr  # one line, naming the change
    assert "Traceback" not in refused.stderr and not list((tmp_path / "branch-output").rglob("batch-*"))

    # the branch: restored from the savepoint with 3 state partitions instead of 4 (rescaled),
    # it processes February on its own
    (tmp_path / "branch.yaml").write_text(BRANCH.format(stats="flight_delays.stats.DepartureDelayStats"))
    branch = cli("run", "branch.yaml", "--config", str(branch_conf), "--state-dir", str(tmp_path / "branch-state"),
                 "--kafka", bootstrap, "--exit-when-done", "--restore", f"stats={sp['path']}",
                 "--state-partitions", "stats=3", cwd=tmp_path)
    assert branch.returncode == 0, branch.stdout[-3000:] + branch.stderr[-3000:]
    said = " ".join(branch.stdout.split())  # rich wraps long lines
    assert "as a branch (new query ids)" in said
    assert re.search(r"repartitioned stats query 'out': 4 -> 3 state partitions \([\d,]+ state rows as of batch \d+; previous checkpoint in ", said), said
    stats_out = tmp_path / "branch-state" / "checkpoints" / "flight-delays-whatif" / "stats" / "out"
    last = max(int(p.name) for p in (stats_out / "offsets").iterdir() if p.name.isdigit())
    assert '"spark.sql.shuffle.partitions":"3"' in (stats_out / "offsets" / str(last)).read_text()
    combined = tmp_path / "combined"
    combined.mkdir()
    for prefix, folder in (("a", snapshot), ("b", tmp_path / "branch-output")):
        for f in sorted(Path(folder, "delay-stats").glob("batch-*.jsonl")):
            shutil.copy(f, combined / f"batch-{prefix}-{f.name}")
    branch_only = load_results(tmp_path / "branch-output")
    assert len(branch_only) and (branch_only["window_start"].dt.month == 2).any()
    assert differences(load_results(combined), reference_stats([1, 2], EVERY)) == []
