"""Which outlets are exactly-once (streamlets.runtime.exactly_once.delivery_for) and the names
and options of the streamlets-kafka-eos sink; the Kafka behaviour is in
tests/integration/test_exactly_once.py and test_eos_executor_writes.py."""

from streamlets.kafka_security import KafkaSecurity
from streamlets.runtime.exactly_once import (AT_LEAST_ONCE, EXACTLY_ONCE, delivery_for, ledger_topic, sink_options,
                                             transactional_id)
from streamlets.runtime.runconfig import StreamletRunConfig
from streamlets.runtime.transport import FileTransport, KafkaTransport


def test_exactly_once_is_the_default_on_kafka(tmp_path):
    kafka = KafkaTransport("localhost:9092")
    assert StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/c").delivery == EXACTLY_ONCE
    assert delivery_for(EXACTLY_ONCE, kafka) == EXACTLY_ONCE
    assert delivery_for(None, kafka) == EXACTLY_ONCE
    assert delivery_for(AT_LEAST_ONCE, kafka) == AT_LEAST_ONCE
    assert delivery_for(EXACTLY_ONCE, kafka, dry_run=True) == AT_LEAST_ONCE  # the noop sink writes nothing
    assert delivery_for(EXACTLY_ONCE, FileTransport(tmp_path)) == AT_LEAST_ONCE  # test kit: one file per batch id


def test_names_and_passed_options(tmp_path):
    assert transactional_id("shop", "enrich", "out") == "shop.enrich.out"
    assert ledger_topic("shop") == "shop.outlet-batches"
    transport = KafkaTransport("k:9092", {"kafka.isolation.level": "read_committed", "failOnDataLoss": "true"},
                               KafkaSecurity(protocol="SSL"))
    options = sink_options(transport, app_id="shop", streamlet="enrich", query="out", topic="shop.t",
                           checkpoint=str(tmp_path / "cp"))
    assert options == {"kafka.bootstrap.servers": "k:9092", "kafka.security.protocol": "SSL",
                       "kafka.ssl.endpoint.identification.algorithm": "https",
                       "kafka.isolation.level": "read_committed",  # the sink leaves consumer-only settings out
                       "topic": "shop.t", "transactional.id.prefix": "shop.enrich.out",
                       "ledger.topic": "shop.outlet-batches", "checkpoint": str(tmp_path / "cp")}
