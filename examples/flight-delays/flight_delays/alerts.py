"""Delay alerts: a stateless filter, run in Spark 4.1's Real-Time Mode.

Each departure delayed by at least `threshold-minutes` becomes a DelayAlert as soon as it
arrives: no state, no Python UDF, Kafka in and Kafka out, so Real-Time Mode can run it
(`trigger = Trigger.real_time(...)`: long-lived tasks, one per inlet partition; the duration is
the checkpoint interval, not a latency target). `streamlets.alerts.trigger = micro-batch` in a
config runs the same code as micro-batches.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet
from streamlets.trigger import Trigger


class DelayAlerts(Streamlet):
    """Emits a DelayAlert for each flight that left at least `threshold-minutes` late."""

    inlet = AvroInlet("in", "schemas/flight_event.avsc")
    outlet = AvroOutlet("out", "schemas/delay_alert.avsc", key="origin")
    threshold = IntegerParameter("threshold-minutes", "minimum departure delay that raises an alert", default=60)
    trigger = Trigger.real_time("5 seconds")

    def create_logic(self, ctx) -> None:
        flights = ctx.read_stream(self.inlet)
        late = flights.where(F.col("dep_delay") >= F.lit(ctx.config[self.threshold]))
        ctx.write_stream(late.select("flight_id", "origin", "dest", "carrier", "sched_dep_time", "dep_delay"), self.outlet)
