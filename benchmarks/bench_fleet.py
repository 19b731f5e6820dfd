"""`gpu-triage fleet` beside DuckDB doing the same aggregation over the same files.

    python benchmarks/bench_fleet.py [--nodes 1250] [--days 30] [--keep DIR] [--repeat 3]

Generates an hourly history (``make_fleet_history.py``: one JSONL file per node, the
exporter's format), then times, alternately and as separate processes, ``gpu-triage fleet
DIR --format json`` and ``fleet_duckdb.py`` (the same per-node aggregation in DuckDB SQL,
fed to the same analysis). Prints the medians, their ratio (goal <= 1.5x), each side's
peak RSS (the command's, its worker processes included), the fleet command's peak RSS over
a tenth of the window for the same nodes (memory grows with nodes, not history), the load
average, and whether both reports are the same (exit 1 when not).
DuckDB comes from the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and the child's peak RSS in MiB (one child per call: wait4's rusage)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return elapsed, usage.ru_maxrss / 1024


def _comparable(path: Path) -> dict[str, Any]:
    rep: dict[str, Any] = json.loads(path.read_text())
    return rep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--keep", type=Path, help="history folder to reuse (generated if empty)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    d = a.keep or Path(tempfile.mkdtemp(prefix="fleet-"))
    d.mkdir(parents=True, exist_ok=True)
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
    files = list(d.glob("*.jsonl"))
    size = sum(p.stat().st_size for p in files) / 2**20
    out = Path(tempfile.mkdtemp(prefix="fleet-out-"))
    ours_json, duck_json = out / "fleet.json", out / "duckdb.json"
    inv = ["--inventory", str(d / "inventory.csv")]
    ours = [sys.executable, "-m", "gpu_triage", "fleet", str(d), "--format", "json"]
    ours += ["--out", str(ours_json), *inv]
    duck = [sys.executable, str(ROOT / "benchmarks/fleet_duckdb.py"), str(d), *inv]
    duck += ["--out", str(duck_json)]
    times: dict[str, list[float]] = {"fleet": [], "duckdb": []}
    rss: dict[str, float] = {"fleet": 0.0, "duckdb": 0.0}
    load_before = os.getloadavg()
    for _ in range(a.repeat):
        for name, cmd in (("fleet", ours), ("duckdb", duck)):
            wall, peak = _timed(cmd)
            times[name].append(wall)
            rss[name] = max(rss[name], peak)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"history: {len(files)} nodes x {a.days * 24} hourly runs, {size:,.0f} MiB of JSONL "
        f"({os.cpu_count()} CPUs)"
    )
    for name in ("fleet", "duckdb"):
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(
            f"  {name:7s} median {med[name]:6.2f} s  (runs: {runs})  peak RSS {rss[name]:.0f} MiB"
        )
    ratio = med["fleet"] / med["duckdb"]
    print(f"  ratio fleet / duckdb: {ratio:.2f}x (goal <= 1.5x)")
    print(
        "  load average before/after: "
        + " / ".join(f"{x[0]:.2f}" for x in (load_before, load_after))
    )
    # Memory bounded by nodes, not history: the same nodes over a tenth of the window.
    short = Path(tempfile.mkdtemp(prefix="fleet-short-"))
    short_days = max(1, a.days // 10)
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/make_fleet_history.py"),
            str(short),
            "--nodes",
            str(len(files)),
            "--days",
            str(short_days),
        ],
        check=True,
        capture_output=True,
    )
    short_cmd = [sys.executable, "-m", "gpu_triage", "fleet", str(short), "--format", "json"]
    short_cmd += ["--out", str(out / "short.json")]
    _, short_rss = _timed(short_cmd)
    print(
        f"  fleet peak RSS over {short_days} vs {a.days} days of the same nodes: "
        f"{short_rss:.0f} vs {rss['fleet']:.0f} MiB"
    )
    mine, theirs = _comparable(ours_json), _comparable(duck_json)
    same = mine == theirs
    print(f"  same report: {'yes' if same else 'NO'}")
    if not same:
        for key in mine:
            if mine.get(key) != theirs.get(key):
                print(f"    differs: {key}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
