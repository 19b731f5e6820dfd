"""Paste intake (`collect --from-text` with no kind): time per MB as the paste grows.

Three shapes, each at 1x, 4x and 16x: a terminal session (every recorded output after
a prompt), the same outputs concatenated without prompts (cut by content), and one
large kernel log. The ratio column is seconds per MB at that size over seconds per MB
at 1x, measured in the same run: near 1.0 means linear.

    python benchmarks/bench_intake.py [--base-mb 1.0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_triage.collectors.from_text import intake_paste  # noqa: E402

DATA = ROOT / "tests" / "data"


def _outputs() -> list[tuple[str, str]]:
    files = sorted(
        f
        for base in ("real-outputs", "hand-written")
        for f in (DATA / base).rglob("*")
        if f.is_file()
    )
    return [(f.name, f.read_text(errors="replace")) for f in files if f.suffix != ".yaml"]


def _grow(unit: str, mb: float) -> str:
    reps = max(1, int(mb * 1024 * 1024 / max(1, len(unit))))
    return unit * reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-mb", type=float, default=1.0)
    args = ap.parse_args()
    outs = _outputs()
    session = "".join(f"root@node:~# cat {name}\n{text.rstrip()}\n" for name, text in outs)
    concat = "".join(text.rstrip() + "\n\n" for _, text in outs)
    log = "".join(text for name, text in outs if name.endswith(".log"))
    shapes = {"session": session, "no prompts": concat, "kernel log": log}
    print(f"{'shape':<12} {'size':>6} {'MB':>7} {'s':>7} {'s/MB':>7} {'ratio':>6} pieces")
    for shape, unit in shapes.items():
        base: float | None = None
        for factor in (1, 4, 16):
            text = _grow(unit, args.base_mb * factor)
            mb = len(text) / (1024 * 1024)
            start = time.perf_counter()
            intake = intake_paste(text, "bench")
            secs = time.perf_counter() - start
            per_mb = secs / mb
            base = base or per_mb
            print(
                f"{shape:<12} {factor:>5}x {mb:7.2f} {secs:7.2f} {per_mb:7.2f} "
                f"{per_mb / base:6.2f} {len(intake.pieces)}"
            )


if __name__ == "__main__":
    main()
