"""Kafka client log lines (librdkafka's `%3|...|FAIL|...`) go to the run's log files, never to the
terminal: in the sandbox (sandbox.log) and in the SDK's clients (the `streamlets.kafka` logger)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from support.ports import free_port
from support.sandbox import NUMBERS, run_blueprint

RDKAFKA_LINE = re.compile(r"%\d\|\d+\.\d+\|[A-Z_]+\|rdkafka#")


def test_sdk_clients_log_to_python_logging_not_stderr(tmp_path):
    """The sandbox's topic helpers and the control-stream client against a broker that is not
    there: every librdkafka line is in the program's log file, none on stderr or stdout."""
    log = tmp_path / "client.log"
    script = textwrap.dedent(f"""
        import logging
        logging.basicConfig(filename={str(log)!r}, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
        from blueprint.sandbox.kafka_broker import BrokerError, create_topics, end_offsets
        from blueprint.sandbox.topics import TopicWatcher
        from streamlets.runtime.control import results_consumer
        bootstrap = "127.0.0.1:{free_port()}"
        for call in (lambda: create_topics(bootstrap, [("t", 1, {{}})], timeout=3), lambda: end_offsets(bootstrap, "t"),
                     lambda: results_consumer(bootstrap, "app")):
            try:
                call()
            except Exception as e:
                print("failed as expected:", type(e).__name__)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("failed as expected") == 3, result.stdout
    assert not RDKAFKA_LINE.search(result.stdout + result.stderr), result.stderr[-2000:]
    logged = log.read_text()
    assert re.search(r"ERROR streamlets\.kafka FAIL \[rdkafka#\w+-\d+\] .*Connection refused", logged), logged[-2000:]


def test_sandbox_puts_kafka_client_lines_in_sandbox_log(tmp_path):
    """`blueprint run --kafka` at a broker that is not there: one error line on the terminal, the
    clients' connection errors in logs/sandbox.log."""
    state = tmp_path / "state"
    source = state / "volumes" / "ingress" / "source"  # the read-only mount's default folder, empty
    source.mkdir(parents=True)
    result = run_blueprint("run", str(NUMBERS / "blueprint.yaml"), "--state-dir", str(state),
                           "--kafka", f"127.0.0.1:{free_port()}", timeout=300)
    assert result.returncode == 1
    assert f"warning: streamlet 'ingress': volume mount 'source' ({source}) is empty" in " ".join(result.stdout.split())
    assert not RDKAFKA_LINE.search(result.stdout + result.stderr), (result.stdout + result.stderr)[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: creating topic "), result.stderr
    logged = (state / "logs" / "sandbox.log").read_text()
    assert re.search(r"ERROR streamlets\.kafka FAIL \[rdkafka#\w+-\d+\] .*Connection refused", logged), logged[-2000:]
