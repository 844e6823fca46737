"""The operations API of a real sandbox, tested from its own OpenAPI document (schemathesis) while
the numbers application runs (issue 32).

A savepoint of every streamlet is taken in the run's first moments, before any input exists (so
at least one query has committed no batch); the API and the web view answer 200 after it. Then
input arrives and schemathesis sends requests generated from /openapi.json to every operation,
valid and invalid ones, half of them at the running application's real path: no 5xx, every
response conforming to the document (status, content type, schema, headers; invalid input refused;
undocumented methods 405). Afterwards the application's output equals the batch computation.

Cost: STREAMLETS_SCHEMATHESIS_EXAMPLES examples per operation and generation mode (default 25)."""

from __future__ import annotations

import collections
import json
import os
import signal
import urllib.request

import pytest

from support.sandbox import NUMBERS, read_jsonl, start_blueprint, wait_for_ui, write_numbers
from support.waiting import wait_until

BLUEPRINT = str(NUMBERS / "blueprint.yaml")
EXAMPLES = int(os.environ.get("STREAMLETS_SCHEMATHESIS_EXAMPLES", "25"))


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read()


def _post(url: str, body: dict) -> tuple[int, list]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, json.load(r)


def test_operations_api_conforms_to_its_openapi_document_on_a_running_sandbox(tmp_path):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode, checks

    conf = tmp_path / "run.conf"
    conf.write_text('streamlets {\n  ingress.volume-mounts.source = "src"\n  files.volume-mounts.output = "out"\n}\n')
    (tmp_path / "src").mkdir()
    state = tmp_path / "state"
    log = tmp_path / "sandbox.log"
    proc = start_blueprint("run", BLUEPRINT, "--config", str(conf), "--state-dir", str(state), "--ui", "0", log=log,
                           cwd=tmp_path)
    try:
        base = wait_for_ui(proc, state, log)
        api = f"{base}/api/v1/namespaces/local/applications/numbers"

        # 1. a savepoint of every streamlet before any input: queries without a committed batch
        status, results = _post(api + "/savepoints", {"reason": "first second"})
        assert status == 200 and {r["streamlet"] for r in results} == {"ingress", "multiply", "files"}, results
        assert all(r["status"] == "ok" for r in results), results
        assert any("no batch committed yet" in r["message"] for r in results), results
        status, body = _get(api + "/savepoints")
        assert status == 200
        saved = json.loads(body)
        assert len(saved) == 3 and any(None in s["batch_ids"].values() for s in saved), saved
        status, page = _get(f"{base}/ui/namespaces/local/applications/numbers")
        assert status == 200 and page.count(b"first second") == 3

        # 2. input arrives; schemathesis runs against the document the server serves
        records = write_numbers(tmp_path / "src", files=2, per_file=50)
        schema = schemathesis.openapi.from_url(base + "/openapi.json")
        seen: collections.Counter = collections.Counter()
        failures: list[str] = []
        selected = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
                    checks.response_schema_conformance, checks.response_headers_conformance,
                    checks.negative_data_rejection, checks.unsupported_method]
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                @given(case=operation.as_strategy(generation_mode=mode), real=st.booleans())
                @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                          phases=[Phase.explicit, Phase.generate])
                def call(case, real):
                    if real and case.path_parameters:
                        case.path_parameters = {**case.path_parameters, "namespace": "local", "name": "numbers"}
                    response = case.call(base_url=base)
                    seen[(operation.label, response.status_code)] += 1
                    try:
                        case.validate_response(response, checks=selected)
                    except Exception as e:  # all of them, reported together below
                        failures.append(f"{operation.label} -> {response.status_code}: {str(e)[:1500]}")

                try:
                    call()
                except Unsatisfiable:  # no invalid input exists for an operation without parameters
                    pass
        statuses = collections.Counter()
        for (_, code), n in seen.items():
            statuses[code] += n
        print(f"schemathesis: {sum(seen.values())} requests, statuses {dict(sorted(statuses.items()))}")
        for (label, code), n in sorted(seen.items()):
            print(f"  {label}: {code} x{n}")
        assert not failures, "\n\n".join(failures[:5])
        assert not any(code >= 500 for code in statuses), statuses
        assert statuses[200] > 0 and any(400 <= code < 500 for code in statuses), statuses

        # 3. the application still computes what the batch computation does; the API and the view still answer
        wait_until(lambda: len(read_jsonl(tmp_path / "out")) >= len(records), timeout=300, what="every record written")
        out = read_jsonl(tmp_path / "out")
        assert sorted((r["id"], r["value"]) for r in out) == sorted((r["id"], r["value"] * 2) for r in records)
        assert _get(api + "/savepoints")[0] == 200 and _get(f"{base}/ui/namespaces/local/applications/numbers")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in log.read_text()
