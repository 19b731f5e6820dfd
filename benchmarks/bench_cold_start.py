"""Unattended cold start, two figures measured in one run:

* ``gpu-triage run --snapshot S --format json`` from launch to exit, beside ``python -c
  pass`` (runs interleaved, medians; goal: at most 8x), with the caches warm (the first
  run of a new rulebook compiles it once, and builds the models' validation schemas once;
  then every run reads them) and with them off, the package's bytecode compiled first as
  an install does (``startup_bytecode``);
* from launching ``gpu-triage run`` to the first collector starting (goal <= 250 ms),
  and proof that Textual is never imported on that path. The child runs the CLI's own
  run path with a progress hook that reports the moment the first collector starts.

    python benchmarks/bench_cold_start.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from startup_bytecode import compile_package  # beside this file (run as a script)

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "scenarios" / "xid-storm-contained-ecc.json"

CHILD = r"""
import os, sys, tempfile, time
from gpu_triage import cli
from gpu_triage.collectors import runner

real = runner.collect_snapshot

def first_start(collectors, ctx, progress=None, **kw):
    def hook(name, state):
        if state is None and not hasattr(hook, "done"):
            hook.done = True
            print(f"{time.time():.6f}", flush=True)
            bad = [m for m in sys.modules if m.split('.')[0] in ("textual", "rich")]
            print("textual-imported" if bad else "no-textual", flush=True)
    return real(collectors, ctx, progress=hook, **kw)

runner.collect_snapshot = first_start
cli.main(["run", "--window", "0.1", "--out", os.path.join(tempfile.mkdtemp(), "findings.json")])
"""


def wall(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False, env=env)
    return time.perf_counter() - t


def snapshot_run(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GPU_TRIAGE_CACHE_DIR": str(Path(tmp) / "cache")}
        out = str(Path(tmp) / "findings.json")
        run = [sys.executable, "-m", "gpu_triage", "run", "--snapshot", str(SNAPSHOT)]
        run += ["--format", "json", "--out", out]
        bare = [sys.executable, "-c", "pass"]
        wall(run, env)  # fills the caches
        off = {**env, "GPU_TRIAGE_CACHE_DIR": "off"}
        reference = [*run, "--engine", "reference"]
        t_pass, t_run, t_cold, t_ref = [], [], [], []
        for _ in range(repeat):
            t_pass.append(wall(bare, env))
            t_run.append(wall(run, env))
            t_cold.append(wall(run, off))
            t_ref.append(wall(reference, env))
    med = statistics.median
    p, r, c, f = med(t_pass), med(t_run), med(t_cold), med(t_ref)
    print(
        f"run --snapshot S --format json: median {r * 1000:.0f} ms = {r / p:.1f}x python -c pass "
        f"({p * 1000:.0f} ms) (goal <= 8x); without the caches {c * 1000:.0f} ms "
        f"= {c / p:.1f}x; with --engine reference (no durable_rules worker) {f * 1000:.0f} ms "
        f"= {f / p:.1f}x; {repeat} runs each, interleaved; load average {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    print(compile_package())
    snapshot_run(a.repeat)
    delays, flags = [], set()
    for _ in range(a.repeat):
        t0 = time.time()
        out = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, check=False
        ).stdout.split()
        delays.append(float(out[0]) - t0)
        flags.add(out[1])
    print(
        f"cold start to first collector: median {statistics.median(delays) * 1000:.0f} ms, "
        f"max {max(delays) * 1000:.0f} ms over {a.repeat} runs (goal <= 250 ms); "
        f"textual imported: {'yes' if 'textual-imported' in flags else 'no'}"
    )


if __name__ == "__main__":
    main()
