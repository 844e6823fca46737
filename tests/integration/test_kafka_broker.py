"""Integration tests for blueprint.sandbox.kafka_broker: a real KRaft broker JVM, no mocks."""

import os
import pathlib
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics, end_offsets

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as b:
        yield b


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0, "records left unsent"


def consume_all(bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 30) -> list[bytes]:
    # assign() instead of subscribe(): reads from the start without waiting for a group rebalance
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, deadline = [], time.monotonic() + timeout
    try:
        while len(values) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        c.close()
    return values


def jvm_alive(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, just not yet reaped


def test_produce_consume_and_end_offsets(broker):
    create_topics(broker.bootstrap_servers, [("orders", 3, {"retention.ms": "-1"})])
    create_topics(broker.bootstrap_servers, [("orders", 3, {})])  # already exists: no error
    produce(broker.bootstrap_servers, "orders", 100)

    values = consume_all(broker.bootstrap_servers, "orders", 3, 100)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(100))

    offsets = end_offsets(broker.bootstrap_servers, "orders")
    assert set(offsets) == {0, 1, 2}
    assert sum(offsets.values()) == 100


def test_restart_after_sigkill(tmp_path):
    first = KafkaBroker(tmp_path).start()
    try:
        create_topics(first.bootstrap_servers, [("kept", 2, {})])
        produce(first.bootstrap_servers, "kept", 10)
    finally:
        os.kill(first.pid, signal.SIGKILL)  # no clean shutdown: stale locks, unflushed index files
        while first.is_running():  # is_running() also reaps the dead JVM
            time.sleep(0.05)

    with KafkaBroker(tmp_path) as second:  # a fresh object, as after a process restart
        assert second.port == first.port  # remembered in ports.json and still free
        assert sum(end_offsets(second.bootstrap_servers, "kept").values()) == 10
        assert len(consume_all(second.bootstrap_servers, "kept", 2, 10)) == 10


def test_jvm_dies_with_its_python_parent(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from blueprint.sandbox.kafka_broker import KafkaBroker
        b = KafkaBroker({str(tmp_path)!r}).start()
        print(b.pid, flush=True)
        time.sleep(120)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready, "child did not start its broker within 60 s"
        pid = int(child.stdout.readline())
        assert jvm_alive(pid)

        child.kill()  # SIGKILL: no atexit, no finally, only the kernel's PR_SET_PDEATHSIG remains
        child.wait()
        deadline = time.monotonic() + 10
        while jvm_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not jvm_alive(pid), "broker JVM outlived its parent"
    finally:
        child.kill()
        if pid is not None and jvm_alive(pid):
            os.kill(pid, signal.SIGKILL)
