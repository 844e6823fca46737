"""The autoscaling decisions (streamlets.autoscale) on simulated metric series: a steady load does
not flap, a burst scales up within the bounds and the partitions and back down only after the lag
drained and the scale-down interval passed, an oscillating load makes a bounded number of changes,
no scale-down while backlogged; micro-batches whose addBatch is mostly a fixed cost; and on the
series the operator recorded on the e2e cluster (fixtures/autoscale/: a burst, a steady load, an
oscillating one), replayed with their decisions pinned. Pure Python, simulated time."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise

import pytest

from streamlets.autoscale import (
    FIXED_COST_BATCHES,
    FIXED_COST_MIN_BATCHES,
    AutoscaleSettings,
    AutoscaleSettingsError,
    Autoscaler,
    AutoscalerState,
    Autoscaling,
    Decision,
    Hold,
    MetricSample,
    aligned_executors,
    batch_fixed_cost,
    decide,
    partition_cap,
)

HOUR = 3600.0
MINUTE = 60.0
RECORDS_PER_MONTH = 80_000  # flights of one month, about


@dataclass
class Run:
    """What a simulation did: every decision, the executors and lag at each step."""

    decisions: list[Decision] = field(default_factory=list)
    executors: list[tuple[float, int]] = field(default_factory=list)
    lag: list[tuple[float, float]] = field(default_factory=list)

    @property
    def changes(self) -> list[Decision]:
        return [d for d in self.decisions if d.changes]

    def drained_at(self, after: float, below: float = 1.0) -> float | None:
        """The first time after `after` the lag fell below `below` records."""
        return next((t for t, lag in self.lag if t > after and lag < below), None)


def simulate(arrivals: Callable[[float], float], *, duration: float, executors: int,
             settings: AutoscaleSettings, cores: int = 1, partitions: int = 8, slot_rate: float = 40.0,
             bursts: dict[float, int] | None = None, apply: bool = True, step: float = 15.0,
             restart_pause: float = 30.0) -> Run:
    """A streamlet processing `slot_rate` records per second per busy task slot, its micro-batches
    running ceil(partitions / slots) waves of tasks; `arrivals(t)` records per second reach its
    inlets, plus `bursts` (time -> records at once). Sampled and decided every `step` seconds;
    `apply`: the decision's executors are run (processing pauses `restart_pause` seconds per change),
    else only reported (passive mode)."""
    scaler = Autoscaler(settings)
    bursts = dict(bursts or {})
    backlog = records = 0.0
    busy = pause = 0.0
    run = Run()
    t = 0.0
    while t <= duration:
        arrived = arrivals(t) * step + sum(n for at, n in list(bursts.items()) if at <= t)
        bursts = {at: n for at, n in bursts.items() if at > t}
        backlog += arrived
        slots = executors * cores
        capacity = slot_rate * (partitions / math.ceil(partitions / slots) if slots < partitions else partitions)
        working = max(0.0, step - pause)
        pause = max(0.0, pause - step)
        done = min(backlog, capacity * working)
        backlog -= done
        records += done
        busy += done / capacity
        scaler.observe(MetricSample(at=t, records=int(records), busy_seconds=busy, lag=int(backlog),
                                    executors=executors, cores=cores, partitions=partitions))
        decision = scaler.decide(t)
        run.decisions.append(decision)
        run.executors.append((t, executors))
        run.lag.append((t, backlog))
        if apply and decision.changes:
            executors, pause = decision.target, restart_pause
        t += step
    return run


def steady(rate: float, noise: float = 0.0, seed: int = 7) -> Callable[[float], float]:
    rnd = random.Random(seed)
    return lambda t: rate * (1 + rnd.uniform(-noise, noise))


def test_a_steady_load_at_the_target_makes_no_decision_in_an_hour():
    # 4 executors x 1 core over 8 partitions: 160 records/s; 112/s is utilization 0.7, the target
    run = simulate(steady(112, noise=0.1), duration=HOUR + 20 * MINUTE, executors=4,
                   settings=AutoscaleSettings(max_executors=8))
    assert run.changes == []
    evaluated = [d for d in run.decisions if d.evaluation is not None]
    assert evaluated and evaluated[-1].at - evaluated[0].at >= HOUR - MINUTE  # an hour of evaluated decisions
    assert all(d.direction == "none" and d.held is None and "within the utilization band" in d.reason
               for d in evaluated)
    assert all(0.6 < d.evaluation.utilization < 0.8 for d in evaluated if d.evaluation)


def test_first_decisions_wait_for_stabilization_then_a_full_window():
    settings = AutoscaleSettings()
    run = simulate(steady(500), duration=25 * MINUTE, executors=1, settings=settings)
    holds = [(d.at, d.held) for d in run.decisions]
    assert all(h is Hold.STABILIZING for t, h in holds if t < settings.stabilization_interval)
    assert all(h is Hold.COLLECTING for t, h in holds
               if settings.stabilization_interval <= t < settings.stabilization_interval + settings.metrics_window)
    first = run.changes[0]
    assert first.at == settings.stabilization_interval + settings.metrics_window
    assert first.direction == "up" and first.evaluation is not None
    assert first.evaluation.start >= settings.stabilization_interval  # no sample of the stabilization interval


def test_a_burst_scales_up_within_max_and_partitions_drains_then_scales_down_after_the_interval():
    settings = AutoscaleSettings(max_executors=4)
    burst_at = 30 * MINUTE
    burst = 3 * RECORDS_PER_MONTH  # three months of flights at once
    run = simulate(steady(20), duration=5 * HOUR, executors=1, settings=settings, bursts={burst_at: burst})

    ups = [d for d in run.changes if d.direction == "up"]
    downs = [d for d in run.changes if d.direction == "down"]
    assert ups and ups[0].at >= burst_at and ups[0].target == 4  # to the maximum at once
    assert "scale up 1 -> 4" in ups[0].reason and "lag" in ups[0].reason
    assert max(n for _, n in run.executors) == 4 <= partition_cap(8, 1)
    drained = run.drained_at(burst_at)
    assert drained is not None
    assert downs, "it scales back down"
    first_down = downs[0]
    # asked for only once the lag was below the backlog threshold (5 minutes of input), made a whole
    # scale-down interval later, and the lag had drained by then
    caught_up = next(d.at for d in run.decisions
                     if d.at > ups[0].at and d.evaluation is not None and not d.evaluation.backlogged)
    assert all(d.held is not Hold.SCALE_DOWN_DELAY for d in run.decisions if d.at < caught_up)
    assert first_down.at >= caught_up + settings.scale_down_interval
    assert first_down.at > drained
    assert first_down.evaluation is not None and not first_down.evaluation.backlogged
    assert first_down.target == 2  # the most a step may remove: 60% of 4, rounded up
    assert [d.target for d in run.changes] == [4, 2, 1]
    # scale-downs at least a scale-down interval apart
    assert downs[1].at - downs[0].at >= settings.scale_down_interval


def test_autoscaling_drains_the_burst_faster_than_the_passive_mode_reports():
    settings = AutoscaleSettings(max_executors=4)
    burst_at = 30 * MINUTE
    kwargs = dict(duration=5 * HOUR, executors=1, settings=settings, bursts={burst_at: 3 * RECORDS_PER_MONTH})
    scaled = simulate(steady(20), **kwargs)
    passive = simulate(steady(20), apply=False, **kwargs)
    assert passive.changes and all(n == 1 for _, n in passive.executors)  # reported, never applied
    assert all(d.direction == "up" and 2 <= d.target <= 4 for d in passive.changes)  # less as the lag drains
    with_scaling = scaled.drained_at(burst_at)
    without = passive.drained_at(burst_at)
    assert with_scaling is not None and without is not None
    assert with_scaling - burst_at < 0.5 * (without - burst_at)


def test_input_held_high_with_lag_above_the_threshold_never_scales_down():
    settings = AutoscaleSettings(max_executors=4)
    run = simulate(steady(300, noise=0.2), duration=3 * HOUR, executors=2, settings=settings)
    assert all(d.direction != "down" for d in run.decisions)
    assert [d.target for d in run.changes] == [4]
    late = [d for d in run.decisions if d.at > run.changes[0].at + 25 * MINUTE]
    assert late and all(d.held is Hold.AT_MAX for d in late)


def test_a_backlog_holds_a_scale_down_the_rates_alone_would_make():
    settings = AutoscaleSettings(scale_down_interval=0)
    # 8 executors process 320/s, 20/s arrive: utilization 0.06; but 100,000 records wait (5000 s of input)
    samples = [MetricSample(at=t, records=int(20 * t), busy_seconds=20 * t / 320, lag=100_000,
                            executors=8, cores=1, partitions=8) for t in range(0, 1500, 15)]
    decision, _ = decide(samples, settings, AutoscalerState(), now=samples[-1].at)
    assert decision.direction == "none" and decision.held is Hold.BACKLOG
    assert decision.wanted is not None and decision.wanted < 8
    assert "backlog threshold" in decision.reason and "lag 100000 records" in decision.reason
    drained = [MetricSample(at=s.at, records=s.records, busy_seconds=s.busy_seconds, lag=0, executors=8,
                            cores=1, partitions=8) for s in samples]
    decision, _ = decide(drained, settings, AutoscalerState(), now=drained[-1].at)
    assert decision.direction == "down" and decision.held is None


def test_an_oscillating_load_makes_a_bounded_number_of_changes():
    settings = AutoscaleSettings(max_executors=8)
    fast = simulate(lambda t: 100 + 80 * math.sin(2 * math.pi * t / (10 * MINUTE)), duration=6 * HOUR,
                    executors=4, settings=settings)
    assert fast.changes == []  # a 10-minute swing averages out over the 15-minute window
    slow = simulate(lambda t: 90 + 80 * math.sin(2 * math.pi * t / (3 * HOUR)), duration=9 * HOUR,
                    executors=4, settings=settings)
    assert [d.target for d in slow.changes] == [8, 4] * 3  # one up and one down per 3-hour swing
    downs = [d.at for d in slow.changes if d.direction == "down"]
    assert all(b - a >= settings.scale_down_interval for a, b in pairwise(downs))


def test_the_partition_cap_bounds_a_scale_up():
    # 3 partitions, 2 cores per executor: a third executor would have no partition to read
    settings = AutoscaleSettings(max_executors=10)
    run = simulate(steady(1000), duration=2 * HOUR, executors=1, cores=2, partitions=3, settings=settings)
    assert [d.target for d in run.changes] == [2]
    late = [d for d in run.decisions if d.at > run.changes[0].at + 25 * MINUTE]
    assert late and all(d.held is Hold.PARTITION_CAP and "partition cap" in d.reason for d in late)


def test_min_and_max_bound_the_executors():
    high = simulate(steady(1000), duration=HOUR, executors=1, settings=AutoscaleSettings(max_executors=2))
    assert [d.target for d in high.changes] == [2]
    assert high.decisions[-1].held is Hold.AT_MAX and "max_executors=2" in high.decisions[-1].reason
    low = simulate(steady(1), duration=4 * HOUR, executors=4,
                   settings=AutoscaleSettings(min_executors=2, scale_down_interval=10 * MINUTE))
    assert [d.target for d in low.changes] == [2]
    assert low.decisions[-1].held is Hold.AT_MIN


def test_an_idle_streamlet_scales_down_one_limited_step_at_a_time():
    run = simulate(steady(0), duration=3 * HOUR, executors=8, settings=AutoscaleSettings(scale_down_interval=0))
    assert [d.target for d in run.changes] == [4, 2, 1]  # 60% at most per step, as Flink's scale-down.max-factor


@pytest.mark.parametrize(("wanted", "partitions", "cores", "aligned"), [
    (5, 8, 1, 8), (3, 8, 1, 4), (2, 8, 1, 2), (4, 8, 1, 4), (9, 8, 1, 8), (3, 8, 2, 4), (1, 8, 2, 1),
    (7, 12, 1, 12), (5, 12, 1, 6), (3, 0, 1, 3)])
def test_aligned_executors_count_waves_of_tasks(wanted, partitions, cores, aligned):
    assert aligned_executors(wanted, partitions, cores) == aligned


def test_a_scale_down_that_removes_no_wave_is_not_made():
    # 8 executors x 1 core over 8 partitions: 5 to 7 executors run two waves, as 4 do
    settings = AutoscaleSettings(scale_down_interval=0)
    samples = [MetricSample(at=t, records=int(110 * t), busy_seconds=110 * t / 320, lag=0,
                            executors=8, cores=1, partitions=8) for t in range(0, 1500, 15)]
    decision, _ = decide(samples, settings, AutoscalerState(), now=samples[-1].at)
    assert decision.held is Hold.ALIGNMENT and decision.target == 8 and decision.wanted in (5, 6, 7)


def test_real_time_mode_needs_a_core_per_partition():
    sample = MetricSample(at=0, records=0, busy_seconds=0, lag=0, executors=1, cores=2, partitions=6, real_time=True)
    decision, _ = decide([sample], AutoscaleSettings(), AutoscalerState(), now=0)
    assert decision.target == 3 and decision.direction == "up" and "Real-Time Mode" in decision.reason


def test_the_autoscaler_keeps_only_the_samples_it_needs_and_refuses_older_ones():
    settings = AutoscaleSettings()
    scaler = Autoscaler(settings)
    for t in range(0, 4 * 3600, 15):
        scaler.observe(MetricSample(at=t, records=t, busy_seconds=t / 10, lag=0, executors=2, cores=1, partitions=4))
    span = scaler.samples[-1].at - scaler.samples[0].at
    assert span <= settings.metrics_window + 2 * settings.stabilization_interval + 15
    assert scaler.decide().evaluation is not None  # still evaluates after trimming
    with pytest.raises(ValueError, match="older"):
        scaler.observe(MetricSample(at=0, records=0, busy_seconds=0, lag=0, executors=2, cores=1, partitions=4))


@pytest.mark.parametrize(("field_name", "value"), [
    ("min_executors", 0), ("max_executors", 0), ("target_utilization", 0), ("utilization_min", 0.8),
    ("utilization_max", 0.5), ("catch_up_duration", -1), ("metrics_window", 0), ("max_scale_down_factor", 1)])
def test_settings_out_of_range_name_the_setting(field_name, value):
    """The message names the setting by its config key (streamlets.<name>.autoscaling.<key>)."""
    with pytest.raises(AutoscaleSettingsError, match=f"autoscaling.{field_name.replace('_', '-')} = "):
        AutoscaleSettings(**{field_name: value})


def samples_at(rate: float, capacity: float, *, executors: int, until: float = 1500, lag: int = 0,
               start: float = 0, records: float = 0) -> list[MetricSample]:
    """Samples every 15 s of a streamlet reading `rate` records/s with `capacity` records per busy second."""
    return [MetricSample(at=t, records=int(records + rate * (t - start)), busy_seconds=rate * (t - start) / capacity,
                         lag=lag, executors=executors, cores=1, partitions=8) for t in range(int(start), int(until), 15)]


def test_a_restarted_process_restarts_the_stabilization():
    settings = AutoscaleSettings()
    before = samples_at(500, 40, executors=1, until=1500)
    after = samples_at(500, 40, executors=1, start=1500, until=1800)  # counters from 0 again
    decision, _ = decide(before + after, settings, AutoscalerState(), now=1785)
    assert decision.held is Hold.STABILIZING and not decision.changes
    decision, _ = decide(before, settings, AutoscalerState(), now=1485)
    assert decision.direction == "up"


def test_a_scale_up_or_the_band_cancels_a_pending_scale_down():
    settings = AutoscaleSettings()
    low = samples_at(10, 320, executors=8)
    decision, state = decide(low, settings, AutoscalerState(), now=low[-1].at)
    assert decision.held is Hold.SCALE_DOWN_DELAY and state.scale_down_since == low[-1].at
    in_band = samples_at(180, 320, executors=8)
    decision, state = decide(in_band, settings, state, now=in_band[-1].at)
    assert "within the utilization band" in decision.reason and state == AutoscalerState()

    # so does a change of executors made elsewhere (`kubectl streamlets scale`, a resubmission): its
    # asks were about the old count; the new run asks anew and waits the whole interval again
    settings = AutoscaleSettings(scale_down_interval=600)
    _, state = decide(low, settings, AutoscalerState(), now=low[-1].at)
    assert state.scale_down_since == low[-1].at
    later = low + samples_at(10, 320, executors=6, start=1500, until=3000, records=low[-1].records)
    decision, state = decide(later, settings, state, now=later[-1].at)  # 1,500 s after the first ask
    assert decision.held is Hold.SCALE_DOWN_DELAY and not decision.changes, decision.reason
    assert state.scale_down_since == later[-1].at


def test_a_load_below_the_band_that_rounds_to_the_current_count_changes_nothing():
    # 2 executors, 80/s capacity, 28/s: below the band (28/0.4 + 28/6 = 74.7 < 80) but the target,
    # 28/0.7 + 28/6 = 44.7/s, is 0.56 of the capacity: ceil(0.56 * 2) = 2
    decision, state = decide(samples_at(28, 80, executors=2), AutoscaleSettings(scale_down_interval=0),
                             AutoscalerState(), now=1485)
    assert not decision.changes and decision.held is None and decision.wanted == 2
    assert "no whole executor" in decision.reason and state == AutoscalerState()


# --- the settings as the config and the resource carry them (KNOBS, Autoscaling) -----------------

def test_every_setting_has_a_config_key_a_resource_field_and_flinks_name():
    from dataclasses import fields

    from streamlets.autoscale import KNOBS
    assert [k.field for k in KNOBS.values()] == [f.name for f in fields(AutoscaleSettings)]
    for k in KNOBS.values():
        assert k.key == k.field.replace("_", "-") and k.flink and k.doc
        assert k.resource == k.field + ("_seconds" if k.seconds else "")
        assert k.default == getattr(AutoscaleSettings(), k.field)


def test_config_values_in_their_text_forms():
    from streamlets.autoscale import Autoscaling
    a = Autoscaling.from_config({"mode": "Active", "max-executors": "3", "target-utilization": 0.6,
                                 "stabilization-interval": "90s", "catch-up-duration": "5 minutes",
                                 "scale-down-interval": 120000})  # a bare number: milliseconds, as Typesafe's
    assert a.mode == "active"
    s = a.settings
    assert (s.max_executors, s.target_utilization, s.stabilization_interval, s.catch_up_duration,
            s.scale_down_interval) == (3, 0.6, 90.0, 300.0, 120.0)
    assert s.metrics_window == AutoscaleSettings().metrics_window  # unset: the default
    assert Autoscaling.from_config({}).mode == "off"


def test_the_resource_carries_what_differs_from_the_defaults_and_reads_back():
    from streamlets.autoscale import Autoscaling
    a = Autoscaling.from_config({"mode": "passive", "min-executors": 2, "max-executors": 4, "metrics-window": "2 minutes"})
    assert a.resource() == {"mode": "passive", "min_executors": 2, "max_executors": 4, "metrics_window_seconds": 120.0}
    assert Autoscaling.from_resource(a.resource()) == a
    assert a.updated({"max-executors": 6}).settings.max_executors == 6 and a.settings.max_executors == 4


@pytest.mark.parametrize(("values", "message"), [
    ({"mode": "sometimes"}, "autoscaling.mode: 'sometimes' is not one of off, passive, active"),
    ({"max-executor": 3}, "autoscaling.max-executor: no such setting"),
    ({"min-executors": "1.5"}, "autoscaling.min-executors: '1.5' is not a whole number"),
    ({"catch-up-duration": "soon"}, "autoscaling.catch-up-duration: 'soon' is not a duration"),
    ({"target-utilization": True}, "autoscaling.target-utilization: True is not a number"),
    ({"min-executors": 3, "max-executors": 2}, "autoscaling.max-executors = 2: must be at least min-executors (3)"),
])
def test_bad_config_values_name_the_key(values, message):
    from streamlets.autoscale import Autoscaling
    with pytest.raises(AutoscaleSettingsError) as caught:
        Autoscaling.from_config(values)
    assert str(caught.value).startswith(message)


def test_the_readme_table_lists_every_setting_with_its_resource_field_and_flink_option():
    """The README's Autoscaling table is the settings' (KNOBS): config key, resource field, Flink option."""
    from pathlib import Path

    from pydantic.alias_generators import to_camel

    from streamlets.autoscale import KNOBS, MODE_KEY
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = {cells[0].strip("` "): [c.strip() for c in cells]
            for line in readme.splitlines() if line.startswith("| `")
            for cells in [line.strip("|").split("|")] if len(cells) == 4}
    for k in KNOBS.values():
        assert k.key in rows, k.key
        key, field, default, flink = rows[k.key]
        assert field == f"`{to_camel(k.resource)}`" and f"`{k.flink}`" in flink, rows[k.key]
    assert MODE_KEY in rows


# --- recorded series: the operator's samples of enrich on the e2e cluster -----------------------

def replay(name: str, every: float = 15.0) -> tuple[dict, list[tuple[float, Decision]]]:
    """A recording of tests/e2e/test_flight_delays_claim.py (STREAMLETS_E2E_RECORD: enrich's
    MetricSamples every 5 s, read from its driver's page as the operator reads it) replayed through
    an Autoscaler with the recording's settings, deciding every `every` seconds as the operator's
    timer does: (the recording, [(seconds since its first sample, decision)])."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "autoscale" / name).read_text())
    scaler = Autoscaler(Autoscaling.from_config(data["autoscaling"]).settings)
    start = next_at = data["samples"][0]["at"]
    out = []
    for s in data["samples"]:
        scaler.observe(MetricSample(**s))
        if s["at"] >= next_at:
            out.append((s["at"] - start, scaler.decide()))
            next_at = s["at"] + every
    return data, out


def test_a_recorded_burst_is_met_with_the_maximum_and_never_a_scale_down():
    """Passive on the cluster (bench/bench_autoscale.py: one executor throughout, at 100m CPU),
    January first, then February to July at once: 181,600 records of lag, which Spark read in a
    batch of 2,000 and one of about 70 s. The decisions are pinned: none while stabilizing and
    collecting (the executor registered at 49 s: a new run), "up to the maximum of 3" through
    January's long first batch (no batch finished in the window: its running time bounds its rate)
    and the burst, "no whole executor" between them, never down; the operator's own Event in that
    run said it once."""
    data, decisions = replay("e2e-burst-passive.json")
    assert {d.current for t, d in decisions if t >= 49} == {1}
    assert all(d.held in (Hold.STABILIZING, Hold.COLLECTING) for t, d in decisions if t < 140)
    changes = [(round(t), d.direction, d.target) for t, d in decisions if d.changes]
    assert changes == [(t, "up", 3) for t in (145, 162, 178, 194, 210, 261, 277, 293, 309, 325)], changes
    assert all("capped at max_executors=3" in d.reason for _, d in decisions if d.changes)
    assert not any(d.direction == "down" for _, d in decisions)
    (first,) = [d for t, d in decisions if round(t) == 145]
    assert first.evaluation is not None and first.evaluation.running_seconds > 130
    assert "no micro-batch finished; one running" in first.reason
    assert [e["reason"] for e in data["events"]] == ["AutoscaleRecommended"]
    assert data["events"][0]["message"].startswith("enrich: 1 -> 3 executor(s) recommended (passive)")


def test_a_recorded_burst_scaled_in_place_restarts_the_window_then_waits_to_scale_down():
    """Active on the cluster, the same run as the passive one: the operator took enrich from 1 to 2
    executors in place during January's long first batch and from 2 to 3 during the burst (the
    recording's executors go 1, 2, 3; the driver is the same). Replayed: only ups, to 3, decided
    from the running batch's bound or the finished ones; each executor that joined restarts the
    stabilization, then a new window; while the burst's batch ran at 3, "at max"; once the lag
    has drained, a scale-down to one that waits for the scale-down interval; never down while
    there is lag."""
    data, decisions = replay("e2e-burst-active.json")
    counts = [s["executors"] for s in data["samples"]]
    assert [n for i, n in enumerate(counts) if i == 0 or n != counts[i - 1]] == [0, 1, 2, 3]
    ups = [d for _, d in decisions if d.changes]
    assert ups and all(d.direction == "up" and d.target == 3 and d.current in (1, 2) for d in ups)
    assert any(d.evaluation is not None and d.evaluation.running_seconds > 0 for d in ups)
    for n in (2, 3):
        joined = next(t for t, d in decisions if d.current == n)
        after = [d for t, d in decisions if t >= joined]
        assert [d.held for d in after[:3]] == [Hold.STABILIZING, Hold.STABILIZING, Hold.COLLECTING]
    assert any(d.held == Hold.AT_MAX for _, d in decisions)
    _, last = decisions[-1]
    assert last.held == Hold.SCALE_DOWN_DELAY and last.wanted == 1 and last.evaluation.lag == 0
    lags = {round(s["at"] - data["samples"][0]["at"]): s["lag"] for s in data["samples"]}
    assert all(lags[round(t)] == 0 for t, d in decisions if d.wanted is not None and d.wanted < d.current)
    assert [e["reason"] for e in data["events"]] == ["Autoscaled", "Autoscaled"]
    assert ["enrich: 1 -> 2" in data["events"][0]["message"], "enrich: 2 -> 3" in data["events"][1]["message"]] == [True, True]


def long_batch(running_from: float, lag: int, *, until: float = 600, executors: int = 1) -> list[MetricSample]:
    """Samples every 15 s of a streamlet whose one micro-batch has run since `running_from` and not
    finished (records and busy time stand still), `lag` records behind."""
    return [MetricSample(at=t, records=1000, busy_seconds=20.0, lag=lag, executors=executors, cores=1, partitions=6,
                         running_seconds=max(0.0, t - running_from)) for t in range(0, int(until), 15)]


def test_a_micro_batch_running_longer_than_the_catch_up_scales_up_before_it_finishes():
    """No batch finished in the window: lag / the running batch's time bounds its rate from above."""
    settings = AutoscaleSettings(stabilization_interval=30, metrics_window=60, catch_up_duration=30,
                                 max_executors=3, max_scale_up_factor=2.0)
    samples = long_batch(running_from=400, lag=60_000)  # at 585: 185 s running, at most 324/s
    decision, _ = decide(samples, settings, AutoscalerState(), now=samples[-1].at)
    assert decision.direction == "up" and decision.target == 3, decision.reason
    assert "no micro-batch finished; one running 185 s" in decision.reason
    assert decision.evaluation is not None and decision.evaluation.busy == 1.0
    # The same batch running for less than the catch-up duration drains the lag in time: no change
    samples = long_batch(running_from=565, lag=60_000)
    decision, _ = decide(samples, settings, AutoscalerState(), now=samples[-1].at)
    assert not decision.changes and decision.direction == "none", decision.reason
    # Without the running time, the same window is "no busy time measured"
    frozen = [MetricSample(**{**s.__dict__, "running_seconds": 0.0}) for s in long_batch(400, 60_000)]
    decision, _ = decide(frozen, settings, AutoscalerState(), now=frozen[-1].at)
    assert not decision.changes and "no busy time measured" in decision.reason


def test_the_fixed_cost_of_a_batch_is_fitted_apart_from_its_per_record_cost():
    """addBatch = 0.2 s + 50 µs a record, with jitter and three batches slowed threefold (a garbage
    collection, a cold executor): the fit finds the 0.2 s within 10%."""
    rnd = random.Random(5)
    sizes = [rnd.randint(500, 6000) for _ in range(FIXED_COST_BATCHES)]
    batches = [(n, (0.2 + n * 50e-6) * rnd.uniform(0.95, 1.05) * (3 if i in (4, 17, 30) else 1))
               for i, n in enumerate(sizes)]
    assert batch_fixed_cost(batches) == pytest.approx(0.2, rel=0.1)
    # a stateful query's no-data batches (0 records: the watermark moved) pay the fixed cost alone
    assert batch_fixed_cost([(0, 0.2)] * 5 + batches[:10]) == pytest.approx(0.2, rel=0.1)
    # nothing to tell the parts apart: too few batches, or all of one size
    assert batch_fixed_cost(batches[:FIXED_COST_MIN_BATCHES - 1]) == 0.0
    assert batch_fixed_cost([(1000, 0.25)] * 20) == 0.0
    # no fixed cost: none found; never more than the smallest batch took
    assert batch_fixed_cost([(n, n * 50e-6) for n in sizes]) == pytest.approx(0.0, abs=1e-9)
    assert batch_fixed_cost([(n, 0.2) for n in sizes]) == 0.2


def back_to_back(rate: float, *, executors: int, duration: float, fixed: float = 0.2, slot_rate: float = 5000.0,
                 other: float = 0.1, step: float = 15.0, seed: int = 11) -> list[MetricSample]:
    """Samples every `step` s of a micro-batch streamlet on Spark's default trigger: each batch
    starts as the last ends and reads what arrived meanwhile (`rate` records/s, ±30% jitter); its
    addBatch is `fixed` seconds plus its records at `slot_rate` per second per executor (one
    core, 8 partitions), ±5%, the rest of the batch `other` seconds. Busy and overhead seconds are
    counted as monitor.QueryStats counts them (batch_fixed_cost of the recent batches)."""
    rnd = random.Random(seed)
    recent: deque[tuple[int, float]] = deque(maxlen=FIXED_COST_BATCHES)
    samples, t, next_sample = [], 0.0, 0.0
    records = read = 0
    busy = overhead = 0.0
    while t <= duration:
        n = max(0, int(rate * (t - read / rate) * rnd.uniform(0.7, 1.3))) if rate else 0
        add_batch = (fixed + n / (slot_rate * executors)) * rnd.uniform(0.95, 1.05)
        end = t + add_batch + other
        while next_sample <= end and next_sample <= duration:  # what the driver's page said meanwhile
            samples.append(MetricSample(at=next_sample, records=records, busy_seconds=busy,
                                        lag=max(0, int(rate * next_sample) - records), executors=executors,
                                        cores=1, partitions=8, overhead_seconds=overhead))
            next_sample += step
        read += n
        records += n
        busy += add_batch
        recent.append((n, add_batch))
        overhead += min(add_batch, batch_fixed_cost(recent))
        t = end
    return samples


def decisions_on(samples: list[MetricSample], settings: AutoscaleSettings) -> list[Decision]:
    scaler, out = Autoscaler(settings), []
    for s in samples:
        scaler.observe(s)
        out.append(scaler.decide())
    return out


def test_back_to_back_micro_batches_at_the_target_make_no_decision_in_an_hour():
    """4 executors absorb 20,000 records/s beyond the batches' fixed cost; 14,000/s is the target
    utilization 0.7. Batches run back to back (about 1 s: 0.2 s fixed, 0.7 s of records, 0.1 s
    else): no decision in an hour, the utilization measured near 0.7."""
    samples = back_to_back(14_000, executors=4, duration=HOUR + 20 * MINUTE)
    decisions = [d for d in decisions_on(samples, AutoscaleSettings(max_executors=8)) if d.evaluation is not None]
    assert decisions[-1].at - decisions[0].at >= HOUR - MINUTE
    assert all(not d.changes and "within the utilization band" in d.reason for d in decisions)
    assert all(0.6 < d.evaluation.utilization < 0.8 for d in decisions)


def test_an_over_provisioned_streamlet_whose_batches_run_back_to_back_scales_down():
    """The same 4 executors at 2,000 records/s: batches of about 0.33 s, 0.2 of it fixed. Counted
    as busy, the fixed cost makes addBatch about 0.7 of the time at this load as at any other: the
    streamlet looks well used and keeps its 4 executors; counted apart, the records take 0.1 of
    it and 4 go down to 2 (max_scale_down_factor 0.6)."""
    settings = AutoscaleSettings(scale_down_interval=0)
    samples = back_to_back(2_000, executors=4, duration=30 * MINUTE)
    last = decisions_on(samples, settings)[-1]
    assert last.changes and last.direction == "down" and last.target == 2, last.reason
    assert last.evaluation is not None and last.evaluation.utilization < 0.2
    assert "fixed per batch" in last.reason
    whole = decisions_on([replace(s, overhead_seconds=0.0) for s in samples], settings)[-1]
    assert not whole.changes and "within the utilization band" in whole.reason
    assert whole.evaluation is not None and whole.evaluation.busy > 0.6


def test_a_backlog_counts_the_whole_batch_as_busy():
    """A fixed cost misjudged must not hide a backlog: while the lag is above the backlog
    threshold, nothing of addBatch is left out."""
    settings = AutoscaleSettings(stabilization_interval=30, metrics_window=60, backlog_lag_threshold=10)
    samples = [MetricSample(at=t, records=100 * t, busy_seconds=0.9 * t, lag=50_000, executors=1, cores=1,
                            partitions=8, overhead_seconds=0.9 * t) for t in range(0, 181, 15)]
    decision, _ = decide(samples, settings, AutoscalerState(), now=180)
    assert decision.evaluation is not None and decision.evaluation.overhead == 0.0
    assert decision.evaluation.busy == pytest.approx(0.9) and decision.direction == "up", decision.reason


def looped(samples: list[dict], start: float, duration: float) -> list[MetricSample]:
    """The samples from `start` on (seconds since the first), repeated until `duration` seconds of
    them: each repeat's times and counters offset to continue where the last ended (a counter
    never drops: that reads as a restart), the rest as recorded."""
    t0 = samples[0]["at"]
    part = [s for s in samples if s["at"] - t0 >= start]
    counters = ("at", "records", "busy_seconds", "overhead_seconds")
    out: list[MetricSample] = []
    offset = dict.fromkeys(counters, 0.0)
    while not out or out[-1].at - out[0].at < duration:
        out += [MetricSample(**{**s, **{k: offset[k] + s[k] for k in counters}}) for s in part[bool(out):]]
        offset = {k: getattr(out[-1], k) - part[0][k] for k in counters}
    return out


def test_a_recorded_steady_load_makes_no_decision_in_an_hour_once_warm():
    """Passive on the cluster, one executor at 0.3 CPU: January to March's flights as day files,
    one every 4 s (about 230 records/s). While the first batches ran on a cold executor (about
    5,000 records in 20 s) and before eight batches told the fixed cost, the window asked for more
    (pinned: ups from 148 to 214 s); warm, the load asks nothing. addBatch is mostly the batches'
    fixed cost (enrich's join state store partitions): 0.5 to 0.8 of the time against 0.15 to 0.35
    for its records. The warm part, looped for an hour: no decision."""
    data, decisions = replay("e2e-steady-passive.json")
    assert {d.current for t, d in decisions if t >= 30} == {1}
    ups = [(round(t), d.target) for t, d in decisions if d.changes]
    assert ups and all(d.direction == "up" for _, d in decisions if d.changes)
    assert all(148 <= t <= 214 for t, _ in ups), ups
    warm = [d for t, d in decisions if t >= 230]
    assert all(not d.changes and d.evaluation is not None for d in warm)
    assert all(0.5 < d.evaluation.overhead < 0.8 and 0.1 < d.evaluation.busy < 0.4 for d in warm), \
        [(d.evaluation.overhead, d.evaluation.busy) for d in warm]
    settings = Autoscaling.from_config(data["autoscaling"]).settings
    hour = decisions_on(looped(data["samples"], 230, HOUR), settings)
    evaluated = [d for d in hour if d.evaluation is not None]
    assert evaluated[-1].at - evaluated[0].at >= HOUR - 2 * MINUTE
    assert all(not d.changes for d in hour), [d.reason for d in hour if d.changes][:3]


def test_a_recorded_oscillating_load_is_followed_without_flapping():
    """Passive on the cluster, one executor at 0.3 CPU: each month's flights as 30 day files, the
    first 10 at once, then one every 6 s. The flights ingress reads a file a micro-batch, so enrich
    sees its input swing between about 130 and 350 records/s, twice a month. Pinned: ups only while
    the first batches ran cold (136 to 169 s), then nothing for the rest of the run whichever way
    the input swung; never down."""
    data, decisions = replay("e2e-oscillating-passive.json")
    assert {d.current for _, d in decisions} == {1}
    assert [round(t) for t, d in decisions if d.changes] == [136, 153, 169]
    assert all(d.direction == "up" for _, d in decisions if d.changes)
    warm = [d.evaluation for t, d in decisions if t > 169 and d.evaluation is not None]
    rates = [e.input_rate for e in warm]
    assert min(rates) < 160 and max(rates) > 320, rates  # the swing, seen in the window's average
    assert not any(e.backlogged for e in warm)


def test_a_recorded_oscillating_load_scaled_in_place_waits_out_its_swings_to_scale_down():
    """Active on the cluster, the same feed: the operator took enrich from 1 to 2 executors during
    its first, cold batches and to 3 at the first swing up (two Autoscaled Events). Replayed: ups
    only, to 3, while cold; each new count restarts the stabilization and a window, and a
    scale-down asked for at 2 executors is void at 3; then every swing down asks for fewer and
    every swing up (at max, or the band) cancels the ask before the 60 s scale-down interval, so
    no change is made for the rest of the run: an oscillation with a period about the interval
    does not flap."""
    data, decisions = replay("e2e-oscillating-active.json")
    counts = [s["executors"] for s in data["samples"]]
    assert [n for i, n in enumerate(counts) if i == 0 or n != counts[i - 1]] == [1, 2, 3]
    changes = [(round(t), d.direction, d.target) for t, d in decisions if d.changes]
    assert changes == [(132, "up", 3), (246, "up", 3)], changes
    at_three = [(t, d) for t, d in decisions if d.current == 3]
    assert [d.held for _, d in at_three[:5]] == [Hold.STABILIZING] * 2 + [Hold.COLLECTING] * 3
    asks = [t for t, d in at_three if d.held is Hold.SCALE_DOWN_DELAY]
    cancels = [t for t, d in at_three if d.held in (None, Hold.AT_MAX) and d.evaluation is not None]
    assert len(asks) >= 3 and len(cancels) >= 3 and not any(d.changes for _, d in at_three)
    assert all("asked for since 0 s" in d.reason for t, d in at_three if t in asks[:1])
    assert [e["reason"] for e in data["events"]] == ["Autoscaled", "Autoscaled"]
    assert ["enrich: 1 -> 2" in data["events"][0]["message"], "enrich: 2 -> 3" in data["events"][1]["message"]] == [True, True]
