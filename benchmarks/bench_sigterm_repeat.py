"""The loop's SIGTERM test, many times in a row, beside busy loops: it must never fail.

Runs ``tests/unattended/test_run.py::test_loop_keeps_schedule_and_stops_on_sigterm``
``--runs`` times (default 50) while ``--busy`` processes (default 2) spin on the CPUs, so
the loop starts slowly and runs late. The test waits for the loop to say it is ready and
for its runs to appear; nothing in it depends on how fast the machine is.

    python benchmarks/bench_sigterm_repeat.py            # 50 runs beside 2 busy loops
    python benchmarks/bench_sigterm_repeat.py --runs 5

Prints each failure, the pass count and the time per run; exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUSY = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--busy", type=int, default=2)
    a = ap.parse_args()
    from tests.unattended.test_run import test_loop_keeps_schedule_and_stops_on_sigterm as test

    limit = 60 + a.runs * 30  # the busy loops end by themselves whatever happens here
    busy = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(limit=limit)]) for _ in range(a.busy)
    ]
    failures: list[str] = []
    times: list[float] = []
    try:
        for i in range(a.runs):
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="gpu-triage-sigterm-") as tmp:
                try:
                    test(Path(tmp))
                except Exception:  # every failure is reported, the runs go on
                    failures.append(f"run {i + 1}: {traceback.format_exc(limit=2)}")
            times.append(time.monotonic() - start)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for f in failures:
        print(f)
    print(f"{a.runs - len(failures)}/{a.runs} passed beside {a.busy} busy loops")
    print(
        f"seconds per run: median {statistics.median(times):.2f}, "
        f"max {max(times):.2f}, total {sum(times):.0f}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
