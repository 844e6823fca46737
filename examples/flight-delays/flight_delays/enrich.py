"""Enrich: join each flight with the weather at its origin airport in its scheduled hour."""

from __future__ import annotations

from datetime import timedelta

from streamlets import AvroInlet, AvroOutlet, DurationParameter, Streamlet


def spark_delay(delay: timedelta) -> str:
    """A duration as the interval text Spark's withWatermark takes ("21600 seconds")."""
    millis = round(delay.total_seconds() * 1000)
    return f"{millis // 1000} seconds" if millis % 1000 == 0 else f"{millis} milliseconds"


class FlightWeatherJoin(Streamlet):
    """Stream-stream inner join of flights and weather observations on (origin, time_hour):
    emits each flight that has a weather observation at its origin in its scheduled departure
    hour, with temperature, wind speed, precipitation and visibility.

    Both sides carry a watermark on time_hour; since time_hour is part of the equi-join key,
    Spark drops a side's buffered rows once the watermark passes their hour, so the join state
    stays bounded (about `watermark-delay` worth of each feed)."""

    flights = AvroInlet("flights", "schemas/flight_event.avsc")
    weather = AvroInlet("weather", "schemas/weather.avsc")
    outlet = AvroOutlet("out", "schemas/enriched_flight.avsc", key="origin")
    delay = DurationParameter(
        "watermark-delay",
        "how far (event time) one feed's records may lag behind the newest record of either feed "
        "and still be joined; later ones are dropped",
        default="6 hours",
    )

    def read_flights(self, ctx):
        """The flights to join: the `flights` inlet's records (a later version may add a feed)."""
        return ctx.read_stream(self.flights)

    def create_logic(self, ctx) -> None:
        delay = spark_delay(ctx.config[self.delay])
        flights = self.read_flights(ctx).withWatermark("time_hour", delay).alias("f")
        weather = ctx.read_stream(self.weather).withWatermark("time_hour", delay).alias("w")
        joined = flights.join(
            weather,
            (flights["origin"] == weather["origin"]) & (flights["time_hour"] == weather["time_hour"]),
            "inner",
        )
        flight_columns = [f"f.`{name}`" for name in self.flights.schema.field_names]
        out = joined.selectExpr(*flight_columns, "w.temp", "w.wind_speed", "w.precip", "w.visib")
        ctx.write_stream(out, self.outlet, output_mode="append")
