"""streamlets.<name>.progress-tracking (asynchronous progress tracking): the setting's scope,
`blueprint verify --config` refusing it where it cannot apply (one line naming the streamlet and
the reason), the sandbox's run config, and the offset-log bridge that lets a synchronous query
start on an asynchronous query's checkpoint. The resource and the operator's run config:
tests/unit/test_build.py (test_progress_tracking_reaches_the_run_config)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprint.cli import app
from blueprint.scopes import PROGRESS_TRACKING, STREAMLET_SETTINGS, scope_of, setting_value
from streamlets.runtime.progress_tracking import ASYNC, SYNC, bridge_offset_gap, parse, streamlet_refusals
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.storage import LocalStorage

REALTIME = Path(__file__).resolve().parents[2] / "examples" / "flight-delays" / "realtime.yaml"
runner = CliRunner()


def test_a_streamlet_setting_with_two_modes_and_a_checkpoint_interval():
    assert STREAMLET_SETTINGS[PROGRESS_TRACKING] == (SYNC, "async [<checkpoint interval>]")
    assert scope_of("streamlets.alerts.progress-tracking").is_streamlet_setting()
    assert setting_value(PROGRESS_TRACKING, "async") == "async"
    assert setting_value(PROGRESS_TRACKING, "sync") == "sync"
    assert setting_value(PROGRESS_TRACKING, " async  5 seconds ") == "async 5000 milliseconds"
    assert parse("async 5000 milliseconds") == (ASYNC, 5000) and parse("async") == (ASYNC, None)
    assert parse("sync") == (SYNC, None)
    with pytest.raises(ValueError, match=r"'asap' is not a progress-tracking mode: use sync or async "
                                         r"\[<checkpoint interval>\] \(e.g. async 5 seconds\)"):
        setting_value(PROGRESS_TRACKING, "asap")
    for bad in ("async soon", "async 0 seconds", "sync 5 seconds"):
        with pytest.raises(ValueError):
            setting_value(PROGRESS_TRACKING, bad)
    run = StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c")
    assert run.progress_tracking == SYNC
    assert StreamletRunConfig.model_validate({**run.model_dump(), "progress_tracking": "async 2s"}).progress_tracking \
        == "async 2000 milliseconds"
    with pytest.raises(ValueError, match="progress_tracking"):
        StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c", progress_tracking="asap")


def test_verify_names_the_line_of_a_bad_interval():
    [problem] = [p for p in verify("streamlets.alerts.progress-tracking=async soon") if p["code"] == "invalid-config-value"]
    assert "'async soon': the checkpoint interval after async: 'soon' is not a duration" in problem["message"]
    assert "sync, async [<checkpoint interval>]" in problem["hint"]


def verify(*settings: str) -> list[dict]:
    """`blueprint verify realtime.yaml KEY=VALUE...`: the problems of its JSON report."""
    result = runner.invoke(app, ["verify", str(REALTIME), "--format", "json", *settings])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["problems"]


def refusals(*settings: str) -> list[str]:
    return [p["message"] for p in verify(*settings) if p["code"] == "async-progress-unsupported"]


def test_verify_accepts_an_at_least_once_micro_batch_streamlet():
    assert refusals("streamlets.alerts.trigger=micro-batch", "streamlets.alerts.delivery=at-least-once",
                    "streamlets.alerts.progress-tracking=async") == []
    assert refusals("streamlets.alerts.progress-tracking=sync") == []
    assert refusals("streamlets.alerts.trigger=micro-batch", "streamlets.alerts.delivery=at-least-once",
                    "streamlets.alerts.progress-tracking=async 10 seconds") == []


@pytest.mark.parametrize("settings, reason", [
    (["streamlets.alerts.trigger=micro-batch"], "its Kafka outlets are exactly-once (Kafka transactions the "
                                                "driver commits with each micro-batch"),
    (["streamlets.alerts.delivery=at-least-once"], "it runs in real-time mode"),  # the class's trigger
    (["streamlets.alerts.trigger=micro-batch", "streamlets.alerts.delivery=at-least-once",
      "streamlets.alerts.on-failure=quarantine"], "on-failure = quarantine reads each failed batch's offsets"),
])
def test_verify_refuses_where_it_cannot_apply(settings, reason):
    [message] = refusals(*settings, "streamlets.alerts.progress-tracking=async")
    assert refusals(*settings, "streamlets.alerts.progress-tracking=async 3 seconds") == [message]
    assert message.startswith("streamlet 'alerts' cannot use asynchronous progress tracking: ") and "\n" not in message
    assert reason in message, message


def test_verify_refuses_a_streamlet_without_an_inlet():
    [message] = refusals("streamlets.flights.delivery=at-least-once", "streamlets.flights.progress-tracking=async")
    assert message == ("streamlet 'flights' cannot use asynchronous progress tracking: it has no inlet; asynchronous "
                       "progress tracking needs Kafka sources and Spark's Kafka sink")


def test_runtime_refusals_from_settings():
    assert streamlet_refusals(kafka=True, delivery="at-least-once", real_time=False, available_now=False,
                              on_failure="stop") == []
    reasons = streamlet_refusals(kafka=False, delivery="at-least-once", real_time=True, available_now=True,
                                 on_failure="quarantine")
    assert [r.split(" ")[:3] for r in reasons] == [["it", "does", "not"], ["it", "runs", "in"], ["it", "runs", "with"],
                                                   ["on-failure", "=", "quarantine"]]


def test_the_sandbox_carries_the_setting_into_the_run_config(tmp_path):
    import sys

    from blueprint.loader import load_blueprint
    from blueprint.sandbox.localconfig import StreamletSettings
    from blueprint.sandbox.run import run_config_for

    sys.path.insert(0, str(REALTIME.parent))
    from flight_delays.alerts import DelayAlerts
    from flight_delays.ingress import FlightIngress

    bp = load_blueprint(REALTIME)
    classes = {"alerts": DelayAlerts, "flights": FlightIngress}
    run = run_config_for(bp, "alerts", classes, StreamletSettings(delivery="at-least-once", progress_tracking="async"),
                         bootstrap="localhost:9092", state_dir=tmp_path, trigger=None)
    assert (run.progress_tracking, run.delivery) == ("async", "at-least-once")
    assert run_config_for(bp, "alerts", classes, StreamletSettings(), bootstrap="localhost:9092", state_dir=tmp_path,
                          trigger=None).progress_tracking == "sync"


def checkpoint(tmp_path: Path, offsets: list[int], commits: list[int]) -> str:
    for folder, ids in (("offsets", offsets), ("commits", commits)):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for n in ids:
            (tmp_path / folder / str(n)).write_text(f'v1\n{{"batch": {n}}}\n{{"t": {{"0": {n * 10}}}}}\n')
    return str(tmp_path)


def test_a_gap_in_the_offset_log_is_bridged_with_the_entry_before_it(tmp_path):
    """Asynchronous progress tracking writes offsets/N once per checkpoint interval (0, 7, 12);
    a synchronous start needs offsets/N-1: a copy of the last entry before the gap (batch 12 is
    replayed from batch 7's end offsets, as the asynchronous query would replay it)."""
    cp = checkpoint(tmp_path, [0, 7, 12], [0, 7])
    assert bridge_offset_gap(LocalStorage(), cp) == 11
    assert (tmp_path / "offsets" / "11").read_text() == (tmp_path / "offsets" / "7").read_text()
    assert bridge_offset_gap(LocalStorage(), cp) is None  # contiguous now


@pytest.mark.parametrize("offsets", [[], [0], [3, 4], [0, 1, 2]])
def test_a_contiguous_offset_log_is_left_alone(tmp_path, offsets):
    cp = checkpoint(tmp_path, offsets, offsets[:-1])
    assert bridge_offset_gap(LocalStorage(), cp) is None
    assert sorted(int(n.name) for n in (tmp_path / "offsets").iterdir()) == offsets
