"""Flight delays with a poison record: the enrichment's logic fails on chosen flights' records
(a Python UDF raising for their flight_id), and a file egress whose sink can be made to fail.
Test app for streamlets.runtime.quarantine (tests/integration/test_quarantine.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_EXAMPLE = str(Path(__file__).resolve().parents[4] / "examples" / "flight-delays")
if _EXAMPLE not in sys.path:
    sys.path.insert(0, _EXAMPLE)

from flight_delays.egress import DelayStatsFiles  # noqa: E402
from flight_delays.enrich import FlightWeatherJoin, spark_delay  # noqa: E402

from streamlets import BooleanParameter, StringParameter  # noqa: E402


class PoisonError(ValueError):
    """What the enrichment raises for a poison flight."""


def check_flight(flight_id: str, poison: frozenset) -> str:
    if flight_id in poison:
        raise PoisonError(f"cannot enrich flight {flight_id}")
    return flight_id


class PoisonJoin(FlightWeatherJoin):
    """FlightWeatherJoin whose flights pass a Python UDF that fails on `poison-flights`."""

    poison = StringParameter("poison-flights", "comma-separated flight_ids the logic fails on", default="")

    def create_logic(self, ctx) -> None:
        from pyspark.sql import functions as F

        poison = frozenset(filter(None, ctx.config[self.poison].split(",")))
        check = F.udf(lambda fid: check_flight(fid, poison), "string")
        delay = spark_delay(ctx.config[self.delay])
        flights = ctx.read_stream(self.flights).withColumn("flight_id", check("flight_id"))
        flights = flights.withWatermark("time_hour", delay).alias("f")
        weather = ctx.read_stream(self.weather).withWatermark("time_hour", delay).alias("w")
        joined = flights.join(
            weather,
            (flights["origin"] == weather["origin"]) & (flights["time_hour"] == weather["time_hour"]),
            "inner",
        )
        flight_columns = [f"f.`{name}`" for name in self.flights.schema.field_names]
        out = joined.selectExpr(*flight_columns, "w.temp", "w.wind_speed", "w.precip", "w.visib")
        ctx.write_stream(out, self.outlet, output_mode="append")


class FlakyFiles(DelayStatsFiles):
    """DelayStatsFiles whose sink is unreachable with `fail-sink` (fails on every batch)."""

    fail = BooleanParameter("fail-sink", "every batch's write fails, as an unreachable sink", default=False)

    def create_logic(self, ctx) -> None:
        if not ctx.config[self.fail]:
            return super().create_logic(ctx)
        stats = ctx.read_stream(self.inlet)

        def write(batch, batch_id: int) -> None:
            if batch.count():
                raise ConnectionError("sink unreachable: connection refused")

        ctx.start_query(stats.writeStream.foreachBatch(write), "files")
