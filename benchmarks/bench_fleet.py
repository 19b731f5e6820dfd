"""The fleet command over a generated 1,250-node, 30-day hourly history (goal <= 30 s).

python benchmarks/bench_fleet.py [--nodes 1250] [--days 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--keep", type=Path)
    a = ap.parse_args()
    d = a.keep or Path(tempfile.mkdtemp(prefix="fleet-"))
    if not any(d.glob("*.jsonl")):
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks/make_fleet_history.py"),
                str(d),
                "--nodes",
                str(a.nodes),
                "--days",
                str(a.days),
            ],
            check=True,
        )
        print(f"generated in {time.perf_counter() - t:.1f} s")
    size = sum(p.stat().st_size for p in d.glob("*.jsonl")) / 2**20
    t = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "fleet",
            str(d),
            "--inventory",
            str(d / "inventory.csv"),
            "--format",
            "markdown",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - t
    print(
        f"fleet over {a.nodes} nodes x {a.days * 24} runs ({size:.0f} MiB): {elapsed:.1f} s "
        "(goal <= 30 s)"
    )
    print("\n".join(out.stdout.splitlines()[:40]))


if __name__ == "__main__":
    main()
