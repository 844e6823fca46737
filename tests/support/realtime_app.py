"""Small streamlets on the session broker and their run configs (tests/integration's Real-Time
Mode and progress-tracking tests): records ``R`` = (k: string, v: long)."""

from __future__ import annotations

from pyspark.sql import functions as F

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.trigger import Trigger

APP = "rt-it"
R = {"type": "record", "name": "R", "namespace": "test.rt", "fields": [{"name": "k", "type": "string"},
                                                                       {"name": "v", "type": "long"}]}
TIMEOUT = 180  # seconds these tests wait for records to arrive, unless they say otherwise


class Counts(Streamlet):
    """Stateful: a running count per key."""

    inlet = AvroInlet("in", R)
    out = AvroOutlet("out", R)
    trigger = Trigger.real_time("2 seconds")

    def create_logic(self, ctx):
        counts = ctx.read_stream(self.inlet).groupBy("k").agg(F.count("*").alias("v"))
        ctx.write_stream(counts, self.out, output_mode="update")


class Passthrough(Streamlet):
    inlet = AvroInlet("in", R)
    out = AvroOutlet("out", R)

    def create_logic(self, ctx):
        ctx.write_stream(ctx.read_stream(self.inlet), self.out)


def run_config(kafka_broker, tmp_path, name, cls, topic_map, dl=None, **kw) -> StreamletRunConfig:
    """Streamlet `name` of app APP running `cls` on the session broker, its checkpoints under
    `tmp_path/name`, `topic_map` port -> topic, `dl` its dead-letter topic; `kw` more fields."""
    return StreamletRunConfig(app_id=APP, streamlet=name, class_name=cls.class_name(), topics=topic_map,
                              bootstrap_servers=kafka_broker.bootstrap_servers, checkpoint_root=str(tmp_path / name),
                              dead_letter_topic=dl, **kw)
