"""Fault soak: `gpu-triage run --interval` beside commands that misbehave.

Fakes placed first on the collectors' search path (``--command-path``), collector and
command timeouts set short:

* ``journalctl`` and ``dmesg``: start a grandchild that calls ``setsid`` and keeps
  stdout open, then hang (the kernel-log collector must time out, have both killed,
  and the run go on);
* ``kubectl``: prints without end (``yes``): the runner's output cap must stop it;
* ``scontrol``: ignores SIGTERM and forks children that ignore it too.

After each JSONL line the script samples the loop process from outside (/proc): RSS,
open fds, threads, and its live and zombie descendants. It prints the medians of the
first and the last 10 iterations (of each half, in a run of fewer than 20), checks
that every JSONL line parses, that SIGTERM ends the loop within 2 s, and that no
process of the fakes outlives it.

    python benchmarks/bench_fault_soak.py                      # 100 iterations
    python benchmarks/bench_fault_soak.py --iterations 10      # what the test suite runs

Exit status 1 when a figure is not flat or a check fails (the report says which).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Allowed growth, last 10 iterations against the first 10 (medians).
RSS_GROWTH_MIB = 24.0
FD_GROWTH = 2
THREAD_GROWTH = 2
STOP_WITHIN_S = 2.0


def fakes(folder: Path, nap: str) -> None:
    """Write the misbehaving commands; ``nap`` makes their sleeps recognisable."""
    hang = f"#!/bin/sh\nsetsid sleep {nap} &\necho starting\nexec sleep {nap}\n"
    scripts = {
        "journalctl": hang,
        "dmesg": hang,
        "kubectl": "#!/bin/sh\nexec yes 'NAME STATUS ROLES AGE VERSION'\n",
        "scontrol": "#!/bin/sh\ntrap '' TERM\ni=0\nwhile [ $i -lt 10 ]; do\n"
        f"  (trap '' TERM; exec sleep {nap}) &\n  i=$((i+1))\ndone\nexec sleep {nap}\n",
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[1])


def descendants(root: int) -> tuple[int, int]:
    """(live, zombie) processes below ``root``."""
    parent: dict[int, int] = {}
    state: dict[int, str] = {}
    for e in os.listdir("/proc"):
        if e.isdigit() and (st := _stat(int(e))) is not None:
            state[int(e)], parent[int(e)] = st
    below: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in below}
        below |= frontier
    zombies = sum(state.get(p) == "Z" for p in below)
    return len(below) - zombies, zombies


def open_fds(pid: int, reads: int = 5, gap_s: float = 0.02) -> int:
    """The fewest descriptors open over a few reads: a run's pipes to a command that is
    still being reaped are transient, a leaked descriptor stays in every read."""
    fewest = len(os.listdir(f"/proc/{pid}/fd"))
    for _ in range(reads - 1):
        time.sleep(gap_s)
        fewest = min(fewest, len(os.listdir(f"/proc/{pid}/fd")))
    return fewest


def sample(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    live, zombies = descendants(pid)
    return {
        "rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
        "fds": open_fds(pid),
        "threads": int(fields["Threads"]),
        "children": live,
        "zombies": zombies,
    }


def leftovers(nap: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if nap in line and " Z" not in line]


def soak(iterations: int, interval: float, workdir: Path) -> tuple[dict[str, object], list[str]]:
    nap = f"3000.{os.getpid()}"
    fakes(workdir / "bin", nap)
    out = workdir / "loop.jsonl"
    argv = [
        *(sys.executable, "-m", "gpu_triage", "run", "--format", "jsonl", "--out", str(out)),
        *("--interval", str(interval), "--window", "0.05", "--engine", "reference"),
        *("--command-path", str(workdir / "bin"), "--command-timeout", "0.4"),
        *("--collector-timeout", "1.0"),
    ]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "loop ready" in line:
            break
    else:
        return {"error": f"the loop never started (exit {proc.wait()})"}, ["no start"]
    samples: list[dict[str, float]] = []
    seen = 0
    start = time.monotonic()
    deadline = start + 30 + iterations * 10
    while seen < iterations and time.monotonic() < deadline and proc.poll() is None:
        lines = out.read_text().count("\n") if out.exists() else 0
        if lines > seen:
            seen = lines
            samples.append(sample(proc.pid))
        time.sleep(0.02)
    wall = time.monotonic() - start
    # stop it mid-run, while the fakes hang: SIGTERM must end it within 2 s
    time.sleep(interval / 2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    stop_s = time.monotonic() - t0
    time.sleep(0.2)
    left = leftovers(nap)

    problems: list[str] = []
    text = out.read_text() if out.exists() else ""
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            problems.append(f"JSONL line {n} is not valid JSON")
    if len(samples) < min(iterations, 10):
        problems.append(f"only {len(samples)} of {iterations} iterations ran in {wall:.0f} s")
    window = max(1, min(10, len(samples) // 2))  # 10; halves of a short run
    first, last = samples[:window], samples[-window:]

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    figures: dict[str, object] = {
        "iterations": len(samples),
        "wall_s": round(wall, 1),
        "s_per_iteration": round(wall / max(len(samples), 1), 2),
        "stop_after_sigterm_s": round(stop_s, 2),
        "exit_code": code,
        "exit_codes_seen": sorted({r.get("exit") for r in records}),
        "leftover_processes": len(left),
    }
    for key in ("rss_mib", "fds", "threads", "children", "zombies"):
        figures[f"{key}_first10"] = round(med(first, key), 2)
        figures[f"{key}_last10"] = round(med(last, key), 2)
    if med(last, "rss_mib") - med(first, "rss_mib") > RSS_GROWTH_MIB:
        problems.append("RSS grew")
    if med(last, "fds") - med(first, "fds") > FD_GROWTH:
        problems.append("open fds grew")
    if med(last, "threads") - med(first, "threads") > THREAD_GROWTH:
        problems.append("threads grew")
    if med(last, "children") > 0 or med(last, "zombies") > 0:
        problems.append("child processes left between iterations")
    if stop_s > STOP_WITHIN_S:
        problems.append(f"SIGTERM took {stop_s:.2f} s (> {STOP_WITHIN_S} s)")
    if code not in (0, 1, 2, 3):
        problems.append(f"exit code {code} after SIGTERM")
    if left:
        problems.append(f"{len(left)} fake processes outlived the loop: {left[:3]}")
    if not records or any(r.get("exit") not in (0, 1, 2, 3) for r in records):
        problems.append("a JSONL record without a valid exit code")
    return figures, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpu-triage-soak-") as tmp:
        figures, problems = soak(a.iterations, a.interval, Path(tmp))
    width = max(len(k) for k in figures)
    for k, v in figures.items():
        print(f"{k:<{width}}  {v}")
    print("OK: flat, every line valid, stopped in time" if not problems else "FAIL:")
    for p in problems:
        print(f"  - {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
