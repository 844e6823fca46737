"""Benchmark: what a Kafka transaction costs when it begins right after the last one of its
transactional id was committed, per producer `retry.backoff.ms`.

    python bench/bench_txn_backoff.py [--transactions 200] [--gaps 0,2,10] [--rounds 3]

The exactly-once sink (jvm/streamlets-kafka-eos) begins transactions right behind committed
ones: the driver's ledger producer writes a batch's "committed" record right after its
"decided" one, and a batch's tasks continue producers whose last transactions the driver has
just committed. Kafka's `EndTxn` is answered once the coordinator has logged the commit; it
writes the commit markers after that, and until they are written the next transaction's
`AddPartitionsToTxn` is answered CONCURRENT_TRANSACTIONS and retried after the producer's
`retry.backoff.ms` (kafka-clients caps it at 20 ms for this retry).

One broker (KRaft, started here) and one topic; per setting, gap and round, a fresh JVM runs
`streamlets.kafka.eos.Tool loop`: --transactions transactions of one 100-byte record each (a
send, then `commitTransaction`, as the sink writes a ledger record), each begun --gap ms after
the last one's commit returned, the producer configured as the sink's
(EosKafkaSink.producerConfig), with `retry.backoff.ms` as given. Settings timed:

- sink: the sink's own setting (no override).
- 10: what the sink used before.
- 100: kafka-clients' default (then the 20 ms cap applies).

Printed: the mean, median and p90 milliseconds per transaction (begin, send, commit), medians
over rounds, and the ratios of each setting's to the sink's, per gap: the backoff shows in the
p90 (it hits some back-to-back transactions, not most). Results go to
bench/results/txn_backoff.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SETTINGS = {"sink": None, "10": "10", "100": "100"}  # label -> retry.backoff.ms (None: the sink's own)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_loop(bootstrap: str, topic: str, txid: str, n: int, gap: int, backoff: str | None) -> list[float]:
    from streamlets.runtime.eos_jar import tool_command

    extra = [f"retry.backoff.ms={backoff}"] if backoff is not None else []
    out = subprocess.run(tool_command("loop", bootstrap, topic, txid, str(n), str(gap), *extra),
                         capture_output=True, text=True, check=True, timeout=600)
    return [float(v) for v in out.stdout.split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=200, help="transactions per run (default 200)")
    parser.add_argument("--gaps", default="0,2,10", help="ms between a commit and the next begin (default 0,2,10)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per setting and gap (default 3)")
    parser.add_argument("--output", default=str(HERE / "results" / "txn_backoff.json"))
    args = parser.parse_args(argv)
    gaps = [int(g) for g in args.gaps.split(",")]

    from blueprint.sandbox.kafka_broker import KafkaBroker, create_topics

    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        broker = KafkaBroker(tmp).start()
        try:
            bootstrap = broker.bootstrap_servers
            create_topics(bootstrap, [("bench.txn", 1, {})])
            run_loop(bootstrap, "bench.txn", "bench-warmup", 20, 0, None)  # the broker's first transactions
            for gap in gaps:
                for r in range(args.rounds):
                    for label, backoff in SETTINGS.items():
                        ms = run_loop(bootstrap, "bench.txn", f"bench-{label}-{gap}-{r}", args.transactions, gap, backoff)
                        slot = results.setdefault(str(gap), {}).setdefault(label, {"mean": [], "p50": [], "p90": []})
                        slot["mean"].append(statistics.fmean(ms))
                        slot["p50"].append(statistics.median(ms))
                        slot["p90"].append(percentile(ms, 0.9))
        finally:
            broker.stop()

    print(f"{'gap ms':>6}  {'retry.backoff.ms':<16} {'mean ms':>8} {'p50 ms':>8} {'p90 ms':>8} {'mean / sink':>11} "
          f"{'p90 / sink':>10}")
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for gap, by_label in results.items():
        sink_mean, sink90 = (statistics.median(by_label["sink"][q]) for q in ("mean", "p90"))
        for label, v in by_label.items():
            mean, p50, p90 = (statistics.median(v[q]) for q in ("mean", "p50", "p90"))
            summary.setdefault(gap, {})[label] = {"mean_ms": mean, "p50_ms": p50, "p90_ms": p90,
                                                  "mean_to_sink": mean / sink_mean, "p90_to_sink": p90 / sink90}
            print(f"{gap:>6}  {label:<16} {mean:8.2f} {p50:8.2f} {p90:8.2f} {mean / sink_mean:11.2f} {p90 / sink90:10.2f}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "txn_backoff", "transactions": args.transactions, "rounds": args.rounds,
                               "settings": {k: v or "the sink's (EosKafkaSink.producerConfig)" for k, v in SETTINGS.items()},
                               "results": summary, "raw": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
