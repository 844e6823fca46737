"""The operations server's contract without Spark or Kafka: routes, errors and their statuses,
authorization before every call, the OpenAPI document against the routes, figures from samples,
and the web view's graph. The real backends run in tests/integration/test_ops_sandbox.py (the
sandbox) and tests/k8s/test_operator_api.py (the operator on a real API server)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import jsonschema
import pytest

from blueprint.ops.backend import Forbidden, NotFound, Unauthorized
from blueprint.ops.figures import RateTracker, Sample, fill, parse_text
from blueprint.ops.model import (ApplicationSummary, ApplicationView, CommandRequest, CommandResultView, DeadLetterView,
                                 SavepointView, StreamletView, TopicView)
from blueprint.ops.openapi import document
from blueprint.ops.server import OpsServer, make_app
from blueprint.ops.view import _columns, application_page


def _flight_delays() -> ApplicationView:
    s = [StreamletView(name=n, class_name=f"fd.{n}", status="unknown") for n in ("flights", "weather", "enrich", "stats", "files")]
    t = [TopicView(id="flight-events", name="fd.flight-events", producers=["flights.out"], consumers=["enrich.flights"]),
         TopicView(id="weather-observations", name="fd.weather-observations", producers=["weather.out"], consumers=["enrich.weather"]),
         TopicView(id="enriched-flights", name="fd.enriched-flights", producers=["enrich.out"], consumers=["stats.in"]),
         TopicView(id="delay-stats", name="fd.delay-stats", producers=["stats.out"], consumers=["files.in"])]
    return ApplicationView(namespace="ns", name="fd", app_id="fd", phase="Running", ready="5/5", streamlets=s, topics=t,
                           dead_letter_topic="fd.dead-letters")


class Backend:
    """One application; tokens "reader" (get, list) and "writer" (also patch); calls recorded."""

    requires_token = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def authorize(self, token, verb, namespace, name):
        if token not in ("reader", "writer"):
            raise Unauthorized("no valid bearer token")
        if verb == "patch" and token != "writer":
            raise Forbidden(f"{token} cannot patch streamletapplications in namespace {namespace}")
        return token

    def _app(self, namespace, name):
        if (namespace, name) != ("ns", "fd"):
            raise NotFound(f"no application {namespace}/{name}")

    def applications(self, caller):
        self.calls.append(("applications", caller))
        return [ApplicationSummary(namespace="ns", name="fd", app_id="fd", phase="Running", ready="5/5")]

    def application(self, namespace, name):
        self._app(namespace, name)
        return _flight_delays()

    def dead_letters(self, namespace, name, limit):
        self._app(namespace, name)
        self.calls.append(("dead_letters", limit))
        return [DeadLetterView(streamlet="enrich", inlet="flights", topic="fd.flight-events", partition=0, offset=7,
                               timestamp=1.7e9, error="<script>x</script>", value_bytes=12)]

    def savepoints(self, namespace, name):
        self._app(namespace, name)
        return [SavepointView(streamlet="stats", name="sp-1", location="/sp/1", batch_ids={"out": 3}, time="2026-01-01T00:00:00Z")]

    def command(self, namespace, name, request: CommandRequest):
        self._app(namespace, name)
        self.calls.append(("command", request))
        return [CommandResultView(id="c1", command=request.command, streamlet=request.target or "stats", status="ok")]

    def metrics(self):
        return b"streamlets_operator_reconciles_total 1.0\n", "text/plain; version=0.0.4"


@pytest.fixture(scope="module")
def served():
    backend = Backend()
    server = OpsServer(backend).start()
    yield backend, server.url
    server.stop()


def _call(url: str, *, token: str | None = None, body: dict | None = None, method: str | None = None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


APP = "/api/v1/namespaces/ns/applications/fd"


def test_every_api_route_needs_a_token_and_the_verb(served):
    backend, url = served
    for path in ("/api/v1/applications", APP, APP + "/dead-letters", APP + "/savepoints"):
        status, body, _ = _call(url + path)
        assert status == 401 and json.loads(body)["status"] == 401, (path, body)
        assert _call(url + path, token="reader")[0] == 200
    status, body, _ = _call(url + APP + "/savepoints", token="reader", body={"streamlet": "stats"})
    assert status == 403 and "cannot patch" in json.loads(body)["error"]
    assert not [c for c in backend.calls if c[0] == "command"]  # refused before the backend acted


def test_a_savepoint_is_a_savepoint_command_with_its_reason(served):
    backend, url = served
    status, body, _ = _call(url + APP + "/savepoints", token="writer", body={"streamlet": "stats", "reason": "before upgrade"})
    assert status == 200
    assert json.loads(body)[0]["status"] == "ok"
    sent = [c[1] for c in backend.calls if c[0] == "command"][-1]
    assert (sent.command, sent.target, sent.args) == ("savepoint", "stats", {"reason": "before upgrade"})


def test_bad_input_is_one_clear_400_or_404(served):
    _, url = served
    status, body, _ = _call(url + APP + "/commands", token="writer", body={"target": "stats"})
    assert status == 400 and "command" in json.loads(body)["error"]
    status, body, _ = _call(url + APP + "/dead-letters?limit=many", token="reader")
    assert status == 400 and "limit" in json.loads(body)["error"]
    status, body, _ = _call(url + "/api/v1/namespaces/ns/applications/nope", token="reader")
    assert status == 404 and "ns/nope" in json.loads(body)["error"]


def test_every_api_error_is_json_whatever_its_status(served):
    """aiohttp's own answers under /api/ (no route, wrong method, body too large) are JSON
    {"error", "status"} as the backend's are, and match the document's ErrorBody."""
    _, url = served
    error_body = document()["components"]["schemas"]["ErrorBody"]
    cases = [(url + "/api/v1/nothing-here", None, None, 404, "no such path: /api/v1/nothing-here"),
             (url + APP + "/savepoints", None, "DELETE", 405, "method DELETE not allowed"),
             (url + APP, {}, "POST", 405, "(allowed: GET"),
             (url + APP + "/commands", {"command": "ping", "args": {"x": "y" * (1 << 20)}}, None, 413, "body size")]
    for target, body, method, code, text in cases:
        status, answer, headers = _call(target, token="writer", body=body, method=method)
        assert (status, headers.get("Content-Type", "").split(";")[0]) == (code, "application/json"), (target, answer)
        data = json.loads(answer)
        jsonschema.validate(data, error_body)
        assert data["status"] == code and text in data["error"], data
        if code == 405:
            assert "GET" in headers.get("Allow", ""), headers
    status, answer, headers = _call(url + "/no-such-page")  # the web view's pages stay HTML/plain
    assert status == 404 and not answer.startswith("{")


def test_limits_are_clamped_and_the_caller_reaches_the_list(served):
    backend, url = served
    _call(url + APP + "/dead-letters?limit=100000", token="reader")
    assert ("dead_letters", 500) in backend.calls
    _call(url + "/api/v1/applications", token="writer")
    assert ("applications", "writer") in backend.calls


def test_the_web_view_asks_to_sign_in_then_shows_the_application(served):
    _, url = served
    opener = urllib.request.build_opener(urllib.request.HTTPRedirectHandler())
    with opener.open(url + "/", timeout=10) as r:  # redirected to the sign-in form
        assert r.url.endswith("/login") and "Sign in" in r.read().decode()
    status, page, _ = _call(url + "/ui/namespaces/ns/applications/fd", token="reader")
    assert status == 200
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page  # a dead letter's error is escaped
    for name in ("flights", "weather", "enrich", "stats", "files"):
        assert f'data-streamlet="{name}"' in page
    assert 'data-topic="delay-stats"' in page and "sp-1" in page


def test_metrics_and_openapi_need_no_token(served):
    _, url = served
    status, body, headers = _call(url + "/metrics")
    assert status == 200 and "streamlets_operator_reconciles_total" in body and headers["Content-Type"].startswith("text/plain")
    status, body, _ = _call(url + "/openapi.json")
    assert status == 200 and json.loads(body)["openapi"].startswith("3.1")


def test_the_openapi_document_covers_every_api_route_and_resolves():
    doc = document()
    routes = {(r.method.lower(), r.resource.canonical) for r in make_app(Backend()).router.routes() if r.method != "HEAD"
              and r.resource is not None and (r.resource.canonical.startswith("/api/") or r.resource.canonical == "/metrics")}
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert routes == documented
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in doc["components"]["schemas"], ref
    # a real answer validates against its schema
    schema = {"$ref": "#/components/schemas/ApplicationView", "components": doc["components"]}
    jsonschema.validate(_flight_delays().model_dump(mode="json"), schema)


def test_figures_sum_per_streamlet_and_topic_and_take_the_status():
    text = "\n".join([
        'streamlets_records_in_total{app="fd",streamlet="enrich",query="out"} 29230',
        'streamlets_records_in_total{app="other",streamlet="enrich",query="out"} 5',
        'streamlets_processed_records_per_second{app="fd",streamlet="enrich",query="out"} 1500.5',
        'streamlets_query_up{app="fd",streamlet="enrich",query="out"} 1',
        'streamlets_query_up{app="fd",streamlet="stats",query="out"} 0',
        'streamlets_consumer_lag_records{app="fd",streamlet="enrich",inlet="flights",topic="fd.flight-events",partition="0"} 4',
        'streamlets_consumer_lag_records{app="fd",streamlet="enrich",inlet="flights",topic="fd.flight-events",partition="1"} 6',
        'streamlets_topic_end_offset{app="fd",topic="fd.flight-events",partition="0"} 100',
        'streamlets_topic_end_offset{app="fd",topic="fd.flight-events",partition="1"} 50',
        'streamlets_topic_end_offset{app="fd",topic="fd.flight-events",partition="1"} 40',  # another driver, earlier
        'streamlets_topic_end_offset{app="fd",topic="fd.dead-letters",partition="0"} 3',
    ]) + "\n"
    samples = parse_text(text)
    assert Sample("streamlets_records_in_total", {"app": "fd", "streamlet": "enrich", "query": "out"}, 29230.0) in samples
    rates = RateTracker()
    view = fill(_flight_delays(), samples, rates)
    enrich = next(s for s in view.streamlets if s.name == "enrich")
    assert (enrich.records_in, enrich.processed_rate, enrich.lag, enrich.status, enrich.queries) == (29230, 1500.5, 10, "running", 1)
    assert next(s for s in view.streamlets if s.name == "stats").status == "stopped"
    assert next(s for s in view.streamlets if s.name == "files").status == "unknown"  # nothing known
    events = next(t for t in view.topics if t.id == "flight-events")
    assert (events.end_offset, events.lag) == (150, {"enrich.flights": 10})
    assert view.dead_letters == 3


def test_rates_between_looks_over_a_window():
    r = RateTracker(window=10)
    assert r.rate(("t",), 0, now=0.0) is None  # one look: no rate yet
    assert r.rate(("t",), 100, now=1.0) == 100
    assert r.rate(("t",), 100, now=1.2) == pytest.approx(100 / 1.2)  # looks closer than a second still give a rate
    assert r.rate(("t",), 5, now=2.0) is None  # a reset starts over
    for t in range(3, 30):
        last = r.rate(("t",), 5 + 10 * (t - 2), now=float(t))
    assert last == pytest.approx(10)


def test_the_graph_flows_left_to_right_and_draws_every_part():
    app = _flight_delays()
    streamlet_col, topic_col = _columns(app)
    assert streamlet_col["flights"] == streamlet_col["weather"] < topic_col["flight-events"] < streamlet_col["enrich"]
    assert streamlet_col["enrich"] < topic_col["enriched-flights"] < streamlet_col["stats"] < topic_col["delay-stats"] < streamlet_col["files"]
    page = application_page(app, [], [])
    assert page.count('class="streamlet"') == 5 and page.count('class="topic"') == 4 and page.count("<line ") == 8
