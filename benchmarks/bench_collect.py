"""Collection cost beyond the sampling window, for an 8-GPU node.

NVML is the recorded-profile fake (8 H100 SXM, tests/fakes/fake_nvml.py); the host
collector reads this machine's real /proc and /sys; the kernel log is a recorded file.
Prints wall time beyond the window and CPU time of the whole collection.
Goals: <= 150 ms CPU and <= 0.5 s wall beyond the window.

    python benchmarks/bench_collect.py [--window 1.0] [--runs 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_triage.collectors.base import CollectContext  # noqa: E402
from gpu_triage.collectors.host import HostCollector  # noqa: E402
from gpu_triage.collectors.kernel_log import KernelLogCollector  # noqa: E402
from gpu_triage.collectors.nvml import NvmlCollector  # noqa: E402
from gpu_triage.collectors.runner import collect_snapshot  # noqa: E402
from tests.fakes.fake_nvml import FakeNvml, h100_node  # noqa: E402


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    log = ROOT / "tests/data/real-outputs/xid/xid-74-45-154-a100-talos-vllm40652.log"
    walls, cpus = [], []
    for _ in range(args.runs):
        collectors = [NvmlCollector(FakeNvml(h100_node(8))), KernelLogCollector(), HostCollector()]
        ctx = CollectContext(window_s=args.window, kernel_log_file=log)
        c0, t0 = cpu_s(), time.perf_counter()
        snap = collect_snapshot(collectors, ctx)
        walls.append(time.perf_counter() - t0 - args.window)
        cpus.append(cpu_s() - c0)
        assert len(snap.facts.gpus) == 8, snap.collectors
    print(
        f"8-GPU node, window {args.window:g} s, {args.runs} runs "
        f"(fake NVML fed by recorded profiles, real /proc and /sys)"
    )
    print(
        f"wall beyond window: median {statistics.median(walls) * 1000:.0f} ms, "
        f"max {max(walls) * 1000:.0f} ms   (goal <= 500 ms)"
    )
    print(
        f"CPU time:           median {statistics.median(cpus) * 1000:.0f} ms, "
        f"max {max(cpus) * 1000:.0f} ms   (goal <= 150 ms)"
    )


if __name__ == "__main__":
    main()
