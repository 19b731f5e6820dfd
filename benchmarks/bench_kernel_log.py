"""Kernel log costs, each beside its baseline measured in the same run.

1. The parser on a realistic 1M-line journal (``make_kernel_log.py``: node chatter with an
   event starting every ~100 lines, 2-3% of the lines) against one compiled regex pass
   over the same text that finds the event heads (goal: at least 1/3 of its speed).
2. 100,000 identical Xid 79 lines (goal: under 2 s).
3. ``gpu-triage run --kernel-log`` on a 500 MB, three-day log ending now (generated under
   /tmp, deleted after): wall time, peak RSS (goal < 300 MB), the kernel-log collector
   within its budget, and the Xids of the last two hours (the default window) all found
   (``collect`` of the same file, counted against the generator's lines).

    python benchmarks/bench_kernel_log.py [--lines 1000000] [--big-mb 500] [--skip-big]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_triage.collectors.parsers.kernel_log import parse_kernel_log  # noqa: E402

# One pass, one compiled regex, the heads of the events the parser reports.
BASELINE = re.compile(
    r"NVRM: Xid \((PCI:[0-9a-fA-F:]+)\): (\d+)|SXid|AER|fallen off the bus|Out of memory|"
    r"Killed process|NVLink"
)
WINDOW_S = 2 * 3600  # the collector's default ctx.since_s


def make(path: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/make_kernel_log.py"), str(path), *args],
        check=True,
    )


def best(fn: object, runs: int) -> tuple[float, float]:
    """Wall and CPU seconds, the fastest of ``runs`` each: on a shared machine the least
    disturbed run, and the CPU time, which the other processes on it disturb less."""
    walls, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()  # type: ignore[operator]
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def parser_vs_regex(tmp: Path, lines: int) -> None:
    path = tmp / "realistic.log"
    make(path, "--lines", str(lines))
    text = path.read_text(encoding="utf-8")
    mb = len(text.encode()) / 1e6
    (base, base_cpu) = best(lambda: sum(1 for _ in BASELINE.finditer(text)), 3)
    (parse, parse_cpu) = best(lambda: parse_kernel_log(text), 3)
    log = parse_kernel_log(text)
    counts = ", ".join(f"{n} {len(getattr(log, n))}" for n in log.event_lists())
    print(f"1. realistic journal, {lines:,} lines, {mb:.0f} MB ({counts})")
    print(f"   one regex pass  {base:6.2f} s  {mb / base:6.0f} MB/s   CPU {base_cpu:6.2f} s")
    print(f"   parser          {parse:6.2f} s  {mb / parse:6.0f} MB/s   CPU {parse_cpu:6.2f} s")
    print(
        f"   parser / regex speed: {base / parse:.2f} wall, {base_cpu / parse_cpu:.2f} CPU   "
        f"(goal >= 0.33); load average {os.getloadavg()[0]:.2f}"
    )


def storm(tmp: Path) -> None:
    path = tmp / "storm.log"
    make(path, "--repeat-xid79", "100000", "--lines", "100000")
    text = path.read_text(encoding="utf-8")
    took, cpu = best(lambda: parse_kernel_log(text), 3)
    log = parse_kernel_log(text)
    assert len(log.xids) == 100_000
    assert [x.line for x in log.xids] == list(range(1, 100_001))
    print(
        f"2. 100,000 identical Xid 79 lines: {took:.2f} s wall, {cpu:.2f} s CPU   (goal < 2 s); "
        f"load average {os.getloadavg()[0]:.2f}"
    )


# Runs the command from a small process, so the child's peak RSS is its own (a child forked
# from this one would start with this process's pages, the texts of parts 1 and 2).
_WRAP = (
    "import os, resource, subprocess, sys; "
    "rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'wb')).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)"
)


def _rss_run(argv: list[str], out: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit code of one command, output to ``out``."""
    t = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", _WRAP, str(out), *argv], capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - t
    kib, rc = res.stdout.split()
    return wall, int(kib) / 1024, int(rc)


def big_log(tmp: Path, mb: int) -> None:
    path = tmp / "big.log"
    lines = mb * 1_000_000 // 131  # the generator's journal lines average ~131 bytes
    end = datetime.now(UTC)
    t = time.perf_counter()
    make(path, "--lines", str(lines), "--end", end.isoformat())
    size = path.stat().st_size / 1e6
    took = time.perf_counter() - t
    print(f"3. {size:.0f} MB kernel log, 72 h ending now (generated in {took:.0f} s)")
    # the Xids of the window (as of the collection below), from the generator's own lines
    since = datetime.now(UTC) + timedelta(seconds=5) - timedelta(seconds=WINDOW_S)
    want = 0
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - 64 * 2**20))
        for raw in fh:
            if b"NVRM: Xid (" in raw:
                try:
                    when = datetime.fromisoformat(raw.split(b" ", 1)[0].decode())
                except ValueError:
                    continue
                want += when >= since
    cli = [sys.executable, "-m", "gpu_triage"]
    doc = tmp / "findings.json"
    wall, rss, rc = _rss_run(
        [*cli, "run", "--kernel-log", str(path), "--format", "json", "--engine", "reference"],
        doc,
    )
    statuses = {c["name"]: c for c in json.loads(doc.read_text())["collectors"]}
    kl = statuses["kernel_log"]
    print(
        f"   run --kernel-log: {wall:.1f} s wall, peak RSS {rss:.0f} MB (goal < 300 MB), "
        f"exit {rc}; kernel_log collector {kl['state']} in {kl['duration_s']:.1f} s "
        f"(budget 15 s beyond the window)"
    )
    snap = tmp / "snap.json"
    cwall, crss, _ = _rss_run(
        [*cli, "collect", "--kernel-log", str(path), "--only", "kernel_log"], snap
    )
    facts = json.loads(snap.read_text())["facts"]
    got = sum(1 for x in facts["xids"] if x.get("age_s") is not None and x["age_s"] <= WINDOW_S)
    print(
        f"   collect --kernel-log: {cwall:.1f} s, peak RSS {crss:.0f} MB; Xids of the last 2 h "
        f"found {got} of {want}; {len(facts['xids'])} Xids in the part read"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--big-mb", type=int, default=500)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--only-big", action="store_true")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-kernel-log-") as d:
        tmp = Path(d)
        if not a.only_big:
            parser_vs_regex(tmp, a.lines)
            storm(tmp)
        if not a.skip_big:
            big_log(tmp, a.big_mb)


if __name__ == "__main__":
    main()
