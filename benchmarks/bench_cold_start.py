"""Unattended cold start: from launching `gpu-triage run` to the first collector starting
(goal <= 250 ms), and proof that Textual is never imported on that path.

The child runs the CLI's own run path (rulebook loaded first, as `gpu-triage run` does)
with a progress hook that reports the moment the first collector starts.

    python benchmarks/bench_cold_start.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
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
