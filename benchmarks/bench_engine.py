"""Evaluation time of the packaged rulebook, per evaluator.

Prints, measured in one run: one 8-GPU snapshot (median of repeated evaluations), and a
fleet of 1,250 generated 8-GPU snapshots (10,000 GPUs), for the reference evaluator and
the durable_rules backend, and their ratio.

    python benchmarks/bench_engine.py [--nodes 1250] [--repeat 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_triage.engine.backend import Backend, ReferenceBackend  # noqa: E402
from gpu_triage.engine.compiler import load_rulebook  # noqa: E402
from gpu_triage.engine.durable_backend import shared_backend  # noqa: E402
from gpu_triage.engine.evaluate import decide  # noqa: E402
from gpu_triage.engine.inputs import EvalInput  # noqa: E402
from gpu_triage.model.facts import XidEvent  # noqa: E402
from gpu_triage.model.snapshot import load_snapshot  # noqa: E402


def fleet(n: int, seed: int = 7) -> list[EvalInput]:
    """n snapshots derived from the demo incident with randomised GPU and host values."""
    rnd = random.Random(seed)
    base = load_snapshot(ROOT / "gpu_triage" / "data" / "demo-incident.json")
    out = []
    for node in range(n):
        facts = base.facts.model_copy(deep=True)
        assert facts.host is not None
        facts.host.cpu_iowait_pct = rnd.choice([0.5, 2.0, 30.0])
        facts.host.busiest_core_busy_pct = rnd.uniform(10, 100)
        for g in facts.gpus:
            g.utilization_gpu_pct = rnd.uniform(0, 100)
            g.power_draw_w = rnd.uniform(50, 700)
            g.pcie_link_width = rnd.choice([16, 16, 16, 8])
            g.process_count = rnd.choice([1, 1, 1, 2])
            g.throttle_hw_thermal_slowdown = rnd.random() < 0.05
        facts.xids = [
            XidEvent(code=rnd.choice([13, 31, 79, 94]), pci_bus_id=g.pci_bus_id, line=i)
            for i, g in enumerate(facts.gpus)
            if rnd.random() < 0.1
        ]
        out.append(EvalInput(facts, {}, hostname=f"node{node:04d}"))
    return out


def time_one(inp: EvalInput, book, backend: Backend, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        decide(inp, book, backend)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_fleet(inputs: list[EvalInput], book, backend: Backend) -> tuple[float, int]:
    t = time.perf_counter()
    fired = 0
    for inp in inputs:
        decisions, _ = decide(inp, book, backend)
        fired += len(decisions)
    return time.perf_counter() - t, fired


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    book = load_rulebook()
    demo = EvalInput.from_snapshot(load_snapshot(ROOT / "gpu_triage/data/demo-incident.json"))
    inputs = fleet(args.nodes)
    backends: list[Backend] = [ReferenceBackend(), shared_backend(book)]
    results = {}
    print(f"rulebook: {len(book.rules)} rules; fleet: {args.nodes} snapshots x 8 GPUs")
    for b in backends:
        one = time_one(demo, book, b, args.repeat)
        total, fired = time_fleet(inputs, book, b)
        results[b.name] = (one, total, fired)
        print(
            f"{b.name:<10} one snapshot: {one * 1000:7.2f} ms   fleet: {total:6.2f} s "
            f"({total / args.nodes * 1000:.2f} ms/snapshot, {fired} findings)"
        )
    (r1, rt, rf), (d1, dt, df) = results["reference"], results["durable"]
    print(
        f"ratio durable/reference: one snapshot {d1 / r1:.1f}x, fleet {dt / rt:.1f}x; "
        f"same findings: {rf == df}"
    )
    print("targets: <= 10 ms per snapshot, fleet <= 5 s")


if __name__ == "__main__":
    main()
