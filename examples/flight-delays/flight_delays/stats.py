"""Statistics: departures, cancellations and departure delays per airport and hour."""

from __future__ import annotations

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, DurationParameter, Streamlet

from .enrich import spark_delay


class DepartureDelayStats(Streamlet):
    """Per origin airport and scheduled-departure hour (1-hour event-time windows on
    sched_dep_time): number of flights, cancelled flights, mean and max departure delay.

    Records are deduplicated by flight_id first: Kafka-to-Kafka delivery is exactly-once by
    default, but an upstream streamlet set to `delivery = at-least-once` replays a batch killed
    midway and a flight can arrive twice; dropping repeats of the natural key keeps the counts
    exact then too. Output mode update: every
    micro-batch emits the current value of each window it changed (stamped with the batch's
    updated_at), so a finite input is emitted completely without waiting for the watermark to
    pass the end of the data. Keyed by (origin, window_start): on a compacted topic the latest
    version of each window survives."""

    inlet = AvroInlet("in", "schemas/enriched_flight.avsc")
    outlet = AvroOutlet("out", "schemas/delay_stats.avsc", key=["origin", "window_start"])
    delay = DurationParameter(
        "watermark-delay",
        "how late (event time, behind the newest scheduled departure seen) a flight may arrive and "
        "still be counted; also how long a flight_id is remembered for deduplication",
        default="6 hours",
    )

    def create_logic(self, ctx) -> None:
        flights = (
            ctx.read_stream(self.inlet)
            .withWatermark("sched_dep_time", spark_delay(ctx.config[self.delay]))
            .dropDuplicatesWithinWatermark(["flight_id"])
        )
        stats = (
            flights.groupBy(F.window("sched_dep_time", "1 hour"), "origin")
            .agg(
                F.count(F.lit(1)).alias("flights"),
                F.sum(F.col("cancelled").cast("long")).alias("cancelled"),
                F.avg("dep_delay").alias("mean_dep_delay"),
                F.max("dep_delay").alias("max_dep_delay"),
            )
            .select(
                "origin",
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "flights", "cancelled", "mean_dep_delay", "max_dep_delay",
                # The micro-batch's timestamp: fixed per batch id, so a replayed batch is identical.
                F.current_timestamp().alias("updated_at"),
            )
        )
        ctx.write_stream(stats, self.outlet, output_mode="update")
