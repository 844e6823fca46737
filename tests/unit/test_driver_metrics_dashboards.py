"""What the chart ships for the driver's metrics: the Grafana dashboard
(charts/streamlets-operator/dashboards/streamlets.json) and the Prometheus rules
(alerts/streamlets-rules.yaml). Every metric they query is one streamlets.runtime.metrics
serves (its table); the rules pass `promtool check rules`, and `promtool test rules` shows each
alert firing on made-up series (skipped without promtool: Debian's `prometheus` package has it).
The chart's templates around them: tests/unit/test_chart.py."""

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from streamlets.runtime import metrics

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamlets-operator"
DASHBOARD = CHART / "dashboards" / "streamlets.json"
RULES = CHART / "alerts" / "streamlets-rules.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="no promtool (apt-get install prometheus)")

# metric names of the module's table: `| streamlets_... | type | unit | source |`
SERVED = set(re.findall(r"^\| (streamlets_\w+) \|", metrics.__doc__ or "", re.M))
QUERIED = re.compile(r"\bstreamlets_\w+")


def dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_the_metrics_table_is_read():
    assert {"streamlets_records_in_total", "streamlets_consumer_lag_records", "streamlets_query_up"} <= SERVED
    assert len(SERVED) >= 18


def test_dashboard_queries_served_metrics():
    board = json.loads(DASHBOARD.read_text())
    exprs = dashboard_exprs()
    queried = {m for e in exprs for m in QUERIED.findall(e)}
    assert queried <= SERVED, queried - SERVED
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"datasource", "app"} <= set(variables)
    assert QUERIED.findall(variables["app"]["query"]["query"])[0] in SERVED
    assert all('app=~"$app"' in e for e in exprs)
    # the panels the README promises
    wanted = ["rate(streamlets_records_in_total", "rate(streamlets_records_out_total",
              "sum by (app, streamlet, inlet, topic) (streamlets_consumer_lag_records",
              "streamlets_batch_duration_seconds", "streamlets_processing_delay_seconds",
              "time() - max by (app, streamlet, query) (streamlets_watermark_timestamp_seconds",
              "streamlets_state_rows", "streamlets_state_memory_bytes", "rate(streamlets_malformed_records_total",
              "streamlets_restarts_total"]
    for piece in wanted:
        assert any(piece in e for e in exprs), piece
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] == "streamlets"


def test_rules_query_served_metrics():
    by_name = {}
    for rule in rules():
        by_name.setdefault(rule["alert"], []).append(rule)
        queried = set(QUERIED.findall(rule["expr"]))
        assert queried and queried <= SERVED, (rule["alert"], queried - SERVED)
        assert rule["labels"]["severity"] in ("warning", "critical")
    assert set(by_name) == {"StreamletLagGrowing", "StreamletFailing", "DeadLettersAppearing"}


@needs_promtool
def test_promtool_checks_the_rules():
    result = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


# promtool's rule unit tests: series per minute, alerts expected at a time
ALERT_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # growing lag on one partition, shrinking on another streamlet's
      - series: streamlets_consumer_lag_records{{app="fd",streamlet="enrich",inlet="in",topic="t",partition="0"}}
        values: 0+10x40
      - series: streamlets_consumer_lag_records{{app="fd",streamlet="stats",inlet="in",topic="u",partition="0"}}
        values: 400-10x40
      - series: streamlets_query_up{{app="fd",streamlet="enrich",query="joined"}}
        values: 1x10 0x30
      - series: streamlets_restarts_total{{app="fd",streamlet="stats"}}
        values: 0x20 1x20
      - series: streamlets_malformed_records_total{{app="fd",streamlet="flights"}}
        values: 0x20 3x20
      - series: streamlets_quarantined_records_total{{app="fd",streamlet="flights"}}
        values: 0x40
    alert_rule_test:
      - eval_time: 5m
        alertname: StreamletLagGrowing
        exp_alerts: []
      - eval_time: 30m
        alertname: StreamletLagGrowing
        exp_alerts:
          - exp_labels: {{severity: warning, app: fd, streamlet: enrich, inlet: in, topic: t}}
            exp_annotations:
              summary: Streamlet fd/enrich falls behind on t
              description: Inlet in of streamlet enrich (application fd) is 300 records behind topic t, and the lag has grown for 10 minutes.
      - eval_time: 12m
        alertname: StreamletFailing
        exp_alerts: []
      - eval_time: 18m
        alertname: StreamletFailing
        exp_alerts:
          - exp_labels: {{severity: critical, reason: query-down, app: fd, streamlet: enrich, query: joined}}
            exp_annotations: &down
              summary: Query joined of streamlet fd/enrich is down
              description: Query joined of streamlet enrich (application fd) has not been running for 5 minutes.
      - eval_time: 25m
        alertname: StreamletFailing
        exp_alerts:
          - exp_labels: {{severity: critical, reason: query-down, app: fd, streamlet: enrich, query: joined}}
            exp_annotations: *down
          - exp_labels: {{severity: warning, reason: restarts, app: fd, streamlet: stats}}
            exp_annotations:
              summary: Streamlet fd/stats restarted
              description: >-
                Streamlet stats (application fd) was restarted by its runtime (failed queries,
                quarantined poison records): 1 restart(s) in 15 minutes.
      - eval_time: 22m
        alertname: DeadLettersAppearing
        exp_alerts:
          - exp_labels: {{severity: warning, reason: malformed, app: fd, streamlet: flights}}
            exp_annotations:
              summary: Streamlet fd/flights sends records to the dead-letter topic
              description: 3 inlet values of streamlet flights (application fd) did not decode in 5 minutes and went to the dead-letter topic.
      - eval_time: 35m
        alertname: DeadLettersAppearing
        exp_alerts: []
"""


@needs_promtool
def test_alerts_fire_on_their_conditions(tmp_path):
    tests = tmp_path / "alerts-test.yaml"
    tests.write_text(textwrap.dedent(ALERT_TESTS).format(rules=json.dumps(str(RULES))))
    result = subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
