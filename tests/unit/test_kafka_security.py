"""streamlets.kafka_security: the model's rules, and its rendering for librdkafka and Java."""

import pytest
from pydantic import ValidationError

from streamlets.kafka_logging import client_config
from streamlets.kafka_security import KafkaConnection, KafkaSecurity, KafkaSecurityError

SECRET = "s3cr\"et\\pw"


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "pw"
    path.write_text(SECRET + "\n")
    return str(path)


def test_plaintext_renders_nothing():
    assert KafkaSecurity().librdkafka() == {} and KafkaSecurity().java("kafka.") == {}
    assert client_config({"bootstrap.servers": KafkaConnection.of("h:1")})["bootstrap.servers"] == "h:1"


def test_sasl_ssl_scram(password_file):
    sec = KafkaSecurity(protocol="SASL_SSL", ca_file="/ca.pem", sasl_mechanism="SCRAM-SHA-512", username="app",
                        password_file=password_file)
    assert sec.librdkafka() == {"security.protocol": "SASL_SSL", "ssl.endpoint.identification.algorithm": "https",
                                "ssl.ca.location": "/ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.username": "app", "sasl.password": SECRET}
    java = sec.java("kafka.")
    assert java["kafka.security.protocol"] == "SASL_SSL"
    assert java["kafka.ssl.truststore.type"] == "PEM" and java["kafka.ssl.truststore.location"] == "/ca.pem"
    assert java["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                              'username="app" password="s3cr\\"et\\\\pw";')
    # the model holds where the secret is, never the secret
    assert SECRET not in repr(sec) and SECRET not in sec.model_dump_json()
    conf = client_config({"bootstrap.servers": KafkaConnection(bootstrap_servers="h:1", security=sec)})
    assert conf["bootstrap.servers"] == "h:1" and conf["sasl.password"] == SECRET


def test_plain_from_env(monkeypatch):
    monkeypatch.setenv("KAFKA_PW", "pw")
    sec = KafkaSecurity.from_config({"protocol": "SASL_PLAINTEXT", "sasl-mechanism": "PLAIN", "username": "u",
                                     "password-env": "KAFKA_PW"})
    assert sec.librdkafka()["sasl.password"] == "pw"
    assert sec.java()["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    monkeypatch.delenv("KAFKA_PW")
    with pytest.raises(KafkaSecurityError, match="password-env: the environment variable KAFKA_PW is not set"):
        sec.librdkafka()


def test_mutual_tls(tmp_path):
    (tmp_path / "c.pem").write_text("CERT")
    (tmp_path / "c.key").write_text("KEY")
    sec = KafkaSecurity(protocol="SSL", cert_file=str(tmp_path / "c.pem"), key_file=str(tmp_path / "c.key"),
                        verify_hostname=False)
    assert sec.librdkafka() == {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none",
                                "ssl.certificate.location": str(tmp_path / "c.pem"),
                                "ssl.key.location": str(tmp_path / "c.key")}
    assert sec.java() == {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "",
                          "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CERT", "ssl.keystore.key": "KEY"}


def test_missing_secret_file_names_the_setting(tmp_path):
    sec = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN", username="u", password_file=str(tmp_path / "no"))
    with pytest.raises(KafkaSecurityError, match=r"kafka.security.password-file: cannot read .*/no"):
        sec.java()


@pytest.mark.parametrize("fields, message", [
    ({"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "u"}, "needs sasl-mechanism, username and password"),
    ({"protocol": "SSL", "username": "u"}, "need protocol SASL_SSL or SASL_PLAINTEXT"),
    ({"protocol": "SSL", "cert_file": "c"}, "cert-file and key-file go together"),
    ({"protocol": "PLAINTEXT", "ca_file": "c"}, "ca-file need protocol SSL or SASL_SSL"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "u", "password_file": "f", "password_env": "E"},
     "not both"),
    ({"protocol": "TLS"}, "protocol"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "username": "u", "password_env": "E"}, "sasl_mechanism"),
])
def test_inconsistent_settings_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        KafkaSecurity(**fields)


def test_unknown_config_key():
    with pytest.raises(KeyError):
        KafkaSecurity.from_config({"truststore": "x"})


def test_run_config_keys(tmp_path):
    """kafka.security.* of a run config: files relative to its folder, checked together."""
    from blueprint.configcheck import check_kafka_security, config_entries, kafka_security

    conf = tmp_path / "run.conf"
    conf.write_text('kafka.security { protocol = SASL_SSL, ca-file = "certs/ca.pem", sasl-mechanism = SCRAM-SHA-512\n'
                    '  username = app, password-env = PW }\n'
                    'kafka.embedded-broker.security = mtls\n')
    entries, problems = config_entries([conf], [])
    assert problems == []
    sec = kafka_security(entries)
    assert sec.ca_file == str(tmp_path / "certs" / "ca.pem") and sec.password_env == "PW"
    assert check_kafka_security(entries) == []
    entries, _ = config_entries([conf], ["kafka.security.protocol=SSL"])
    [problem] = check_kafka_security(entries)
    assert problem.file == "command line" and "need protocol SASL_SSL or SASL_PLAINTEXT" in problem.message
    entries, _ = config_entries([conf], ["kafka.security.protocol=TLS"])
    [problem] = check_kafka_security(entries)
    assert problem.message.startswith("kafka.security.protocol: Input should be")


def test_runtime_clients_carry_the_security(password_file):
    """Spark's options (kafka.-prefixed Java names), the exactly-once sink's among them, come from
    the run config's kafka_security."""
    from streamlets.runtime.exactly_once import sink_options
    from streamlets.runtime.runconfig import StreamletRunConfig
    from streamlets.runtime.runner import transport_for

    sec = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", username="app", password_file=password_file)
    run = StreamletRunConfig(app_id="a", streamlet="s", class_name="m.C", checkpoint_root="/tmp/c",
                             bootstrap_servers="h:1", kafka_security=sec, kafka_options={"kafka.client.id": "x"})
    assert SECRET not in run.model_dump_json()
    assert StreamletRunConfig.model_validate_json(run.model_dump_json()).kafka() == run.kafka()
    transport = transport_for(run)
    options = transport._client_options()
    assert options["kafka.bootstrap.servers"] == "h:1" and options["kafka.security.protocol"] == "SASL_SSL"
    assert SECRET.replace("\\", "\\\\").replace('"', '\\"') in options["kafka.sasl.jaas.config"]
    assert options["kafka.client.id"] == "x"
    sink = sink_options(transport, app_id="a", streamlet="s", query="q", topic="t", checkpoint="/tmp/c/q")
    assert {k: v for k, v in sink.items() if k.startswith("kafka.")} == options
