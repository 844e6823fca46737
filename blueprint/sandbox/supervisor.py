"""The sandbox's supervisor: watches the embedded Kafka broker and the streamlets, and restarts
them as a cluster would (the SparkApplication's restartPolicy OnFailure, the broker's pod).

- Broker: `check()` (called about once a second) notices the broker's JVM has exited, prints
  one line (exit code or signal, the broker log's path) and starts it again on the same ports
  and data folder (KafkaBroker.start keeps its ports while free), so the streamlets' clients
  reconnect. More than `max_restarts` restarts within `window` seconds: one error line, exit 1.
- Streamlets: a failed query that quarantine (streamlets.runtime.quarantine) does not take restarts its
  streamlet after a backoff (`backoff` seconds, doubled per try, at most `max_backoff`); past
  `max_restarts` tries in `window` seconds the sandbox stops with the streamlet's error (the
  user's exception, streamlets.runtime.failures.user_exception) and exit 1.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field

from streamlets.runtime.failures import user_exception

log = logging.getLogger("streamlets.sandbox")


@dataclass
class Tries:
    times: list[float] = field(default_factory=list)

    def add(self, now: float, window: float) -> int:
        """Count a try at `now` (seconds, monotonic) and return the tries within the last `window` seconds,
        this one included."""
        self.times = [t for t in self.times if now - t < window] + [now]
        return len(self.times)


def exit_description(returncode: int | None) -> str:
    """"exit code 1" or "signal SIGKILL" for a Popen returncode."""
    if returncode is None:
        return "unknown status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class Supervisor:
    """Restarts the broker and failed streamlets of a running Sandbox; see the module doc.

    `restarts` counts restarts per streamlet (and "kafka") for the view; `error` is the one
    line the sandbox stops with, once `check()` returned a status."""

    def __init__(self, sandbox, *, max_restarts: int = 3, backoff: float = 2.0, max_backoff: float = 30.0,
                 window: float = 600.0) -> None:
        self.sandbox = sandbox
        self.max_restarts = max_restarts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.window = window
        self.restarts: dict[str, int] = {}
        self._tries: dict[str, Tries] = {}
        self._due: dict[str, float] = {}  # streamlet -> when to restart it
        self._errors: dict[str, tuple[str, str]] = {}  # streamlet -> (query, error) of its last failure
        self.error: str | None = None
        self._notes_seen = 0

    def _say(self, text: str, style: str | None = None) -> None:
        self.sandbox.console.print(text, style=style, highlight=False, soft_wrap=True, markup=False)
        log.warning("%s", text)

    def check(self) -> int | None:
        """One look: None to keep running, 1 to stop (with `error` set and printed)."""
        status = self._check_broker()
        if status is not None:
            return status
        return self._check_streamlets()

    @property
    def restarting(self) -> frozenset[str]:
        """Streamlets that failed and wait for their restart (the backoff)."""
        return frozenset(self._due)

    # --- the broker -------------------------------------------------------------------------

    def _disk_full(self) -> str | None:
        """The sandbox's full-disk line (diskspace.DiskWatch: free space, the broker log's new
        lines), or None."""
        watch = getattr(self.sandbox, "_disk", None)
        return watch.check() if watch is not None else None

    def _check_broker(self) -> int | None:
        broker = self.sandbox.broker
        if broker is None or broker.is_running() or getattr(broker, "_proc", None) is None:
            return None
        how = exit_description(broker._proc.returncode)
        self._say(f"Kafka broker exited ({how}); log: {broker.log_file}", "yellow")
        while True:
            full = self._disk_full()
            if full:  # a broker on a full disk cannot come back: say so, not "exited N times"
                return self._fail(f"error: {full}")
            n = self._tries.setdefault("kafka", Tries()).add(time.time(), self.window)
            if n > self.max_restarts:
                return self._fail(f"error: the Kafka broker exited {n} times within {self.window:.0f} s "
                                  f"(last: {how}); giving up; see {broker.log_file}")
            self.restarts["kafka"] = self.restarts.get("kafka", 0) + 1
            try:
                from .kafka_broker import BrokerError

                broker.start()
            except BrokerError as e:
                proc = getattr(broker, "_proc", None)
                how = exit_description(proc.returncode) if proc is not None and proc.poll() is not None \
                    else str(e).splitlines()[0]
                self._say(f"Kafka broker restart {n} failed: {how}", "yellow")
                continue
            self._say(f"Kafka broker restarted (try {n} of {self.max_restarts}) on {broker.bootstrap_servers}, "
                      f"data in {broker.state_dir / 'data'}")
            # Failures the outage caused are the broker's, not the streamlets': fresh tries.
            for name in list(self._tries):
                if name != "kafka":
                    self._tries[name] = Tries()
            return None

    # --- the streamlets ---------------------------------------------------------------------

    def _check_streamlets(self) -> int | None:
        runtime = self.sandbox.runtime
        now = time.time()
        failures = runtime.unhandled_failures(skip=set(self._due))
        notes = runtime.quarantine.notes
        for line in notes[self._notes_seen:]:
            self._say(line, "yellow")
        self._notes_seen = len(notes)
        for name, error in failures:
            streamlet = name.split(".", 1)[0]
            if streamlet in self._due:
                continue
            self._errors[streamlet] = (name, error)
            n = self._tries.setdefault(streamlet, Tries()).add(now, self.window)
            logfile = self.sandbox.layout.log(streamlet)
            log.error("query %s failed: %s", name, error)
            if n > self.max_restarts:
                return self._fail(f"error: query {name} failed (restarted {n - 1} times; log: {logfile}): "
                                  f"{user_exception(error)}")
            delay = min(self.backoff * 2 ** (n - 1), self.max_backoff)
            self._say(f"query {name} failed: {user_exception(error)}\n"
                      f"  restarting streamlet {streamlet} in {delay:.0f} s (try {n} of {self.max_restarts}; log: {logfile})",
                      "yellow")
            self._due[streamlet] = now + delay
        for streamlet, due in list(self._due.items()):
            if now >= due:
                del self._due[streamlet]
                self.restarts[streamlet] = self.restarts.get(streamlet, 0) + 1
                try:
                    runtime.restart(streamlet)
                except Exception as e:  # a streamlet that cannot start again ends the run
                    query, error = self._errors.get(streamlet, (streamlet, ""))
                    return self._fail(f"error: streamlet {streamlet} could not be restarted: {user_exception(str(e))}")
                self._say(f"restarted streamlet {streamlet}")
        return None

    def _fail(self, line: str) -> int:
        self.error = line  # printed once by the sandbox, after its final tables
        log.error("%s", line)
        return 1
