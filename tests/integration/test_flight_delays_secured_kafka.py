"""flight-delays through `blueprint run` against a secured Kafka broker (issue 29): SASL_SSL with
SCRAM-SHA-512, and mutual TLS, each equal to the batch computation; a wrong password and an
untrusted broker certificate stop the run before anything starts, with one line naming the
broker and the cause, and a re-run with the right secret finishes equal to the batch computation.
No secret value in the state folder or the output.

Lean on CI time: a tenth of January's flights (prepare's `every`); one external SASL_SSL broker
for the failures and the good run, the sandbox's own broker secured with mTLS for the other.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.sandbox import REPO, flight_delays_run_config, run_blueprint

from blueprint.sandbox.certs import make_ca, make_cert
from blueprint.sandbox.kafka_broker import KafkaBroker
from streamlets.kafka_security import ConnectionCheckError, KafkaConnection

APP = REPO / "examples" / "flight-delays"
BLUEPRINT = str(APP / "blueprint.yaml")
sys.path.insert(0, str(APP))

from flight_delays.prepare import prepare  # noqa: E402
from flight_delays.reference import reference_stats  # noqa: E402
from flight_delays.results import differences, load_results  # noqa: E402

MONTHS, EVERY = [1], 30


@pytest.fixture(scope="module")
def expected():
    return reference_stats(MONTHS, EVERY)


def _config(tmp: Path, security: dict[str, str]) -> Path:
    """flight-delays' run config with `kafka.security.<key> = value` lines."""
    conf = flight_delays_run_config(tmp)
    conf.write_text(conf.read_text() + "".join(f'kafka.security.{k} = "{v}"\n' for k, v in security.items()))
    return conf


def _run(tmp: Path, *args: str):
    return run_blueprint("run", BLUEPRINT, "--config", str(tmp / "run.conf"), "--state-dir", str(tmp / "state"),
                         "--exit-when-done", "--idle-seconds", "3", *args, timeout=900)


def _files_holding(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_sasl_ssl_scram_wrong_password_untrusted_ca_then_right_secret(tmp_path, expected):
    prepare(tmp_path / "data", MONTHS, every=EVERY)
    with KafkaBroker(tmp_path / "kafka", security="sasl-ssl") as broker:
        good = broker.client_security()
        password = Path(good.password_file).read_text()
        settings = {"protocol": "SASL_SSL", "ca-file": good.ca_file, "sasl-mechanism": "SCRAM-SHA-512",
                    "username": good.username}
        (tmp_path / "wrong.password").write_text("not-the-password\n")
        other_ca = make_ca(tmp_path / "other-ca", "another CA")
        failures = {
            "wrong password": ({**settings, "password-file": str(tmp_path / "wrong.password")},
                               "Authentication failed"),
            "untrusted certificate": ({**settings, "ca-file": str(other_ca.cert), "password-file": good.password_file},
                                      "certificate verify failed"),
        }
        for case, (security, cause) in failures.items():
            _config(tmp_path, security)
            result = _run(tmp_path, "--kafka", broker.bootstrap_servers)
            assert result.returncode != 0, case
            errors = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(errors) == 1 and errors[0].startswith("error: "), (case, result.stderr[-3000:])
            assert broker.bootstrap_servers in errors[0] and cause in errors[0], (case, errors[0])
            assert "Traceback" not in result.stdout + result.stderr
            # nothing started half-way: no topic, no checkpoint, no output
            assert not (tmp_path / "state" / "checkpoints").exists(), case
            assert not list((tmp_path / "output").rglob("*.jsonl")), case
        from confluent_kafka.admin import AdminClient

        topics = AdminClient(broker.connection().librdkafka()).list_topics(timeout=10).topics
        assert not [t for t in topics if t.startswith("flight-delays.")]
        # the broker's SCRAM user has SCRAM-SHA-256 credentials too
        KafkaConnection(bootstrap_servers=broker.bootstrap_servers,
                        security=good.model_copy(update={"sasl_mechanism": "SCRAM-SHA-256"})).check()

        # the password from an environment variable this time (the file way is the unit tests')
        _config(tmp_path, {**settings, "password-env": "FLIGHTS_KAFKA_PASSWORD"})
        import os

        os.environ["FLIGHTS_KAFKA_PASSWORD"] = password
        try:
            result = _run(tmp_path, "--kafka", broker.bootstrap_servers)
            # `blueprint topic tail` reaches the same broker with the same settings
            tail = run_blueprint("topic", "tail", BLUEPRINT, "flight-events", "-n", "5", "--kafka",
                                 broker.bootstrap_servers, "--config", str(tmp_path / "run.conf"))
        finally:
            del os.environ["FLIGHTS_KAFKA_PASSWORD"]
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "SASL_SSL, SCRAM-SHA-512 as user sandbox" in result.stdout
        # the newest offsets of each partition (a transaction's marker among them), decoded
        assert tail.returncode == 0 and tail.stdout.count('"value": {') >= 3, tail.stdout + tail.stderr
        assert password not in tail.stdout + tail.stderr
    actual = load_results(tmp_path / "output")
    assert not actual.empty and differences(actual, expected) == [] and len(actual) == len(expected)
    assert password not in result.stdout + result.stderr
    assert _files_holding(tmp_path / "state", password) == []


def test_mutual_tls_embedded_broker(tmp_path, expected):
    prepare(tmp_path / "data", MONTHS, every=EVERY)
    flight_delays_run_config(tmp_path)
    result = _run(tmp_path, "--broker-security", "mtls")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "mtls" in result.stdout
    actual = load_results(tmp_path / "output")
    assert not actual.empty and differences(actual, expected) == [] and len(actual) == len(expected)
    tls = tmp_path / "state" / "kafka" / "tls"
    assert (tls / "ca.pem").is_file() and (tls / "client.key").stat().st_mode & 0o077 == 0
    key = (tls / "client.key").read_text().strip().splitlines()[1]  # a line of the private key
    elsewhere = [f for f in _files_holding(tmp_path / "state", key) if Path(f).parent != tls]
    assert elsewhere == [] and key not in result.stdout + result.stderr

    # the same broker again: its certificates are kept, and a client certificate of another CA is refused
    ca = (tls / "ca.pem").read_bytes()
    with KafkaBroker(tmp_path / "state" / "kafka", security="mtls") as broker:
        assert (tls / "ca.pem").read_bytes() == ca
        broker.connection().check()
        other_ca = make_ca(tmp_path / "other-ca", "another CA")
        stranger = make_cert(tmp_path / "other-ca", "client", other_ca, common_name="stranger")
        refused = broker.client_security().model_copy(update={"cert_file": str(stranger.cert),
                                                              "key_file": str(stranger.key)})
        with pytest.raises(ConnectionCheckError, match=rf"{broker.bootstrap_servers} .*certificate"):
            KafkaConnection(bootstrap_servers=broker.bootstrap_servers, security=refused).check()
