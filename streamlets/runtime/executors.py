"""A driver's executors, counted and changed in place: what the autoscaler applies (issue 31).

Spark's developer API on the SparkContext, with dynamic allocation off (the platform's default;
`SparkContext.killExecutors` even requires it off):

- `requestTotalExecutors(n, 0, {})` sets the absolute number of executors the cluster manager
  keeps (CoarseGrainedSchedulerBackend; on Kubernetes the ExecutorPodsAllocator creates pods up to
  it, in batches of spark.kubernetes.allocation.batch.size every
  spark.kubernetes.allocation.batch.delay). Never `requestExecutors(k)`: the backend's map starts
  empty on Kubernetes, so it would set the total to k.
- Fewer executors: the total first, then `killExecutors(ids, adjustTargetNumExecutors=false,
  countFailures=false, force=false)` on the scheduler backend for idle executors only (a busy one
  is skipped: no running task is killed, SPARK-9552), highest id first, retried until enough are
  gone or `timeout` passes. Between micro-batches every executor is idle, so a streamlet loses no
  work: a removed executor's state store instances load again from the checkpoint wherever the next
  batch's tasks run (StateStore.get), and its kept Kafka producers hold no open transaction.
  Kubernetes' allocator never deletes a running pod when the total drops (only pending ones), which
  is why the kill is needed.
- New executors take tasks from the next stage on, i.e. the next micro-batch.

A local master (`local[*]`, the sandbox) runs tasks in the driver: nothing to change (`supported`
is False; `count` is 1 and `cores` the local parallelism). The calls block on the driver's RPC
(spark.rpc.askTimeout): run them off Spark's listener threads (the control listener does).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

DRIVER = "driver"  # the driver's entry in Spark's executor list


@dataclass(frozen=True)
class Executor:
    """One executor of the driver: Spark's `id`, `host`, task slots (`cores`) and `active_tasks`."""

    id: str
    host: str
    cores: int
    active_tasks: int


class ExecutorControl:
    """The executors of a SparkSession's driver (module docstring: the Spark calls and why)."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext

    @property
    def local(self) -> bool:
        """Whether tasks run in the driver (a local master)."""
        master = str(self.sc.master)
        return master == "local" or master.startswith("local[")  # not local-cluster[...]: real executors

    def supported(self) -> bool:
        """Whether the executor count can change in place: the scheduler backend is an
        ExecutorAllocationClient (every cluster manager's; not a local master)."""
        if self.local:
            return False
        jvm = self.sc._jvm
        backend = self.sc._jsc.sc().schedulerBackend()
        return bool(jvm.java.lang.Class.forName("org.apache.spark.ExecutorAllocationClient").isInstance(backend))

    def executors(self) -> list[Executor]:
        """The active executors (registered with the scheduler backend, neither being removed nor
        decommissioned: ExecutorAllocationClient.isExecutorActive), not the driver, with their slots
        and running tasks from Spark's status store (the UI's Executors tab); a local master's
        driver as the one executor."""
        if self.local:
            return [Executor(DRIVER, "localhost", self.sc.defaultParallelism, 0)]
        jsc = self.sc._jsc.sc()
        backend = jsc.schedulerBackend()
        active = [i for i in _strings(backend.getExecutorIds()) if backend.isExecutorActive(i)]
        known = {}
        it = jsc.statusStore().executorList(True).iterator()
        while it.hasNext():
            e = it.next()
            known[str(e.id())] = Executor(str(e.id()), str(e.hostPort()).rsplit(":", 1)[0], int(e.totalCores()),
                                          int(e.activeTasks()))
        # one registered a moment ago may not be in the status store yet: idle, spark.executor.cores slots
        return [known.get(i) or Executor(i, "", self.cores(), 0) for i in active]

    def count(self) -> int:
        """Executors running now (registered and active)."""
        return len(self.executors())

    def cores(self) -> int:
        """Task slots per executor: spark.executor.cores (Spark's default 1); a local master's
        parallelism."""
        if self.local:
            return int(self.sc.defaultParallelism)
        text = str(self.sc.getConf().get("spark.executor.cores", "1")).strip()
        return int(text) if text.isdigit() and int(text) > 0 else 1

    def set_total(self, total: int, timeout: float = 60.0) -> str:
        """Run `total` executors (>= 1): ask the cluster manager for that many, and for fewer remove
        idle executors, highest id first, until `total` remain or `timeout` seconds pass. Returns
        what was done. Raises RuntimeError when the master cannot change executors in place (a local
        master) or refuses the request."""
        if total < 1:
            raise ValueError(f"executors must be 1 or more, not {total}")
        if not self.supported():
            raise RuntimeError(f"master {self.sc.master} cannot change its executors in place")
        jsc, jvm = self.sc._jsc.sc(), self.sc._jvm
        before = self.executors()
        if not jsc.requestTotalExecutors(total, 0, jvm.PythonUtils.toScalaMap({})):
            raise RuntimeError(f"the cluster manager refused a total of {total} executor(s)")
        if len(before) <= total:
            return f"{len(before)} -> {total} executor(s) requested"
        removed: list[str] = []
        deadline = time.monotonic() + timeout
        backend = jsc.schedulerBackend()
        while True:
            running = [e for e in self.executors() if e.id not in removed]
            excess = len(running) - total
            if excess <= 0:
                break
            idle = sorted((e for e in running if e.active_tasks == 0), key=_id_order, reverse=True)[:excess]
            if idle:
                killed = backend.killExecutors(jvm.PythonUtils.toSeq([e.id for e in idle]), False, False, False)
                removed += [str(i) for i in _strings(killed)]
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        left = len(before) - len(removed)
        text = f"{len(before)} -> {total} executor(s): removed idle {', '.join(removed) or 'none'}"
        if left > total:
            text += f"; {left - total} busy executor(s) still running after {timeout:.0f} s"
        log.info("executors %s", text)
        return text


def _id_order(e: Executor) -> tuple[int, str]:
    return (int(e.id), e.id) if e.id.isdigit() else (-1, e.id)


def _strings(seq) -> list[str]:
    """A Scala Seq[String] through py4j as a list."""
    out = []
    it = seq.iterator()
    while it.hasNext():
        out.append(str(it.next()))
    return out
