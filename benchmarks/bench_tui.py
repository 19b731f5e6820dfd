"""How fast the TUI answers a responder.

Prints, measured in one run:
- time to first paint: ``gpu-triage tui --demo --symptom none`` started in a
  pseudo-terminal of 80x24, from launch to the moment its first ranked finding is on the
  terminal (its title in what the process wrote), beside a process that only imports
  textual.app (runs interleaved, medians; goals: 1 s or less, at most 2.5x), the
  package's bytecode compiled first as an install does (``startup_bytecode``);
- re-evaluation after a step: a recorded nvidia-smi -q output parsed into the facts,
  the rules evaluated again and every screen refreshed (goal: 100 ms or less).

    python benchmarks/bench_tui.py [--repeat 20] [--engine auto|reference]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import re
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from startup_bytecode import compile_package  # noqa: E402 - beside this file

H100_Q = (
    ROOT
    / "tests"
    / "data"
    / "real-outputs"
    / "nvidia-smi-q"
    / "h100-sxm-565-full-q-gpu0-clocks-event-reasons-replays7-thamada-nvsim.txt"
)

BARE = "import time, textual.app; print(f'{time.time():.6f}', flush=True)"

# What a terminal shows of a stream, roughly: its text without the escape sequences
# (CSI, OSC, DCS/APC/PM strings, charset designations and the two-byte ones).
ESCAPES = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[P_^X][^\x1b]*\x1b\\"
    rb"|[()*+][0-9A-Za-z]|[@-Z\\-_=>78])"
)


def _until_printed(argv: list[str]) -> float:
    """Seconds from launching ``argv`` to the moment it prints (its last stdout line, a
    wall-clock time): the process start is counted, its teardown after that is not."""
    start = time.time()
    r = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1]) - start


def _until_on_screen(argv: list[str], text: str, timeout_s: float = 30.0) -> float:
    """Seconds from launching ``argv`` in an 80x24 pseudo-terminal to the moment ``text``
    is in what it has written; then it is killed (its teardown is not counted). It is
    launched as the bare import is, by subprocess (no fork of this process, which holds
    the package by then: a fork copies its memory map, 2 ms more on the TUI's side)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    wanted, written = text.encode(), b""
    try:
        while time.perf_counter() - start < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the child ended
                break
            written += chunk
            if wanted in ESCAPES.sub(b"", written):
                return time.perf_counter() - start
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    tail = ESCAPES.sub(b"", written)[-600:].decode(errors="replace")
    raise RuntimeError(f"{text!r} never reached the screen; it showed:\n{tail}")


def top_finding_text() -> str:
    """The start of the demo incident's first ranked finding, as the findings list shows
    it (at most 20 characters, whole words: the list is narrow)."""
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import load_snapshot
    from gpu_triage.ops import findings_view

    doc = evaluate(load_snapshot(demo_snapshot_path()), load_rulebook(), engine="reference")
    title = findings_view.apply(doc.findings, findings_view.View())[0].title
    words, text = title.split(), ""
    for w in words:
        if len(text) + len(w) + 1 > 20:
            break
        text = f"{text} {w}".strip()
    return text or title[:20]


def first_paint(engine: str, repeat: int) -> tuple[list[float], list[float]]:
    """First paint, and beside it (runs interleaved) a process that only imports
    textual.app: the floor any Textual program pays. Both from launch, the teardown of
    neither counted."""
    text = top_finding_text()
    out, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            bare.append(_until_printed([sys.executable, "-c", BARE]))
            record = str(Path(tmp) / f"record-{i}.jsonl")
            argv = [sys.executable, "-m", "gpu_triage", "tui", "--demo", "--symptom", "none"]
            out.append(_until_on_screen([*argv, "--engine", engine, "--record", record], text))
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
    compiled = compile_package()
    paint, bare = first_paint(args.engine, max(5, args.repeat // 4))
    med = statistics.median
    print(f"engine: {args.engine}; {compiled}")
    print(
        "time to first paint (`gpu-triage tui --demo` in an 80x24 terminal, until its first "
        f"finding is on screen; {len(paint)} launches): median {med(paint):.3f} s, "
        f"max {max(paint):.3f} s  (goal <= 1 s); = {med(paint) / med(bare):.2f}x "
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
