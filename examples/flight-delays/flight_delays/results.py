"""Reading the files DelayStatsFiles writes, and a per-airport summary.

    python -m flight_delays.results examples/flight-delays/output
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

KEY = ["origin", "window_start"]
COLUMNS = ["origin", "window_start", "window_end", "flights", "cancelled", "mean_dep_delay", "max_dep_delay"]
TIMESTAMPS = ["window_start", "window_end", "updated_at"]


def stats_folder(output_dir: str | Path) -> Path:
    """The folder of batch files: `<output_dir>/delay-stats`, or `output_dir` itself."""
    output_dir = Path(output_dir)
    nested = output_dir / "delay-stats"
    return nested if nested.is_dir() else output_dir


def load_results(output_dir: str | Path, *, with_updated_at: bool = False) -> pd.DataFrame:
    """The latest version of each (origin, window_start) across all batch files.

    Latest = greatest updated_at; among equal updated_at, the later batch file, then the later
    line. Sorted by origin and window_start; timestamps are pandas UTC timestamps. Columns as
    reference.reference_stats (plus updated_at if `with_updated_at`).
    """
    records = []
    for file_index, path in enumerate(sorted(stats_folder(output_dir).glob("batch-*.jsonl"))):
        with path.open(encoding="utf-8") as f:
            for line_index, line in enumerate(f):
                if line.strip():
                    records.append({**json.loads(line), "_file": file_index, "_line": line_index})
    columns = COLUMNS + (["updated_at"] if with_updated_at else [])
    if not records:
        empty = pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
        for c in TIMESTAMPS:
            if c in empty:
                empty[c] = pd.to_datetime(empty[c], utc=True)
        return empty
    df = pd.DataFrame.from_records(records)
    for c in TIMESTAMPS:
        df[c] = pd.to_datetime(df[c], utc=True, format="ISO8601")
    df = df.sort_values(["updated_at", "_file", "_line"], kind="stable").drop_duplicates(KEY, keep="last")
    df = df.astype({"flights": "int64", "cancelled": "int64", "mean_dep_delay": "float64", "max_dep_delay": "float64"})
    return df.sort_values(KEY, kind="stable")[columns].reset_index(drop=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per airport: total flights, cancelled, cancelled share, overall max departure delay and
    the busiest hour (the window with the most flights; the earliest on ties)."""
    if df.empty:
        return pd.DataFrame(columns=["flights", "cancelled", "cancelled_pct", "max_dep_delay", "busiest_hour", "busiest_hour_flights"])
    busiest = df.sort_values(["origin", "flights", "window_start"], ascending=[True, False, True]).groupby("origin").head(1)
    out = df.groupby("origin").agg(flights=("flights", "sum"), cancelled=("cancelled", "sum"),
                                   max_dep_delay=("max_dep_delay", "max"))
    out.insert(2, "cancelled_pct", (100.0 * out["cancelled"] / out["flights"]).round(2))
    busiest = busiest.set_index("origin")
    out["busiest_hour"] = busiest["window_start"]
    out["busiest_hour_flights"] = busiest["flights"]
    return out


def differences(actual: pd.DataFrame, expected: pd.DataFrame, tolerance: float = 1e-9) -> list[str]:
    """How `actual` windows differ from `expected` (both as load_results returns them): missing
    or extra windows, counts or maxima not equal, means further apart than `tolerance`."""
    a = actual.set_index(KEY).sort_index()
    e = expected.set_index(KEY).sort_index()
    problems = [f"missing window {k}" for k in e.index.difference(a.index)[:10]]
    problems += [f"extra window {k}" for k in a.index.difference(e.index)[:10]]
    both = a.index.intersection(e.index)
    a, e = a.loc[both], e.loc[both]
    for col in ("window_end", "flights", "cancelled", "max_dep_delay"):
        bad = ~((a[col] == e[col]) | (a[col].isna() & e[col].isna()))
        problems += [f"{k}: {col} {a.at[k, col]} != {e.at[k, col]}" for k in a.index[bad][:10]]
    diff = (a["mean_dep_delay"] - e["mean_dep_delay"]).abs()
    bad = (diff > tolerance) | (a["mean_dep_delay"].isna() != e["mean_dep_delay"].isna())
    problems += [f"{k}: mean_dep_delay {a.at[k, 'mean_dep_delay']} != {e.at[k, 'mean_dep_delay']}" for k in a.index[bad][:10]]
    return problems


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m flight_delays.results",
                                     description="Per-airport summary of the delay statistics an application run wrote.")
    parser.add_argument("output_dir", help="the files streamlet's output folder")
    parser.add_argument("--check", action="store_true",
                        help="compare every window with the batch computation of reference.py")
    parser.add_argument("--months", default="1-12", help="months the run processed (for --check), e.g. 1-12 or 1,2")
    args = parser.parse_args(argv)
    df = load_results(args.output_dir)
    if df.empty:
        print(f"no results in {stats_folder(args.output_dir)}", file=sys.stderr)
        return 1
    table = summary(df)
    print(f"{len(df)} airport-hours from {df['window_start'].min()} to {df['window_end'].max()}\n")
    print(table.to_string())
    if args.check:
        from .prepare import parse_months
        from .reference import reference_stats

        expected = reference_stats(parse_months(args.months))
        problems = differences(df, expected)
        if problems:
            print(f"\nDIFFERS from the batch computation ({len(problems)} shown):", *problems, sep="\n  ")
            return 1
        print(f"\nequal to the batch computation (reference.py): {len(expected)} windows, "
              f"{int(expected['flights'].sum()):,} flights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
