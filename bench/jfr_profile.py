"""Where a JVM's CPU goes in a benchmark window: Java Flight Recorder (JDK 11+) started and stopped
with `jcmd`, its execution samples summed by thread and by the frame on top of the stack.

    rec = jfr_profile.start(pid, "window", Path("out.jfr"))   # jcmd <pid> JFR.start settings=profile
    ...                                                        # the measured window
    rec.stop()                                                 # jcmd <pid> JFR.stop: the file is written
    print(jfr_profile.describe(jfr_profile.summary(Path("out.jfr"))))

JFR samples threads running Java code (`jdk.ExecutionSample`, every 10 ms per thread with the
`profile` settings; `jdk.NativeMethodSample` for threads in native code is not counted): a thread
waiting in the kernel costs no samples, one computing does. JFR keeps only the samples whose stack
it could walk (a tight compiled loop yields few): the shares are an estimate, good for comparing
windows of the same JVM, not an exact account. Thread names have their numbers
replaced by `#`, so a pool's threads add up (Spark's "Executor task launch worker for task #",
kafka-clients' "kafka-producer-network-thread | producer-<transactional id>-#").
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NUMBER = re.compile(r"\d+")


def available() -> bool:
    """Whether this machine has the JDK's jcmd and jfr tools."""
    return shutil.which("jcmd") is not None and shutil.which("jfr") is not None


@dataclass
class Recording:
    pid: int
    name: str
    path: Path

    def stop(self) -> Path:
        """Stop the recording and write it to `path` (jcmd JFR.stop)."""
        subprocess.run(["jcmd", str(self.pid), "JFR.stop", f"name={self.name}", f"filename={self.path}"],
                       check=True, capture_output=True, timeout=120)
        return self.path


def start(pid: int, name: str, path: Path) -> Recording:
    """Start a JFR recording named `name` in JVM `pid` with the `profile` settings (jcmd JFR.start);
    raises subprocess.CalledProcessError when jcmd fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["jcmd", str(pid), "JFR.start", f"name={name}", "settings=profile"],
                   check=True, capture_output=True, timeout=120)
    return Recording(pid, name, path)


def _frame(f: dict[str, Any]) -> str:
    method = f.get("method") or {}
    cls = (method.get("type") or {}).get("name", "?").replace("/", ".")
    return f"{cls}.{method.get('name', '?')}"


def summary(path: Path, top: int = 15) -> dict[str, Any]:
    """The recording's execution samples: how many, the `top` thread groups and the `top` frames on
    top of the stack (self time), each with its samples."""
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "1", "--events", "jdk.ExecutionSample",
                          str(path)], check=True, capture_output=True, text=True, timeout=600).stdout
    events = json.loads(out)["recording"]["events"]
    threads: Counter[str] = Counter()
    frames: Counter[str] = Counter()
    for e in events:
        v = e["values"]
        thread = (v.get("sampledThread") or {}).get("javaName") or "?"
        threads[_NUMBER.sub("#", thread)] += 1
        stack = (v.get("stackTrace") or {}).get("frames") or []
        frames[_frame(stack[0]) if stack else "?"] += 1
    return {"samples": len(events), "threads": threads.most_common(top), "frames": frames.most_common(top)}


def describe(s: dict[str, Any]) -> str:
    """The summary as indented lines: share of samples per thread group and per top frame."""
    n = max(1, s["samples"])
    lines = [f"JFR execution samples: {s['samples']}", "  by thread:"]
    lines += [f"    {100 * c / n:5.1f}%  {t}" for t, c in s["threads"]]
    lines.append("  by frame on top:")
    lines += [f"    {100 * c / n:5.1f}%  {f}" for f, c in s["frames"]]
    return "\n".join(lines)
