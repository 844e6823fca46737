"""Benchmark: `blueprint verify` on a generated application of 500 streamlets and 1,000 topics.

    python bench/bench_verify.py [--streamlets 500] [--topics 1000] [--rounds 5]

The application is a layered DAG: every topic has one producer outlet and one or two consumer
inlets further down; half of the consumers read an evolved schema (one added field with a
default), so that the Avro schema-resolution check runs on every such topic. The streamlet
classes are generated in this process, so the import of user modules is excluded (as the goal
says); what is timed is what `verify` does with a blueprint file: load and check the YAML,
instantiate every class and read its descriptor, resolve 2,500 port paths, and run every check
(names, connections, producer/consumer schema compatibility, Kafka names, cycles).

Baseline, measured in the same run: parsing the same file with PyYAML's libyaml loader (reading
the blueprint and nothing else). Printed: median seconds of each, their ratio, and the goal (verify < 2 s).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from blueprint.loader import load_blueprint  # noqa: E402
from blueprint.verify import verify  # noqa: E402
from streamlets import AvroInlet, AvroOutlet, IntegerParameter, Streamlet, VolumeMount  # noqa: E402

GOAL_SECONDS = 2.0


def schema(namespace: str, evolved: bool = False) -> dict:
    fields = [{"name": "id", "type": "string"}, {"name": "value", "type": "long"},
              {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
              {"name": "tags", "type": {"type": "array", "items": "string"}},
              {"name": "note", "type": ["null", "string"], "default": None}]
    if evolved:
        fields.append({"name": "extra", "type": "double", "default": 0.0})
    return {"type": "record", "name": "Event", "namespace": namespace, "fields": fields}


def generate(n_streamlets: int, n_topics: int, folder: Path, seed: int = 7) -> tuple[Path, dict]:
    """A blueprint file in `folder` and its classes (instance name -> class): every topic has one
    producer in an earlier layer and one or two consumers in later ones (no cycles)."""
    rng = random.Random(seed)
    producer_of = [rng.randrange(0, n_streamlets - 1) for _ in range(n_topics)]
    consumers_of = []
    inlets: dict[int, list[str]] = {i: [] for i in range(n_streamlets)}
    outlets: dict[int, list[str]] = {i: [] for i in range(n_streamlets)}
    for t, p in enumerate(producer_of):
        outlets[p].append(f"out-{t}")
        readers = rng.sample(range(p + 1, n_streamlets), k=min(rng.choice((1, 2)), n_streamlets - p - 1))
        consumers_of.append([(r, f"in-{t}") for r in readers])
        for r in readers:
            inlets[r].append(f"in-{t}")
    classes = {}
    for i in range(n_streamlets):
        ns = f"gen.s{i}"
        attrs = {f"o{k}": AvroOutlet(name, schema(ns), key="id") for k, name in enumerate(outlets[i])}
        attrs.update({f"i{k}": AvroInlet(name, schema(f"gen.s{i}", evolved=bool(k % 2)))
                      for k, name in enumerate(inlets[i])})
        attrs["limit"] = IntegerParameter("limit", default=10)
        attrs["data"] = VolumeMount("data", "/mnt/data")
        attrs["create_logic"] = lambda self, ctx: None
        attrs["__module__"] = "generated"
        classes[f"s-{i}"] = type(f"S{i}", (Streamlet,), attrs)
    lines = ["app-id: generated", "streamlets:"]
    lines += [f"  s-{i}: generated.S{i}" for i in range(n_streamlets)]
    lines.append("topics:")
    for t in range(n_topics):
        consumers = ", ".join(f"s-{r}.{port}" for r, port in consumers_of[t])
        lines.append(f"  t-{t}: {{producers: [s-{producer_of[t]}.out-{t}], consumers: [{consumers}], partitions: 3}}")
    path = folder / "blueprint.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, classes


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streamlets", type=int, default=500)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the parser blueprint.loader uses
    with tempfile.TemporaryDirectory() as tmp:
        verify_s, baseline_s = [], []
        for rnd in range(args.rounds):
            # Fresh classes every round (untimed, as an import would be): schema fingerprints and
            # descriptors are cached on the classes, so reusing them would time a warm verify.
            path, classes = generate(args.streamlets, args.topics, Path(tmp))
            if rnd == 0:
                ports = sum(len(c.shape().inlets) + len(c.shape().outlets) for c in classes.values())
                print(f"application: {args.streamlets} streamlets, {args.topics} topics, {ports} ports, "
                      f"{path.stat().st_size:,} bytes of YAML")
            b, _ = timed(lambda: yaml.load(path.read_text(), Loader=loader))
            v, problems = timed(lambda: verify(load_blueprint(path), classes))
            errors = [p for p in problems if p.severity == "error"]
            if errors:  # a benchmark of a broken application measures nothing
                raise SystemExit(f"the generated application is not sound: {errors[:3]}")
            baseline_s.append(b)
            verify_s.append(v)
            print(f"  round {rnd + 1}: verify {v:6.3f} s   yaml.load {b:6.3f} s   "
                  f"({len(problems)} warnings)")
    v, b = statistics.median(verify_s), statistics.median(baseline_s)
    print(f"median: verify {v:.3f} s, baseline yaml.load (libyaml) {b:.3f} s, ratio verify/baseline {v / b:.1f}")
    print(f"goal: verify under {GOAL_SECONDS:.1f} s -> {'met' if v < GOAL_SECONDS else 'NOT met'} "
          f"({v / GOAL_SECONDS:.0%} of the budget)")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "verify.json").write_text(json.dumps({"streamlets": args.streamlets, "topics": args.topics,
                                                 "verify_seconds": verify_s, "baseline_seconds": baseline_s}, indent=2))
    return 0 if v < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
