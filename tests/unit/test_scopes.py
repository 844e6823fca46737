"""blueprint.scopes: what a dotted settings key addresses (the config check, build, the sandbox's
run config and `kubectl streamlets configure` all read keys through it)."""

from blueprint.scopes import KAFKA, RUNTIMES, STREAMLETS, TOPICS, parse_scope, scope_of, spark_text


def test_streamlet_keys_keep_dots_in_their_item():
    s = scope_of("streamlets.stats.spark.spark.sql.shuffle.partitions")
    assert (s.top, s.owner, s.section, s.item) == (STREAMLETS, "stats", "spark", "spark.sql.shuffle.partitions")
    assert s.is_streamlet() and s.is_streamlet("spark") and not s.is_streamlet("config-parameters")
    assert scope_of("streamlets.stats.kubernetes.executor.instances").pod_setting() == ("executor", "instances")


def test_incomplete_keys_are_not_settings():
    for key in ("streamlets", "streamlets.stats", "streamlets.stats.spark"):
        assert not scope_of(key).is_streamlet(), key
    assert not parse_scope(()).complete and parse_scope(()).top == ""


def test_runtime_topic_and_kafka_keys():
    r = scope_of("runtimes.spark.kubernetes.driver.memory")
    assert r.top == RUNTIMES and r.is_runtime("kubernetes") and r.pod_setting() == ("driver", "memory")
    assert not scope_of("runtimes.flink.config.x").is_runtime("config")
    t = scope_of("topics.flights.config.retention.ms")
    assert (t.top, t.owner, t.section, t.item) == (TOPICS, "flights", "config", "retention.ms")
    assert scope_of("topics.flights.partitions").rest == ()
    k = scope_of("kafka.bootstrap-servers")
    assert (k.top, k.owner, k.section, k.rest) == (KAFKA, None, "bootstrap-servers", ())


def test_spark_text():
    assert [spark_text(v) for v in (True, False, 4, "2g")] == ["true", "false", "4", "2g"]
