"""Unattended loop mode over many runs: memory (max RSS of this process and of the
durable_rules worker) and time per run, printed every N runs.

    python benchmarks/bench_loop.py [--runs 5000] [--engine auto]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_triage.engine.compiler import load_rulebook  # noqa: E402
from gpu_triage.model.snapshot import load_snapshot  # noqa: E402
from gpu_triage.ops.history import History  # noqa: E402
from gpu_triage.ops.unattended import RunSpec, run_loop  # noqa: E402


def worker_rss_kib() -> int:
    from gpu_triage.engine import durable_backend

    for backend in durable_backend._SHARED.values():
        proc = backend._proc
        if proc is not None:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--engine", default="auto")
    a = ap.parse_args()
    snap = load_snapshot(ROOT / "gpu_triage/data/demo-incident.json")
    out = Path(tempfile.mkdtemp()) / "gpu_triage.prom"
    spec = RunSpec(
        load_rulebook(),
        a.engine,
        "prometheus",
        out,
        "info",
        lambda: (snap, "bench"),
        History.load(out.with_suffix(".state")),
    )
    step = max(1, a.runs // 10)
    t0 = time.perf_counter()
    count = [0]

    def sample(_doc: object) -> None:
        count[0] += 1
        if count[0] % step == 0:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(
                f"run {count[0]:>6}: max RSS {rss / 1024:6.1f} MiB, worker RSS "
                f"{worker_rss_kib() / 1024:6.1f} MiB, "
                f"{(time.perf_counter() - t0) / count[0] * 1000:.1f} ms/run"
            )

    run_loop(spec, 1e-6, max_runs=a.runs, on_run=sample)


if __name__ == "__main__":
    main()
