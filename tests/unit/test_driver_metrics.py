"""The driver's Prometheus endpoint without Spark: the port setting ($STREAMLETS_METRICS_PORT),
/metrics served for a runtime, a port in use costing one warning line, and the driver's
session keeping Spark's UI (where Spark's own metrics are served). The same over a real
micro-batch: tests/integration/test_driver_metrics.py."""

import logging
import socket
import urllib.request
from types import SimpleNamespace

import pytest

from streamlets import driver
from streamlets.runtime.monitor import QueryStats
from streamlets.runtime.runconfig import METRICS_PORT, METRICS_PORT_ENV, StreamletRunConfig, metrics_port
from support.ports import free_port


def fake_runtime() -> SimpleNamespace:
    """What the collector reads of a StreamletRuntime: one streamlet with one running query."""
    stats = QueryStats("enrich", "joined", batches=2, input_rows=7, output_rows=5, batch_duration_ms=1500, busy_seconds=2.25)
    return SimpleNamespace(monitor=SimpleNamespace(stats={"enrich.joined": stats}),
                           queries=lambda: [SimpleNamespace(name="enrich.joined", isActive=True)],
                           contexts={"enrich": None}, restarts={"enrich": 1},
                           quarantine=SimpleNamespace(counts={}))


RUN = StreamletRunConfig(app_id="flights", streamlet="enrich", class_name="m.C", checkpoint_root="/tmp/cp")


@pytest.mark.parametrize("value, port", [(None, METRICS_PORT), ("", METRICS_PORT), ("9100", 9100), (" 9100 ", 9100),
                                         ("0", None), ("off", None), ("OFF", None)])
def test_metrics_port_setting(value, port):
    assert metrics_port({} if value is None else {METRICS_PORT_ENV: value}) == port


@pytest.mark.parametrize("value", ["abc", "-1", "65536", "9464.0"])
def test_a_bad_metrics_port_is_refused(value):
    with pytest.raises(ValueError, match=METRICS_PORT_ENV):
        metrics_port({METRICS_PORT_ENV: value})


def test_the_runtime_is_served_at_metrics():
    port = free_port()
    server = driver.serve_metrics(fake_runtime(), RUN, {METRICS_PORT_ENV: str(port)})
    assert server is not None
    try:
        assert server.server_address[0] == "0.0.0.0"  # reachable from outside the pod
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'streamlets_records_in_total{app="flights",query="joined",streamlet="enrich"} 7.0' in text
    assert 'streamlets_batch_duration_seconds{app="flights",query="joined",streamlet="enrich"} 1.5' in text
    assert 'streamlets_busy_seconds_total{app="flights",query="joined",streamlet="enrich"} 2.25' in text
    assert 'streamlets_restarts_total{app="flights",streamlet="enrich"} 1.0' in text
    assert 'streamlets_query_up{app="flights",query="joined",streamlet="enrich"} 1.0' in text


@pytest.mark.parametrize("setting", ["in use", "bad"])
def test_a_metrics_failure_is_one_warning_and_no_endpoint(setting, caplog):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        value = str(taken.getsockname()[1]) if setting == "in use" else "nine"
        with caplog.at_level(logging.WARNING, logger="streamlets.runner"):
            assert driver.serve_metrics(fake_runtime(), RUN, {METRICS_PORT_ENV: value}) is None
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.getMessage().startswith("metrics: not served: ") and "\n" not in record.getMessage()


def test_off_serves_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="streamlets.runner"):
        assert driver.serve_metrics(fake_runtime(), RUN, {METRICS_PORT_ENV: "off"}) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_driver_session_keeps_sparks_ui(tmp_path, monkeypatch):
    """The session defaults turn the UI off (sandbox, test kit); the driver turns it on, unless the
    streamlet's own sparkConf says otherwise: Spark's PrometheusServlet lives on the UI's port."""
    seen = []

    class Stop(Exception):
        pass

    def session(name, conf):
        seen.append(conf)
        raise Stop

    monkeypatch.setattr(driver, "build_spark_session", session)
    config = tmp_path / "run.json"
    for spark_conf, ui in [({}, "true"), ({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}, "false")]:
        config.write_text(RUN.model_copy(update={"spark_conf": spark_conf}).model_dump_json())
        with pytest.raises(Stop):
            driver.main(["--config", str(config)])
        assert seen[-1]["spark.ui.enabled"] == ui
    assert seen[-1]["spark.sql.shuffle.partitions"] == "8"
