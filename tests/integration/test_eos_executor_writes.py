"""Issue 30 spike: Kafka transactions written by one process and committed by another
(streamlets-kafka-eos jar, runtime.eos_jar; docs/eos-executor-writes.md), on the real broker.

kafka-clients 3.9.2 (Spark 4.2.0's connector dependency) resumes a transaction another process
began and left open (flushed, not committed), through Flink's resumeTransaction reflection; a
read_committed consumer sees its records only after that commit; a leftover transaction never
resumed is aborted by initTransactions on its transactional.id (fencing) and stays invisible.
Then the Spark sink (apps/eos/sink_job.py, its own driver process): tasks' records invisible
until the driver's commit; a driver killed before or after its decision, or after its commits and
Spark's commit log but before the ledger's `committed` record; the broker's timeout
abort; a failed task attempt: every record once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from support.kafka import offsets, read_topic, topics

pytestmark = pytest.mark.timeout(600)


def tool(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """One step of streamlets.kafka.eos.Tool in its own JVM (its own process)."""
    from streamlets.runtime.eos_jar import tool_command

    run = subprocess.run(tool_command(*args), capture_output=True, text=True, timeout=120)
    if check:
        assert run.returncode == 0, run.stderr[-3000:]
    return run


def begin(bootstrap: str, topic: str, txid: str, n: int) -> tuple[str, str]:
    """Producer A: write n records in a transaction, flush, exit leaving it open -> (pid, epoch)."""
    producer_id, epoch, _counts = tool("begin", bootstrap, topic, txid, str(n)).stdout.split(maxsplit=2)
    return producer_id, epoch


def visible(bootstrap: str, topic: str, expected: list[bytes] | None = None) -> list[bytes]:
    """The values a read_committed consumer reads now (up to the last stable offsets), sorted. With
    `expected`, read again until they are those, for up to 30 s: a commit's markers are written
    after the commit returns."""
    deadline = time.monotonic() + 30
    while True:
        got = sorted(m.value() for m in read_topic(bootstrap, topic, stable=True))
        if expected is None or got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def held_back(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Partitions whose last stable offset is under their high watermark, {p: (lso, hw)}: those
    with a transaction still open (read_committed consumers see nothing past it)."""
    return {p: (lso, hw) for p, (lso, hw) in offsets(bootstrap, topic).items() if lso < hw}


def test_another_process_resumes_and_commits_a_transaction_left_open(kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    (topic,) = topics(kafka_broker, "eos-resume", partitions=2)
    txid, leftover = f"eos-{uuid.uuid4().hex[:6]}-0", f"eos-{uuid.uuid4().hex[:6]}-1"

    producer_id, epoch = begin(bootstrap, topic, txid, 10)  # process A exits, transaction open
    assert visible(bootstrap, topic) == [] and held_back(bootstrap, topic)

    tool("commit", bootstrap, txid, producer_id, epoch)  # process B
    expected = sorted(f"{txid}-{i}".encode() for i in range(10))
    assert visible(bootstrap, topic, expected) == expected
    tool("commit", bootstrap, txid, producer_id, epoch)  # a retried commit (driver restart) is accepted
    assert visible(bootstrap, topic, expected) == expected

    assert held_back(bootstrap, topic) == {}
    stale_id, stale_epoch = begin(bootstrap, topic, leftover, 5)  # never resumed
    assert held_back(bootstrap, topic)
    tool("fence", bootstrap, leftover)  # initTransactions: bumps the epoch, aborts it
    late = tool("commit", bootstrap, leftover, stale_id, stale_epoch, check=False)
    assert late.returncode != 0 and "ProducerFencedException" in late.stderr
    assert held_back(bootstrap, topic) == {}  # aborted: the last stable offset moved past it
    assert visible(bootstrap, topic, expected) == expected


def test_a_partition_added_ahead_holds_no_reader_back(kafka_broker):
    """The ledger's decision is begun while a batch's tasks run, its partition added with no record
    (LedgerCommitter.beginAhead): the coordinator has the partition in an open transaction, but its
    last stable offset stays at its end, so read_committed readers of the ledger (other outlets'
    starts) are not held back; a record sent in an open transaction would hold them."""
    bootstrap = kafka_broker.bootstrap_servers
    (topic,) = topics(kafka_broker, "eos-ahead", partitions=1)
    txid = f"eos-ahead-{uuid.uuid4().hex[:6]}"
    tool("loop", bootstrap, topic, f"{txid}-before", "2", "0")  # two committed records before it

    state, *parts = tool("ahead", bootstrap, topic, txid).stdout.split()
    assert (state, parts) == ("Ongoing", [f"{topic}-0"])  # open at the coordinator, partition 0 in it
    tool("loop", bootstrap, topic, f"{txid}-after", "1", "0")  # committed after it began
    assert held_back(bootstrap, topic) == {}
    assert len(visible(bootstrap, topic)) == 3

    begin(bootstrap, topic, f"{txid}-sent", 1)  # the control: one record sent in an open transaction
    assert held_back(bootstrap, topic)
    assert len(visible(bootstrap, topic)) == 3


def test_back_to_back_transactions_with_the_sinks_settings_all_commit(kafka_broker):
    """bench/bench_txn_backoff.py's step: transactions begun right after the last one's commit
    (answered CONCURRENT_TRANSACTIONS while its markers are written, then retried) each commit,
    with the sink's producer settings (EosKafkaSink.producerConfig) and with a trailing override."""
    bootstrap = kafka_broker.bootstrap_servers
    (topic,) = topics(kafka_broker, "eos-loop", partitions=1)
    for override in ((), ("retry.backoff.ms=100",)):
        timings = tool("loop", bootstrap, topic, f"eos-loop-{uuid.uuid4().hex[:6]}", "30", "0", *override).stdout.split()
        assert len(timings) == 30 and all(float(ms) > 0 for ms in timings)
    assert held_back(bootstrap, topic) == {}
    assert len(visible(bootstrap, topic)) == 60


def test_a_restart_after_part_of_a_decision_timed_out_writes_the_batch_again_whole(kafka_broker):
    """A driver decided batch 0 (two tasks' open transactions) and died before committing either.
    Its restart comes after the broker aborted one of them (its transaction.timeout.ms passed) but
    not the other. Rolling the decision forward would make half the batch visible and lose the
    other half; nothing of it was committed, so the new driver aborts the other one too and
    records the batch aborted: it is written again, whole (Spark replays it: no commit log entry)."""
    from streamlets.kafka_security import KafkaConnection
    from streamlets.runtime.exactly_once import ensure_ledger

    bootstrap = kafka_broker.bootstrap_servers
    short, long_ = topics(kafka_broker, "eos-expired", "eos-open", partitions=1)
    ledger_topic = ensure_ledger(KafkaConnection(bootstrap_servers=bootstrap), APP)
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    lines = []
    for i, (topic, timeout) in enumerate(((short, 5000), (long_, 600000))):
        pid, epoch, _ = tool("begin", bootstrap, topic, f"{prefix}-{i}", "5",
                             f"transaction.timeout.ms={timeout}").stdout.split(maxsplit=2)
        lines.append(f"{prefix}-{i}:{pid}:{epoch}:0/5")
    assert tool("decide", bootstrap, ledger_topic, prefix, "0", *lines).stdout.split() == ["decided"]
    assert ledger_at(bootstrap, prefix) == (0, "decided")
    deadline = time.monotonic() + 60  # the broker aborts timed-out transactions every 10 s
    while held_back(bootstrap, short):
        assert time.monotonic() < deadline, "the broker did not abort the short transaction"
        time.sleep(1)
    assert held_back(bootstrap, long_)  # the other one is still open

    opened = tool("open", bootstrap, ledger_topic, prefix).stdout.strip()  # no "partly committed"
    assert opened.startswith(f"ok; {prefix}-0 ") and "Abort" in opened and f"{prefix}-1" not in opened, opened
    assert ledger_at(bootstrap, prefix) == (0, "aborted")
    assert held_back(bootstrap, long_) == {}  # aborted, not committed
    assert visible(bootstrap, short) == [] and visible(bootstrap, long_) == []


def test_a_restart_within_the_margin_of_a_transactions_timeout_writes_the_batch_again(kafka_broker):
    """The same restart, but every transaction of the decision is still open; one of them (a
    90-second transaction.timeout.ms) has less than its margin (a tenth: 9 s) left when the new
    driver looks. Committing now would race the broker's abort of that one: the batch is written
    again instead, nothing of it committed (the coordinator's start time against this machine's
    clock)."""
    from streamlets.kafka_security import KafkaConnection
    from streamlets.runtime.exactly_once import ensure_ledger

    bootstrap = kafka_broker.bootstrap_servers
    near, far = topics(kafka_broker, "eos-near", "eos-far", partitions=1)
    ledger_topic = ensure_ledger(KafkaConnection(bootstrap_servers=bootstrap), APP)
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    lines, begun = [], 0.0
    for i, (topic, timeout) in enumerate(((near, 90000), (far, 600000))):
        pid, epoch, _ = tool("begin", bootstrap, topic, f"{prefix}-{i}", "5",
                             f"transaction.timeout.ms={timeout}").stdout.split(maxsplit=2)
        lines.append(f"{prefix}-{i}:{pid}:{epoch}:0/5")
        begun = begun or time.monotonic()  # the near transaction began at the coordinator before this
    assert tool("decide", bootstrap, ledger_topic, prefix, "0", *lines).stdout.split() == ["decided"]
    # 82 s after, the new driver finds under 90 - 82 = 8 s left: within the margin, before the timeout
    time.sleep(max(0.0, begun + 82 - time.monotonic()))
    opened = tool("open", bootstrap, ledger_topic, prefix).stdout.strip()
    assert opened.startswith(f"ok; {prefix}-0 Ongoing, ") and opened.endswith(" ms before its transaction.timeout.ms"), opened
    assert ledger_at(bootstrap, prefix) == (0, "aborted")
    assert held_back(bootstrap, near) == {} and held_back(bootstrap, far) == {}
    assert visible(bootstrap, near) == [] and visible(bootstrap, far) == []


APPS = Path(__file__).parent / "apps" / "eos"


@pytest.fixture(scope="module")
def job_jars(tmp_path_factory) -> str:
    """spark.jars for apps/eos/sink_job.py: the eos jar, kafka-clients, and the test's GatedCommitter."""
    from streamlets.runtime.eos_jar import classpath, eos_jar, kafka_clients_jar

    out = tmp_path_factory.mktemp("gated")
    cp = os.pathsep.join(map(str, [eos_jar(), *classpath()]))
    subprocess.run(["javac", "--release", "17", "-d", str(out / "classes"), "-cp", cp, str(APPS / "GatedCommitter.java")],
                   check=True, capture_output=True)
    with zipfile.ZipFile(out / "gated.jar", "w") as jar:
        for f in (out / "classes").rglob("*.class"):
            jar.write(f, f.relative_to(out / "classes").as_posix())
    return ",".join(map(str, [eos_jar(), kafka_clients_jar(), out / "gated.jar"]))


def wait_for(path: Path, job: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert job.poll() is None or path.exists(), f"the job exited ({job.returncode}) before {path} appeared"
        assert time.monotonic() < deadline, f"no {path} after {seconds} s"
        time.sleep(0.2)


APP = "eos"  # the ledger topic is this application's: eos.outlet-batches


def ledger(bootstrap: str, prefix: str) -> dict:
    """The outlet query's last ledger record (exactly_once.ledger_state)."""
    from streamlets.kafka_security import KafkaConnection
    from streamlets.runtime.exactly_once import ledger_state

    return ledger_state(KafkaConnection(bootstrap_servers=bootstrap), APP, prefix)


def ledger_at(bootstrap: str, prefix: str) -> tuple[int | None, str]:
    """(batch, state) of the outlet query's last ledger record, read once."""
    last = ledger(bootstrap, prefix)
    return last.get("batch"), last["state"]


def wait_for_ledger(bootstrap: str, prefix: str, batch: int, state: str, job: subprocess.Popen,
                    seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while ledger_at(bootstrap, prefix) != (batch, state):
        assert job.poll() is None, f"the job exited ({job.returncode}) before batch {batch} was {state}"
        assert time.monotonic() < deadline, f"batch {batch} not {state} after {seconds} s"
        time.sleep(0.5)


def start_job(jars: str, folder: Path, bootstrap: str, topic: str, prefix: str, *options: str) -> subprocess.Popen:
    """apps/eos/sink_job.py in its own process, on `folder`'s in/, checkpoint/, gate/; the ledger
    topic eos.outlet-batches (created here when missing)."""
    from streamlets.kafka_security import KafkaConnection
    from streamlets.runtime.exactly_once import ensure_ledger

    for name in ("in", "gate"):
        (folder / name).mkdir(exist_ok=True)
    ledger_topic = ensure_ledger(KafkaConnection(bootstrap_servers=bootstrap), APP)
    return subprocess.Popen([sys.executable, str(APPS / "sink_job.py"), jars, str(folder / "in"),
                             str(folder / "checkpoint"), ledger_topic, str(folder / "gate"), bootstrap, topic, prefix,
                             *options], stdout=subprocess.DEVNULL, stderr=open(folder / "job.log", "ab"))


def run_until_committed(job: subprocess.Popen, folder: Path, bootstrap: str, prefix: str, batch: int) -> None:
    """Let the job run until `batch` is committed in the ledger and in Spark's commit log, then stop it."""
    try:
        wait_for_ledger(bootstrap, prefix, batch, "committed", job)
        wait_for(folder / "checkpoint" / "commits" / str(batch), job)
        (folder / "gate" / "stop").touch()
        assert job.wait(240) == 0, (folder / "job.log").read_text()[-3000:]
        (folder / "gate" / "stop").unlink()  # the next job of the folder runs until told
    finally:
        if job.poll() is None:
            job.kill()


def test_executors_write_each_task_in_its_transaction_and_the_driver_commits(kafka_broker, job_jars, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    (topic,) = topics(kafka_broker, "eos-sink", partitions=3)
    source, gate, checkpoint = (tmp_path / n for n in ("in", "gate", "checkpoint"))
    source.mkdir()
    gate.mkdir()
    prefix = f"eos-{uuid.uuid4().hex[:6]}"

    def start() -> subprocess.Popen:
        return start_job(job_jars, tmp_path, bootstrap, topic, prefix)

    a = [f"a-{i}".encode() for i in range(30)]
    b = [f"b-{i}".encode() for i in range(20)]
    c = [f"c-{i}".encode() for i in range(25)]
    (gate / "hold-0").touch()
    (gate / "crash-1").touch()
    (source / "a.txt").write_bytes(b"\n".join(a) + b"\n")
    job = start()
    try:
        wait_for(gate / "0.decided", job)  # tasks wrote and flushed; the decision is durable, not committed
        tasks = [line.split() for line in (gate / "0.decided").read_text().splitlines()]
        per_task = [sum(int(kv.split("=")[1]) for kv in t[5].split(",")) for t in tasks]
        assert len(tasks) == 3 and sum(per_task) == 30 and all(n > 0 for n in per_task), tasks
        assert sorted(t[2] for t in tasks) == [f"{prefix}-{p}" for p in range(3)]
        assert visible(bootstrap, topic) == [] and held_back(bootstrap, topic)
        assert ledger(bootstrap, prefix)["state"] == "decided"
        (gate / "hold-0").unlink()
        wait_for_ledger(bootstrap, prefix, 0, "committed", job)
        assert visible(bootstrap, topic, sorted(a)) == sorted(a)

        (source / "b.txt").write_bytes(b"\n".join(b) + b"\n")  # batch 1: the driver dies after its decision
        assert job.wait(240) != 0
        assert (gate / "1.decided").exists() and ledger_at(bootstrap, prefix) == (1, "decided")
        # batch 1's tasks went on with the producers batch 0's tasks kept (TaskProducers): the same
        # producer id and epoch per transactional id (no initTransactions), a new transaction each
        producers = {b: {t[2]: (t[3], t[4], t[7]) for t in (line.split() for line in (gate / f"{b}.decided").read_text().splitlines())}
                     for b in (0, 1)}
        assert producers[1].keys() == producers[0].keys(), producers
        assert all(producers[1][i][:2] == producers[0][i][:2] and producers[1][i][2] != producers[0][i][2]
                   for i in producers[0]), producers
        assert visible(bootstrap, topic, sorted(a)) == sorted(a)
    finally:
        if job.poll() is None:
            job.kill()

    (gate / "crash-1").unlink()
    job = start()  # rolls batch 1's decision forward; Spark replays batch 1, whose tasks write nothing
    try:
        wait_for(checkpoint / "commits" / "1", job)
        assert held_back(bootstrap, topic) == {}
        assert visible(bootstrap, topic, sorted(a + b)) == sorted(a + b)
        (gate / "crash-before-2").touch()  # batch 2: the driver dies before its decision
        (source / "c.txt").write_bytes(b"\n".join(c) + b"\n")
        assert job.wait(240) != 0
        assert ledger(bootstrap, prefix)["batch"] == 1 and held_back(bootstrap, topic)  # tasks' transactions open, undecided
    finally:
        if job.poll() is None:
            job.kill()

    (gate / "crash-before-2").unlink()
    job = start()  # fences prefix-0..2 (aborts batch 2's leftovers); Spark replays batch 2, written again
    run_until_committed(job, tmp_path, bootstrap, prefix, 2)
    assert held_back(bootstrap, topic) == {}
    assert visible(bootstrap, topic, sorted(a + b + c)) == sorted(a + b + c)

    # batch 3: the driver dies after its commits and Spark's commit log, before the ledger's
    # `committed` record (written while Spark plans the next batch): visible once, decided only
    d = [f"d-{i}".encode() for i in range(15)]
    e = [f"e-{i}".encode() for i in range(10)]
    (gate / "crash-recording-3").touch()
    (source / "d.txt").write_bytes(b"\n".join(d) + b"\n")
    job = start()
    try:
        assert job.wait(240) != 0
        assert (checkpoint / "commits" / "3").exists()
        assert ledger_at(bootstrap, prefix) == (3, "decided")
        assert visible(bootstrap, topic, sorted(a + b + c + d)) == sorted(a + b + c + d) and held_back(bootstrap, topic) == {}
    finally:
        if job.poll() is None:
            job.kill()
    (gate / "crash-recording-3").unlink()
    (source / "e.txt").write_bytes(b"\n".join(e) + b"\n")
    job = start()  # batch 4's committer rolls batch 3 forward (its commits again, accepted); no replay
    run_until_committed(job, tmp_path, bootstrap, prefix, 4)
    assert held_back(bootstrap, topic) == {}
    assert visible(bootstrap, topic, sorted(a + b + c + d + e)) == sorted(a + b + c + d + e)


TIMEOUT = "kafka.transaction.timeout.ms=8000"  # the sink's option: the tasks' and driver's producers


def test_a_batch_the_broker_aborted_is_written_again_and_a_failed_task_attempt_is_aborted(kafka_broker, job_jars,
                                                                                          tmp_path):
    """The driver's commit comes after transaction.timeout.ms: the broker aborted every task's
    transaction, the batch fails and is written again on restart (not skipped). The replay's
    commit comes within the margin of the timeout: refused before any decision, aborted, written
    again by the next run. Each run's first attempt of one task fails after sending rows, its
    retry fences it (initTransactions)."""
    bootstrap = kafka_broker.bootstrap_servers
    (topic,) = topics(kafka_broker, "eos-timeout", partitions=3)
    gate = tmp_path / "gate"
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    a = [f"a-{i}".encode() for i in range(30)]
    gate.mkdir()
    (gate / "hold-0").touch()
    (gate / "fail-task").touch()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(b"\n".join(a) + b"\n")
    job = start_job(job_jars, tmp_path, bootstrap, topic, prefix, TIMEOUT)
    try:
        wait_for(gate / "0.decided", job)
        assert (gate / "task-failed").exists()
        tasks = [line.split() for line in (gate / "0.decided").read_text().splitlines()]
        assert sum(int(kv.split("=")[1]) for t in tasks for kv in t[5].split(",")) == 30, tasks
        assert held_back(bootstrap, topic)
        deadline = time.monotonic() + 60  # the broker aborts timed-out transactions every 10 s
        while held_back(bootstrap, topic):
            assert time.monotonic() < deadline, "the broker did not abort the batch's transactions"
            time.sleep(1)
        assert visible(bootstrap, topic) == []
        (gate / "hold-0").unlink()
        assert job.wait(240) != 0  # the commit is fenced: the batch fails
        assert ledger_at(bootstrap, prefix) == (0, "aborted")
        assert "aborted all its transactions" in (tmp_path / "job.log").read_text()
    finally:
        if job.poll() is None:
            job.kill()

    # The replay reaches its commit within the margin of the timeout (held before deciding): the
    # driver does not decide it (the broker could abort some of its transactions and not others),
    # Spark aborts them all and the batch fails: nothing visible, nothing held back
    for name in ("task-failed", "0.committing"):
        (gate / name).unlink()
    (gate / "hold-before-0").touch()
    job = start_job(job_jars, tmp_path, bootstrap, topic, prefix, TIMEOUT)
    try:
        wait_for(gate / "0.committing", job)
        time.sleep(8)  # the tasks began more than 8000 - 800 ms (commitMarginMs) ago
        (gate / "hold-before-0").unlink()
        assert job.wait(240) != 0
        assert "batch 0 is not committed: its tasks began" in (tmp_path / "job.log").read_text()
        assert ledger_at(bootstrap, prefix) == (0, "aborted")
        deadline = time.monotonic() + 30
        while held_back(bootstrap, topic):
            assert time.monotonic() < deadline, "the refused batch's transactions were not aborted"
            time.sleep(0.5)
        assert visible(bootstrap, topic) == []
    finally:
        if job.poll() is None:
            job.kill()

    (gate / "task-failed").unlink()
    job = start_job(job_jars, tmp_path, bootstrap, topic, prefix)
    run_until_committed(job, tmp_path, bootstrap, prefix, 0)
    assert (gate / "task-failed").exists()
    assert held_back(bootstrap, topic) == {}
    assert visible(bootstrap, topic, sorted(a)) == sorted(a)
