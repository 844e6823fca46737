"""Which outlets are exactly-once (streamlets.runtime.exactly_once.delivery_for) and the names
the transactional writer uses; the Kafka behaviour is in tests/integration/test_exactly_once.py."""

from streamlets.runtime.exactly_once import (AT_LEAST_ONCE, EXACTLY_ONCE, TransactionalBatchWriter, delivery_for,
                                             ledger_topic, transactional_id)
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
    w = TransactionalBatchWriter("k:9092", "shop.t", app_id="shop", streamlet="enrich", query="out",
                                 kafka_options={"kafka.security.protocol": "SSL", "kafka.isolation.level": "x",
                                                "failOnDataLoss": "true"})
    assert (w.transactional_id, w.ledger) == ("shop.enrich.out", "shop.outlet-batches")
    assert w.options == {"security.protocol": "SSL"}  # librdkafka settings only


def test_fingerprint_is_the_offset_log_entry(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "7").write_text('v1\n{"batchTimestampMs":1}\n{"t":{"0":5}}\n')
    w = TransactionalBatchWriter("k:9092", "t", app_id="a", streamlet="s", query="q", checkpoint=str(tmp_path))
    first = w.fingerprint(7)
    assert len(first) == 16 and first == w.fingerprint(7)
    (tmp_path / "offsets" / "7").write_text('v1\n{"batchTimestampMs":2}\n{"t":{"0":5}}\n')
    assert w.fingerprint(7) != first
    assert TransactionalBatchWriter("k:9092", "t", app_id="a", streamlet="s", query="q").fingerprint(7) == ""
