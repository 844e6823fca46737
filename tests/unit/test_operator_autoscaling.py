"""The operator's autoscaler without a cluster (operator/streamlets_operator/autoscaling.py): driver
pages (Prometheus text, as streamlets.runtime.metrics writes it) turned into MetricSamples, and a
StreamletScaler over a simulated burst: active mode applies a change once and then stabilizes, a
failed change is reported and tried again, passive mode never applies and says a recommendation
once, the status carries the decision and a pending scale-down across an operator restart. The
`scale` command itself on a real driver: tests/e2e/test_autoscaling_cluster.py."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from blueprint.deploy.spec import ApplicationSpec
from blueprint.ops.figures import parse_text
from streamlets.autoscale import AutoscalerState, Autoscaling
from streamlets_operator import autoscaling
from streamlets_operator.autoscaling import StreamletScaler, metric_sample, state_from_status, status_of

SETTINGS = {"mode": "active", "max-executors": 3, "stabilization-interval": "60s", "metrics-window": "120s",
            "catch-up-duration": "300s", "restart-time": "30s", "scale-down-interval": "180s",
            "backlog-lag-threshold": "30s"}


def page(records: float, busy: float, lags: dict[int, float], executors: int | None = 1, cores: int = 1,
         streamlet: str = "enrich") -> str:
    """A driver's page: two queries sharing the records and busy time, one inlet's lag per partition."""
    lines = []
    for query, share in (("joined", 0.75), ("late", 0.25)):
        labels = f'app="fd",query="{query}",streamlet="{streamlet}"'
        lines += [f"streamlets_records_in_total{{{labels}}} {records * share}",
                  f"streamlets_busy_seconds_total{{{labels}}} {busy * share}"]
    for p, lag in lags.items():
        lines.append(f'streamlets_consumer_lag_records{{app="fd",inlet="flights",partition="{p}",streamlet="{streamlet}",'
                     f'topic="fd.flights"}} {lag}')
    if executors is not None:
        lines += [f'streamlets_executors{{app="fd",streamlet="{streamlet}"}} {executors}',
                  f'streamlets_executor_cores{{app="fd",streamlet="{streamlet}"}} {cores}']
    return "\n".join(lines) + "\n"


def test_a_page_is_a_metric_sample_of_its_streamlet():
    text = page(1000, 20, {0: 30, 1: 10, 2: 0}, executors=2, cores=2)
    text += page(99, 9, {0: 999}, streamlet="stats")  # another streamlet's lines are not counted
    # a second inlet on the same topic partition: its backlog counted once
    text += 'streamlets_consumer_lag_records{app="fd",inlet="again",partition="0",streamlet="enrich",topic="fd.flights"} 25\n'
    s = metric_sample(parse_text(text), "enrich", at=5.0)
    assert s is not None
    assert (s.at, s.records, s.busy_seconds, s.lag, s.executors, s.cores, s.partitions, s.real_time) == \
        (5.0, 1000, pytest.approx(20.0), 40, 2, 2, 3, False)
    assert metric_sample(parse_text(page(1, 1, {0: 0}, executors=None)), "enrich", at=0) is None
    # the longest-running unfinished micro-batch of its queries
    running = ('streamlets_batch_running_seconds{app="fd",query="joined",streamlet="enrich"} 42.5\n'
               'streamlets_batch_running_seconds{app="fd",query="late",streamlet="enrich"} 3\n'
               'streamlets_batch_running_seconds{app="fd",query="x",streamlet="stats"} 99\n')
    assert s.running_seconds == 0.0
    assert metric_sample(parse_text(text + running), "enrich", at=5.0).running_seconds == 42.5
    # the batches' fixed cost, summed over its queries
    overhead = ('streamlets_batch_overhead_seconds_total{app="fd",query="joined",streamlet="enrich"} 6\n'
                'streamlets_batch_overhead_seconds_total{app="fd",query="late",streamlet="enrich"} 1.5\n'
                'streamlets_batch_overhead_seconds_total{app="fd",query="x",streamlet="stats"} 99\n')
    assert s.overhead_seconds == 0.0
    assert metric_sample(parse_text(text + overhead), "enrich", at=5.0).overhead_seconds == 7.5


class Cluster:
    """A streamlet under load, in simulated seconds: each executor processes `capacity` records per
    busy second; arrivals come at `rate(t)`; lag is what arrived and was not processed. `send` is the
    driver's `scale` answer: it records the request and, unless told to fail, takes effect at once."""

    def __init__(self, capacity: float = 100.0, executors: int = 1, partitions: int = 6) -> None:
        self.capacity, self.executors, self.partitions = capacity, executors, partitions
        self.records = self.busy = self.lag = 0.0
        self.sent: list[int] = []
        self.fail: str | None = None

    def advance(self, rate: float, seconds: float) -> None:
        can = self.capacity * self.executors * seconds
        arrived = rate * seconds
        done = min(can, self.lag + arrived)
        self.lag += arrived - done
        self.records += done
        self.busy += done / (self.capacity * self.executors)  # wall time of the batches

    def page(self) -> list:
        per = self.lag / self.partitions
        return parse_text(page(self.records, self.busy, dict.fromkeys(range(self.partitions), per), self.executors))

    def send(self, executors: int, reason: str) -> tuple[str, str]:
        self.sent.append(executors)
        if self.fail:
            return "error", self.fail
        text = f"{self.executors} -> {executors} executor(s) requested"
        self.executors = executors
        return "ok", text


def run(scaler: StreamletScaler, cluster: Cluster, rate, until: float, step: float = 15.0, start: float = 0.0):
    """Evaluate every `step` seconds from `start` to `until`; the outcomes."""
    outcomes, t = [], start
    while t < until:
        cluster.advance(rate(t), step)
        t += step
        outcomes.append((t, scaler.step(cluster.page(), t, cluster.send)))
    return outcomes


def burst(t: float) -> float:
    return 400.0 if t < 600 else 50.0


def test_active_applies_a_change_once_then_stabilizes():
    cluster = Cluster()
    scaler = StreamletScaler("enrich", Autoscaling.from_config(SETTINGS))
    outcomes = run(scaler, cluster, burst, until=400)
    applied = [(t, o) for t, o in outcomes if o.applied]
    assert applied, [o.decision.reason for _, o in outcomes if o.decision]
    t0, first = applied[0]
    assert first.decision.direction == "up" and cluster.sent[0] == first.decision.target <= 3
    reason, message, warning = first.event
    assert reason == "Autoscaled" and not warning and message.startswith(f"enrich: 1 -> {first.decision.target} executor(s)")
    # nothing decided within the stabilization interval and the window after the change
    assert all(o.decision is None or not o.decision.changes for t, o in outcomes if t0 < t < t0 + 60 + 120)
    assert len(cluster.sent) <= 2 and cluster.sent == sorted(cluster.sent)  # never a step back during the burst


def test_the_burst_drains_and_the_executors_come_back_down_after_the_interval():
    cluster = Cluster()
    scaler = StreamletScaler("enrich", Autoscaling.from_config(SETTINGS))
    outcomes = run(scaler, cluster, burst, until=2400)
    ups = [t for t, o in outcomes if o.applied and o.decision.direction == "up"]
    downs = [t for t, o in outcomes if o.applied and o.decision.direction == "down"]
    assert ups and downs and max(ups) < min(downs)
    assert cluster.lag < 50 and cluster.executors < max(cluster.sent)
    # a scale-down is made only after it was asked for during the whole scale-down interval
    held = [t for t, o in outcomes if o.decision and o.decision.held and o.decision.held.value == "scale-down-delay"]
    assert held and min(downs) - min(held) >= 180


def test_a_failed_change_is_reported_and_tried_again():
    cluster = Cluster()
    cluster.fail = "no answer"
    scaler = StreamletScaler("enrich", Autoscaling.from_config(SETTINGS))
    outcomes = run(scaler, cluster, burst, until=300)
    failed = [o for _, o in outcomes if o.event and o.event[0] == "AutoscaleFailed"]
    assert len(failed) >= 2 and all(o.event[2] for o in failed)  # warnings, one per evaluation that wanted it
    assert "tried again at the next evaluation" in failed[0].event[1] and cluster.executors == 1
    cluster.fail = None
    more = run(scaler, cluster, burst, until=330, start=300)
    assert any(o.applied for _, o in more) and cluster.executors > 1


def test_passive_recommends_once_and_never_applies():
    cluster = Cluster()
    scaler = StreamletScaler("enrich", Autoscaling.from_config({**SETTINGS, "mode": "passive"}))
    outcomes = run(scaler, cluster, lambda t: 400.0, until=1200)
    recommended = [o for _, o in outcomes if o.recommended]
    assert len(recommended) == 1 and recommended[0].event[0] == "AutoscaleRecommended"
    assert "recommended (passive)" in recommended[0].event[1]
    assert cluster.sent == [] and cluster.executors == 1
    later = run(scaler, cluster, lambda t: 400.0, until=1200 + autoscaling.EVENT_REPEAT, start=1200)
    assert len([o for _, o in later if o.recommended]) == 1  # the same recommendation again, once per interval


def test_no_metrics_is_said_in_the_status():
    scaler = StreamletScaler("enrich", Autoscaling.from_config(SETTINGS))
    out = scaler.step("no driver pod of SparkApplication fd-enrich", 10.0, lambda n, r: ("ok", ""))
    assert out.decision is None and out.error == "no metrics: no driver pod of SparkApplication fd-enrich"
    entry = status_of("active", None, AutoscalerState(), error=out.error)
    assert entry["reason"] == out.error and entry["targetExecutors"] is None and entry["mode"] == "active"


def test_the_status_carries_the_decision_and_a_pending_scale_down_across_a_restart():
    cluster = Cluster(executors=3)
    scaler = StreamletScaler("enrich", Autoscaling.from_config({**SETTINGS, "scale-down-interval": "1h"}))
    outcomes = run(scaler, cluster, lambda t: 20.0, until=600)
    t, last = outcomes[-1]
    assert last.decision.held.value == "scale-down-delay"
    entry = status_of("active", last.decision, scaler.autoscaler.state)
    assert (entry["executors"], entry["targetExecutors"], entry["direction"], entry["held"]) == \
        (3, 3, "none", "scale-down-delay") and entry["wantedExecutors"] < 3
    assert entry["utilization"] is not None and all(v is None or not isinstance(v, float) or math.isfinite(v)
                                                    for v in entry.values())
    # many evaluations asked for fewer; the status keeps only those that can still be the most asked for
    assert sum(1 for _, o in outcomes if o.decision and o.decision.held and o.decision.held.value == "scale-down-delay") > 20
    assert 1 <= len(entry["scaleDownAsks"]) < 3
    assert state_from_status(entry) == scaler.autoscaler.state  # a new operator replica picks it up
    assert state_from_status(entry).scale_down_since is not None


def test_autoscaled_streamlets_of_a_spec(tmp_path):
    from pathlib import Path

    from blueprint.cli import app as blueprint_cli
    import yaml
    root = Path(__file__).resolve().parents[2] / "examples" / "flight-delays"
    result = CliRunner().invoke(blueprint_cli, [
        "build", str(root / "blueprint.yaml"), "--image", "i", "--kafka", "k:9092",
        "streamlets.enrich.autoscaling.mode=active", "streamlets.enrich.autoscaling.max-executors=3",
        "streamlets.stats.autoscaling.mode=passive", "streamlets.stats.trigger=real-time",
        "streamlets.stats.kubernetes.executor.instances=6", "streamlets.files.autoscaling.min-executors=2"])
    assert result.exit_code == 0, result.output
    spec = ApplicationSpec.model_validate(yaml.safe_load(result.stdout)["spec"])
    found = {s.name: (a.mode, a.settings.max_executors, rt) for s, a, rt in autoscaling.autoscaled(spec)}
    assert found == {"enrich": ("active", 3, False), "stats": ("passive", None, True)}  # files: mode off


def test_the_operator_counts_decisions_and_shows_executors():
    from streamlets_operator import metrics
    metrics.autoscaler_decision("apps", "fd", "enrich", "active", 1, 3, "up", True)
    metrics.autoscaler_decision("apps", "fd", "stats", "passive", 2, 2, "none", False)
    text = metrics.exposition()[0].decode()
    assert ('streamlets_operator_autoscaler_decisions_total{app="fd",direction="up",mode="active",namespace="apps",'
            'streamlet="enrich"} 1.0') in text
    assert 'streamlets_operator_autoscaler_executors{app="fd",kind="target",namespace="apps",streamlet="enrich"} 3.0' in text
    assert 'direction="none"' not in text  # only changes are decisions
    metrics.forget_autoscaled("apps", "fd", {"stats"})
    text = metrics.exposition()[0].decode()
    assert 'streamlet="enrich"} 3.0' not in text and 'kind="current",namespace="apps",streamlet="stats"} 2.0' in text
    metrics.forget({"metadata": {"namespace": "apps", "name": "fd"}})
    assert "streamlets_operator_autoscaler_executors{" not in metrics.exposition()[0].decode()


def test_the_web_view_shows_executors_and_the_autoscaler():
    from blueprint.ops.model import ApplicationView, AutoscalingView, StreamletView
    from blueprint.ops.view import application_page
    view = ApplicationView(namespace="apps", name="fd", app_id="fd", phase="Running", ready="2/2", streamlets=[
        StreamletView(name="enrich", class_name="m.Join", status="running", executors=1, autoscaling=AutoscalingView(
            mode="active", target_executors=3, direction="up", reason="scale up 1 -> 3: <capacity>")),
        StreamletView(name="stats", class_name="m.Stats", status="running", executors=2)], topics=[])
    html = application_page(view, [], [])
    assert "<td>1 → 3</td>" in html and 'title="scale up 1 -&gt; 3: &lt;capacity&gt;">active · up</span>' in html
    assert "<td>2</td><td>off</td>" in html
