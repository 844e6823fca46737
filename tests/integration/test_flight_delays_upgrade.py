"""The flight-delays enrichment gains an inlet in a new version, upgraded from a savepoint, in the
sandbox, with real Kafka and Spark (named sources: streamlets.sources).

Version 1 (blueprint.yaml) runs January; a savepoint of `enrich` is taken; version 2
(blueprint-v2.yaml: `enrich` is FlightWeatherJoinV2, which also reads a `more-flights` inlet fed
by a second ingress) is started from it in the same application, the other streamlets from their
checkpoints. February's flights arrive on the new inlet only, February's weather on the old one:
the join continues with its state and the statistics downstream equal the batch computation of
both months, no window lost or doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from support.sandbox import REPO, blueprint_cmd

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

APP = REPO / "examples" / "flight-delays"
sys.path.insert(0, str(APP))

from flight_delays.prepare import drop_file, prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

EVERY = 8  # every 8th flight: the months' days, hours and airports, few records (issue 26)


def cli(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(APP), str(REPO)])}
    return subprocess.run(blueprint_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def own_app(folder: Path, app_id: str) -> dict[str, Path]:
    """The example's two versions under an app id of this test's own: the session's broker holds
    other tests' flight-delays topics (`<app id>.<topic>`), whose records would join the run."""
    folder.mkdir()
    out = {}
    for name in ("blueprint.yaml", "blueprint-v2.yaml"):
        text = (APP / name).read_text()
        assert "\napp-id: flight-delays\n" in text, name
        (folder / name).write_text(text.replace("\napp-id: flight-delays\n", f"\napp-id: {app_id}\n", 1))
        out[name] = folder / name
    return out


def test_enrich_gains_an_inlet_and_is_upgraded_from_a_savepoint(tmp_path, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    app_id = f"fd-upgrade-{uuid.uuid4().hex[:8]}"
    blueprints = own_app(tmp_path / "app", app_id)
    v1_blueprint, v2_blueprint = str(blueprints["blueprint.yaml"]), str(blueprints["blueprint-v2.yaml"])
    data, later = tmp_path / "data", tmp_path / "later"
    prepare(data, [1], EVERY)
    prepare(later, [2], EVERY)
    mounts = {"flights.volume-mounts.source": data / "flights", "weather.volume-mounts.source": data / "weather",
              "files.volume-mounts.output": tmp_path / "output"}
    conf, conf_v2 = tmp_path / "v1.conf", tmp_path / "v2.conf"
    conf.write_text("".join(f'streamlets.{k} = "{v}"\n' for k, v in mounts.items()))
    conf_v2.write_text(conf.read_text() + f'streamlets.more-flights.volume-mounts.source = "{data}/more-flights"\n')
    state = ["--state-dir", str(tmp_path / "state"), "--kafka", bootstrap, "--exit-when-done"]

    v1 = cli("run", v1_blueprint, "--config", str(conf), *state, cwd=tmp_path)
    assert v1.returncode == 0, v1.stdout[-3000:] + v1.stderr[-3000:]
    took = cli("savepoint", "take", v1_blueprint, "--streamlet", "enrich", "--state-dir",
               str(tmp_path / "state"), "--reason", "before v2", cwd=tmp_path)
    assert took.returncode == 0, took.stdout + took.stderr
    listed = cli("savepoint", "list", v1_blueprint, "--state-dir", str(tmp_path / "state"), "--json",
                 cwd=tmp_path)
    (sp,) = json.loads(listed.stdout)

    # February: the flights on the new feed, the weather on the old one
    (data / "more-flights").mkdir()
    for feed, folder in (("flights", "more-flights"), ("weather", "weather")):
        month = drop_file(later, feed, 2)
        os.replace(month, data / folder / month.name)  # the same name and mtime prepare gave it
    v2 = cli("run", v2_blueprint, "--config", str(conf_v2), *state, "--restore", f"enrich={sp['path']}",
             cwd=tmp_path)
    assert v2.returncode == 0, v2.stdout[-3000:] + v2.stderr[-3000:]
    assert "restored enrich from" in " ".join(v2.stdout.split())
    ids = Path(tmp_path, "state", "checkpoints", app_id, "enrich", "out", "offsets")
    newest = max(int(p.name) for p in ids.iterdir() if p.name.isdigit())
    lines = (ids / str(newest)).read_text().splitlines()
    assert lines[0] == "v2" and sorted(line.partition(":")[0] for line in lines[2:]) == [
        "inlet_flights", "inlet_more_flights", "inlet_weather"]
    assert differences(load_results(tmp_path / "output"), reference_stats([1, 2], EVERY)) == []
