"""streamlets.trigger: the text form of triggers, class declarations, config and rendering."""

import pytest

from streamlets import AvroInlet, AvroOutlet, Streamlet
from streamlets.errors import StreamletDefinitionError
from streamlets.trigger import Trigger, TriggerError, cores_refusal, duration_ms, sink_refusal

R = {"type": "record", "name": "R", "namespace": "t", "fields": [{"name": "a", "type": "int"}]}


@pytest.mark.parametrize("text, kind, interval", [
    ("micro-batch", "micro-batch", None),
    ("processing-time 1 second", "processing-time", "1 second"),
    ("real-time", "real-time", "5 minutes"),  # Spark's default checkpoint interval
    ("real-time 10 seconds", "real-time", "10 seconds"),
    ("  real-time 500ms ", "real-time", "500ms"),
])
def test_text_form_round_trips(text, kind, interval):
    t = Trigger.parse(text)
    assert (t.kind, t.interval) == (kind, interval)
    assert Trigger.parse(t.text()) == t


@pytest.mark.parametrize("text", ["", "realtime", "processing-time", "micro-batch 1 second", "real-time soon",
                                  "real-time 0 seconds", "real-time 5 fortnights"])
def test_bad_text_names_what_is_accepted(text):
    with pytest.raises(TriggerError) as e:
        Trigger.parse(text)
    assert "\n" not in str(e.value)


def test_durations_in_milliseconds():
    assert [duration_ms(t) for t in ("500 milliseconds", "5 seconds", "5s", "1 minute", "2m")] == \
        [500, 5000, 5000, 60_000, 120_000]


def test_class_declares_its_trigger_and_the_descriptor_carries_it():
    class Fast(Streamlet):
        inlet = AvroInlet("in", R)
        out = AvroOutlet("out", R)
        trigger = Trigger.real_time("2 seconds")

        def create_logic(self, ctx):
            pass

    class FromText(Streamlet):
        inlet = AvroInlet("in", R)
        trigger = "real-time"

        def create_logic(self, ctx):
            pass

    assert Fast.descriptor().trigger == "real-time 2 seconds"
    assert FromText.trigger == Trigger.real_time()
    assert Streamlet.descriptor().trigger is None


def test_a_bad_class_trigger_is_a_definition_problem():
    with pytest.raises(StreamletDefinitionError) as e:
        class Bad(Streamlet):
            trigger = "real-time whenever"

            def create_logic(self, ctx):
                pass
    assert [p.code for p in e.value.problems] == ["invalid-trigger"]


def test_refusal_lines():
    assert sink_refusal("kafka") is None and sink_refusal("foreach") is None
    assert "foreachBatch" in sink_refusal("foreachBatch")
    assert "parquet sink" in sink_refusal("parquet")
    assert cores_refusal(2, 2) is None
    assert "3 Kafka partitions but only 1 of 2 cores are free (1 held" in cores_refusal(3, 2, taken=1)
