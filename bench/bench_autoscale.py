"""Time to drain a burst with and without autoscaling, on the e2e cluster (issue 31).

    python bench/bench_autoscale.py [--burst 2,3,4,5,6,7] [--warm-up 1] [--cpu 100m] [--rounds 1] [--feed burst]

Runs tests/e2e/test_flight_delays_claim.py (a real cluster of two nodes, the Spark Operator, our
operator, flight-delays deployed as a user would; STREAMLETS_CLUSTER_NODES=2, root) once with
enrich's autoscaling `passive` (the baseline: the decisions are only reported, enrich keeps one
executor) and once `active` (at most three executors, changed in place), alternating which goes
first per round. Each run feeds the warm-up months and waits for their results, then feeds the
burst's months at once; its figure is the seconds from the burst's feed to the egress output
equal to the batch computation of every month fed (the whole pipeline drained), with enrich's
executors limited to `--cpu` of a core each, so that its capacity is its executors'. Prints each
run's figures and `ratio = passive seconds / active seconds` (above 1: autoscaling drained it
faster); writes bench/results/autoscale.json.

Both modes run the autoscaler's test settings (intervals of seconds: the module's AUTOSCALING),
the peer being the same application at its documented default of one executor. `--feed steady` or
`oscillating` feeds the burst's months at the module's set pace instead of at once
(STREAMLETS_E2E_FEED); with STREAMLETS_E2E_RECORD=<folder> each run also saves the operator's
samples of enrich as <folder>/e2e-<feed>-<mode>.json (the recorded series of
tests/unit/test_autoscale.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULE = "tests/e2e/test_flight_delays_claim.py"


def run(mode: str, burst: str, warm_up: str, cpu: str, feed: str) -> dict:
    """One run of the e2e module in `mode`; its BENCH figures."""
    env = {**os.environ, "STREAMLETS_E2E_AUTOSCALING": mode, "STREAMLETS_E2E_BURST": burst, "STREAMLETS_E2E_FEED": feed,
           "STREAMLETS_E2E_WARM_UP": warm_up, "STREAMLETS_E2E_ENRICH_CPU": cpu,
           "STREAMLETS_TEST_JAVA_OPTIONS": "",  # the pods' JVMs with their defaults (tests/support/spark.py)
           "STREAMLETS_CLUSTER_NODES": os.environ.get("STREAMLETS_CLUSTER_NODES", "2")}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", MODULE, "-s", "-x", "-q", "-p", "no:cacheprovider",
                           "-k", "burst"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    lines = [line[len("BENCH "):] for line in proc.stdout.splitlines() if line.startswith("BENCH ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"the {mode} run failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    figures = json.loads(lines[-1])
    figures["run_s"] = round(time.monotonic() - started, 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", default="2,3,4,5,6,7", help="months fed at once (default: February to July)")
    parser.add_argument("--warm-up", default="1", help="months fed and drained first (default: January)")
    parser.add_argument("--cpu", default="100m", help="CPU limit of each enrich executor (default 100m)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--feed", choices=("burst", "steady", "oscillating"), default="burst",
                        help="the burst's months at once (default), or at the e2e module's set pace")
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"passive": [], "active": []}
    for r in range(args.rounds):
        for mode in (("passive", "active") if r % 2 == 0 else ("active", "passive")):
            figures = run(mode, args.burst, args.warm_up, args.cpu, args.feed)
            runs[mode].append(figures)
            print(f"round {r + 1} {mode:8s} drained in {figures['drained_s']:7.1f} s, enrich's executors at most "
                  f"{figures['peak_executors']}, events: {len(figures['events'])}", flush=True)
    passive = statistics.median(f["drained_s"] for f in runs["passive"])
    active = statistics.median(f["drained_s"] for f in runs["active"])
    print(f"\nburst of months {args.burst} (warm-up {args.warm_up or 'none'}), enrich executors at {args.cpu} CPU each")
    print(f"median drain: passive (1 executor) {passive:.1f} s, active (autoscaled) {active:.1f} s; "
          f"ratio passive/active = {passive / active:.2f}")
    out = REPO / "bench" / "results" / "autoscale.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"burst": args.burst, "warm_up": args.warm_up, "cpu": args.cpu, "runs": runs,
                               "median_passive_s": passive, "median_active_s": active,
                               "ratio": round(passive / active, 3)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
