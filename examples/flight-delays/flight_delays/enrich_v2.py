"""Enrich, version 2: flights arrive on a second inlet too (`more-flights`: another feed of
FlightEvents, e.g. a second carrier system), joined with the weather like the first.

The upgrade from version 1 (blueprint.yaml -> blueprint-v2.yaml) keeps the join's state: the new
inlet's Kafka source is one more named source of the same query (streamlets.sources), unioned
with the flights before the same stream-stream join, so the stateful operators and the state's
schema are unchanged and the query continues from version 1's checkpoint or savepoint, the new
inlet read from its earliest offset (tests/integration/test_flight_delays_upgrade.py).
"""

from __future__ import annotations

from streamlets import AvroInlet

from .enrich import FlightWeatherJoin


class FlightWeatherJoinV2(FlightWeatherJoin):
    """FlightWeatherJoin whose flights are the `flights` and the `more-flights` inlets' records."""

    more_flights = AvroInlet("more-flights", "schemas/flight_event.avsc")

    def read_flights(self, ctx):
        """The records of both flight inlets (one schema), in one stream."""
        return ctx.read_stream(self.flights).unionByName(ctx.read_stream(self.more_flights))
