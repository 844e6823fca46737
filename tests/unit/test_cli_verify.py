"""`blueprint verify`: exit codes 0/1/2, text and JSON reports, no tracebacks."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprint.cli import app
from blueprint.model import dns_label_from

FIXTURES = Path(__file__).parent / "fixtures" / "verify_app"
ROOT = Path(__file__).resolve().parents[2]
M = "verify_fixture_streamlets"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _fixture_modules_on_path(monkeypatch):
    monkeypatch.setattr(sys, "path", [str(FIXTURES), *sys.path])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "blueprint.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n").replace("M.", f"{M}."))
    return path


UNCONNECTED = """
    streamlets:
      ingress: M.Ingress
      printer: M.Printer
      lonely: M.Printer
    topics:
      t: {producers: [ingress.out], consumers: [printer.in]}
    """
WARNING_ONLY = """
    streamlets:
      ingress: M.Ingress
    """


def test_sound_blueprint_exits_0():
    result = runner.invoke(app, ["verify", str(FIXTURES / "blueprint.yaml")])
    assert result.exit_code == 0, result.output
    # delay-stats is read by nothing in the application: a warning, not an error
    assert result.output.strip().endswith("sound (3 streamlets, 2 topics) with 1 warning")
    assert "topic 'delay-stats' has producers but no consumers" in result.output


def test_unconnected_inlet_exits_1_and_names_the_inlet(tmp_path):
    path = write(tmp_path, UNCONNECTED)
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 1
    heading, first, summary = result.stdout.strip().splitlines()
    assert heading == "ports and connections:"
    assert first.startswith(f"  {path}:4:3: error: inlet `lonely.in` is not connected to a topic (hint: ")
    assert summary == f"{path}: not sound: 1 error"


def test_problems_are_grouped_with_errors_first(tmp_path):
    path = write(tmp_path, """
        streamlets:
          ingress: M.Ingress
          printer: M.Printer
          Bad_Name: M.Printer
        topics:
          t: {producers: [ingress.out]}
          u: {producers: [ingress.out], consumers: [printer.in]}
        """)
    lines = runner.invoke(app, ["verify", str(path)]).stdout.splitlines()
    headings = [line for line in lines if not line.startswith("  ")][:-1]
    assert headings == ["streamlet classes:", "ports and connections:", "topics:"]
    body = [line.split(": ")[1] for line in lines if line.startswith("  ")]
    assert body == ["error", "error", "error", "warning"]  # name; unconnected Bad_Name.in, ingress.out on 2 topics; t unread
    assert lines[-1].endswith("not sound: 3 errors, 1 warning")


def test_warnings_fail_only_with_strict(tmp_path):
    path = write(tmp_path, WARNING_ONLY)
    relaxed = runner.invoke(app, ["verify", str(path)])
    assert relaxed.exit_code == 0 and relaxed.stdout.strip().endswith("sound (1 streamlet, 0 topics) with 1 warning")
    assert runner.invoke(app, ["verify", str(path), "--strict"]).exit_code == 1


def test_json_report(tmp_path):
    path = write(tmp_path, UNCONNECTED)
    result = runner.invoke(app, ["verify", str(path), "--format", "json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["sound"], report["errors"], report["warnings"], report["app_id"]) == (False, 1, 0, dns_label_from(tmp_path.name))
    [problem] = report["problems"]
    assert problem["code"] == "unconnected-inlet" and (problem["line"], problem["column"]) == (4, 3)
    assert problem["group"] == "ports" and problem["severity"] == "error" and "lonely.in" in problem["message"]


def test_malformed_yaml_is_a_problem_with_a_position(tmp_path):
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets:\n  a: [x\n")
    result = runner.invoke(app, ["verify", str(path), "-f", "json"])
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["code"] == "malformed-blueprint" and problem["line"] == 3


def test_missing_file_and_bad_usage_exit_2(tmp_path):
    result = runner.invoke(app, ["verify", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: cannot read blueprint: No such file or directory"
    assert runner.invoke(app, ["verify", str(FIXTURES / "blueprint.yaml"), "--format", "xml"]).exit_code == 2
    assert runner.invoke(app, ["verify"]).exit_code == 2


def test_user_module_output_and_failures_do_not_break_the_report(tmp_path):
    (tmp_path / "cli_noisy.py").write_text("print('hello from import')\nraise ValueError('broken module')\n")
    path = write(tmp_path, "streamlets:\n  noisy: cli_noisy.X\n")
    result = runner.invoke(app, ["verify", str(path), "--format", "json"])
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]  # the print went to stderr
    assert "ValueError: broken module (at cli_noisy.py:2)" in problem["message"]


def test_internal_errors_are_one_line(tmp_path, monkeypatch):
    def explode(resolved):
        raise KeyError("surprise")

    monkeypatch.setattr("blueprint.verify.check", explode)
    result = runner.invoke(app, ["verify", str(FIXTURES / "blueprint.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: internal error while verifying {FIXTURES / 'blueprint.yaml'}: KeyError: 'surprise'"]


def test_python_m_blueprint_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(FIXTURES)])}
    run = lambda *args: subprocess.run([sys.executable, "-m", "blueprint.cli", "verify", *args],
                                       capture_output=True, text=True, env=env, timeout=120)
    ok = run(str(FIXTURES / "blueprint.yaml"))
    assert ok.returncode == 0, ok.stderr
    bad = run(str(write(tmp_path, UNCONNECTED)))
    assert bad.returncode == 1 and "`lonely.in`" in bad.stdout
    assert "\x1b[" not in bad.stdout  # no colour when stdout is not a terminal
    missing = run(str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_cloudflow_hocon_blueprint_is_verified_with_positions(tmp_path):
    path = tmp_path / "blueprint.conf"
    path.write_text(textwrap.dedent(f"""\
        blueprint {{
          streamlets {{
            ingress = {M}.Ingress
            printer = {M}.Printer
            lonely = {M}.Printer
          }}
          topics {{
            flights {{
              producers = [ingress.out]
              consumers = [printer.in, printr.in]
            }}
          }}
        }}
        """))
    result = runner.invoke(app, ["verify", str(path), "--format", "json"])
    assert result.exit_code == 1, result.output
    problems = {p["code"]: (p["line"], p["column"]) for p in json.loads(result.stdout)["problems"]}
    assert problems == {"unconnected-inlet": (5, 5), "unknown-streamlet": (10, 32)}


def test_unreadable_config_exits_2(tmp_path):
    result = runner.invoke(app, ["verify", str(FIXTURES / "blueprint.yaml"), "--config", str(tmp_path / "nope.conf")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.conf'}: cannot read config: No such file or directory"
    assert result.stdout == ""


def test_hocon_config_keeps_unquoted_durations_and_sizes_and_quoted_keys(tmp_path):
    # pyhocon reads `1h` and even `512m` as periods, and keeps the quotes of "a.b" keys: the
    # checker sees what was written.
    (tmp_path / "cfg_streamlets.py").write_text(
        "from streamlets import *\n"
        "class Tuned(Streamlet):\n"
        "    window = DurationParameter('window')\n"
        "    def create_logic(self, ctx): pass\n")
    path = tmp_path / "blueprint.yaml"
    path.write_text("streamlets:\n  tuned: cfg_streamlets.Tuned\n")
    conf = tmp_path / "deploy.conf"
    conf.write_text('streamlets.tuned.config-parameters { window = 1h }\n'
                    'streamlets.tuned.kubernetes.executor { memory = 512m, core-limit = 1200m }\n'
                    'runtimes.spark.config { "spark.sql.shuffle.partitions" = 8 }\n')
    ok = runner.invoke(app, ["verify", str(path), "--config", str(conf)])
    assert ok.exit_code == 0, ok.output
    conf.write_text('streamlets.tuned.config-parameters { window = 1h }\n'
                    'streamlets.tuned.kubernetes.executor { memory = 3 months }\n')
    bad = runner.invoke(app, ["verify", str(path), "--config", str(conf), "--format", "json"])
    [problem] = json.loads(bad.stdout)["problems"]
    assert problem["code"] == "invalid-config-value" and "'3 months' is not a memory size" in problem["message"]
    assert (problem["line"], problem["column"]) == (2, 40)
    # a value that a substitution moved keeps its text too (it used to arrive as
    # "relativedelta(hours=+8, minutes=+32)", no position left to find `512m` again)
    conf.write_text('pod = { memory = 512m, cores = 100m }\n'
                    'streamlets.tuned.kubernetes.executor = ${pod}\n')
    moved = runner.invoke(app, ["build", str(path), "--config", str(conf), "--image", "i:1", "--kafka", "k:9092"])
    assert "unknown top-level key 'pod'" in moved.output  # the helper key is refused, its values are not
    assert "relativedelta" not in moved.output and "is not a" not in moved.output


def test_kafka_security_keys_are_checked(tmp_path):
    """kafka.security.<key>: known keys only, checked together; kafka.embedded-broker.security
    one of none, sasl-ssl, mtls."""
    base = ["verify", str(FIXTURES / "blueprint.yaml"), "--format", "json"]
    sound = runner.invoke(app, [*base, "kafka.security.protocol=SASL_SSL", "kafka.security.sasl-mechanism=PLAIN",
                                "kafka.security.username=u", "kafka.security.password-env=PW",
                                "kafka.embedded-broker.security=mtls"])
    assert sound.exit_code == 0, sound.stdout
    bad = runner.invoke(app, [*base, "kafka.security.truststore=x", "kafka.embedded-broker.security=tls",
                              "kafka.security.username=u"])
    problems = {(p["code"], p["message"]) for p in json.loads(bad.stdout)["problems"]}
    assert bad.exit_code == 1
    assert ("unknown-config-key", "kafka.security.truststore: no Kafka security setting 'truststore'") in problems
    assert ("invalid-config-value", "kafka.embedded-broker.security: 'tls': use one of none, sasl-ssl, mtls") in problems
    assert any(code == "invalid-config-value" and "need protocol SASL_SSL" in message for code, message in problems)
