"""LogicContext: what a streamlet's `create_logic(ctx)` may use, as an SDK protocol.

The runtime's StreamletContext (streamlets.runtime.context) satisfies it; the SDK names only this
protocol, so that the Streamlet base class needs nothing from the runtime (tests/unit/test_layers.py
counts type-only imports too). Annotate a streamlet's logic with it::

    from streamlets import LogicContext, Streamlet

    class Doubler(Streamlet):
        def create_logic(self, ctx: LogicContext) -> None:
            ctx.write_stream(ctx.read_stream(self.inlet), self.outlet)

Importing this module imports no Spark: pyspark's types are named for type checkers only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .config import StreamletConfig
from .ports import AvroInlet, AvroOutlet, Port
from .trigger import Trigger
from .volumes import VolumeMount

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

__all__ = ["LogicContext"]


class LogicContext(Protocol):
    """The running streamlet's view of the world, as its logic sees it (README, "A streamlet in
    five minutes"). The members and their behaviour are StreamletContext's, documented there.

    - `spark`: the SparkSession; `name`: the instance name in the blueprint; `app_id`: the
      application's id; `log`: the logger `streamlets.<name>`.
    - `config`: typed config-parameter values (StreamletConfig; ConfigError for a bad value).
    - `trigger`: the Trigger the queries start with; `queries`: the queries started so far.
    """

    spark: SparkSession
    name: str
    app_id: str
    config: StreamletConfig
    log: logging.Logger
    queries: list[StreamingQuery]

    @property
    def trigger(self) -> Trigger:
        """The streamlet's trigger: the run config's (streamlets.<name>.trigger), else the class's."""
        ...

    def topic(self, port: Port | str) -> str:
        """The Kafka topic bound to `port` (a port or its name); KeyError if it is unbound."""
        ...

    def checkpoint_location(self, query: str) -> str:
        """`<checkpoint root>/<query>`: Spark's checkpointLocation for query `query`."""
        ...

    def mounted_path(self, mount: VolumeMount | str) -> Path:
        """The local folder of a volume mount; KeyError if the streamlet declares no such mount."""
        ...

    def read_stream(self, inlet: AvroInlet) -> DataFrame:
        """A streaming DataFrame of the inlet's records, one column per Avro field in schema order."""
        ...

    def initial_state(self, query_name: str, operator_id: int = 0) -> DataFrame | None:
        """The imported state of query `query_name` as a streaming DataFrame, or None if none is set."""
        ...

    def write_stream(self, df: DataFrame, outlet: AvroOutlet, *, query_name: str | None = None,
                     output_mode: str | None = None) -> StreamingQuery:
        """Start a query writing `df` to the outlet's topic as Avro, with its own checkpoint."""
        ...

    def start_query(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        """Start any query with the streamlet's checkpoint, trigger and query name `<streamlet>.<query_name>`."""
        ...
