"""How fast the TUI answers a responder.

Prints, measured in one run:
- time to first paint with a snapshot: a fresh Python process that imports the TUI,
  loads the rulebook and the demo incident, starts the app headless at 80x24 and has
  the ranked findings on screen (goal: 1 s or less);
- re-evaluation after a step: a recorded nvidia-smi -q output parsed into the facts,
  the rules evaluated again and every screen refreshed (goal: 100 ms or less).

    python benchmarks/bench_tui.py [--repeat 20] [--engine auto|reference]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

H100_Q = (
    ROOT
    / "tests"
    / "data"
    / "real-outputs"
    / "nvidia-smi-q"
    / "h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"
)

FIRST_PAINT = r"""
import time, sys
if sys.argv[1] != "reference":  # as `gpu-triage tui` does before it imports Textual
    from gpu_triage.engine.durable_worker import prespawn

    prespawn()
import asyncio, tempfile
from pathlib import Path
from gpu_triage.ops.session import TuiOptions
from gpu_triage.tui.app import build_app
from gpu_triage.tui.screens import FindingsScreen

async def main():
    d = Path(tempfile.mkdtemp())
    # symptom "none": the findings screen first, as before the "what are you seeing?" screen
    opts = TuiOptions(demo="incident", engine=sys.argv[1], record=d / "r.jsonl", symptom="none")
    app = build_app(opts)
    async with app.run_test(size=(80, 24)) as pilot:
        while True:
            s = app.screen
            if isinstance(s, FindingsScreen) and app.session.doc is not None and s._keys[1:]:
                await pilot.pause()
                break
            await asyncio.sleep(0.002)
        print(f"{time.time():.6f}", flush=True)  # painted: what follows is teardown

asyncio.run(main())
"""


BARE = "import time, textual.app; print(f'{time.time():.6f}', flush=True)"


def _until_printed(argv: list[str]) -> float:
    """Seconds from launching ``argv`` to the moment it prints (its last stdout line, a
    wall-clock time): the process start is counted, its teardown after that is not."""
    start = time.time()
    r = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1]) - start


def first_paint(engine: str, repeat: int) -> tuple[list[float], list[float]]:
    """First paint, and beside it (runs interleaved) a process that only imports
    textual.app: the floor any Textual program pays. Both from launch to the moment
    they report, the teardown of neither counted."""
    out, bare = [], []
    for _ in range(repeat):
        bare.append(_until_printed([sys.executable, "-c", BARE]))
        out.append(_until_printed([sys.executable, "-c", FIRST_PAINT, engine]))
    return out, bare


def reevaluate(engine: str, repeat: int) -> tuple[list[float], list[float]]:
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.io.commands import CommandResult
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import load_snapshot
    from gpu_triage.ops.record import IncidentRecord
    from gpu_triage.ops.session import TriageSession
    from gpu_triage.tui.app import TriageApp

    book = load_rulebook()
    text = H100_Q.read_text()
    engine_only: list[float] = []
    with_ui: list[float] = []

    async def main() -> None:
        d = Path(tempfile.mkdtemp())
        session = TriageSession(
            load_snapshot(demo_snapshot_path()),
            book,
            engine=engine,
            record=IncidentRecord(d / "r.jsonl"),
        )
        # The demo incident was recorded on another node, where steps may not run: the
        # bench takes it as this node's, to time the parse and re-evaluation of a step.
        session.steps_run_here = lambda: (True, "bench")  # type: ignore[method-assign]
        app = TriageApp(book=book, session=session, engine=engine)
        async with app.run_test(size=(80, 24)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            doc = session.doc
            assert doc is not None
            f = next(f for f in doc.findings if f.runbook and f.runbook[0].parser == "nvidia-smi-q")
            for _ in range(repeat):
                result = CommandResult(["nvidia-smi", "-q"], 0, text, duration_s=0.1)
                t0 = time.perf_counter()
                session.apply_output(f, 0, result)
                session.evaluate("bench")
                t1 = time.perf_counter()
                app.refresh_screens()
                await pilot.pause()
                t2 = time.perf_counter()
                engine_only.append(t1 - t0)
                with_ui.append(t2 - t0)

    asyncio.run(main())
    return engine_only, with_ui


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--engine", default="auto", choices=("auto", "reference", "durable"))
    args = ap.parse_args()
    paint, bare = first_paint(args.engine, max(5, args.repeat // 4))
    med = statistics.median
    print(f"engine: {args.engine}")
    print(
        f"time to first paint (demo snapshot, 80x24, fresh process): median {med(paint):.3f} s, "
        f"max {max(paint):.3f} s  (goal <= 1 s); = {med(paint) / med(bare):.1f}x "
        f"`python -c 'import textual.app'` ({med(bare):.3f} s, interleaved; goal <= 2.5x); "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    eng, ui = reevaluate(args.engine, args.repeat)
    print(
        f"re-evaluation after a step (parse + update + evaluate): median {med(eng) * 1000:.1f} ms, "
        f"max {max(eng) * 1000:.1f} ms  (goal <= 100 ms)"
    )
    print(
        f"  ... and refreshed on screen: median {med(ui) * 1000:.1f} ms, "
        f"max {max(ui) * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
