# ruff: noqa: C408 - keyword dicts read like the rule documents they stand for
"""Mutation fuzzing of every input gpu-triage reads from outside.

Targets: the `when` expression parser and compiler, the rule loader (YAML), the snapshot
loader (JSON), and every registered text parser (nvidia-smi, kernel log, lspci, mpstat,
iostat, ...). Seeds are the recorded real outputs and the shipped rules and snapshots;
each input is a seeded mutation (bit flips, truncation, splices, duplicated or huge
lines, binary junk, other encodings). A failure is any exception other than the
documented clear errors (ParseError, ExprError, SnapshotError, RulebookError
diagnostics), or an input that takes longer than the time limit.

    python benchmarks/fuzz.py [--inputs 1000000] [--workers 2] [--seed 1]

Prints inputs tried and failures per target; failing inputs are saved under
benchmarks/fuzz-failures/ (not committed) for reproduction.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TIME_LIMIT_S = 2.0
OUT = ROOT / "benchmarks" / "fuzz-failures"


def seeds_for(target: str) -> list[bytes]:
    real = ROOT / "tests" / "data" / "real-outputs"
    hand = ROOT / "tests" / "data" / "hand-written"
    by_parser = {
        "nvidia-smi": ["nvidia-smi"],
        "nvidia-smi-q": ["nvidia-smi-q"],
        "nvidia-smi-query-gpu": ["query-gpu"],
        "nvidia-smi-compute-apps": [],
        "nvidia-smi-nvlink": ["nvlink"],
        "nvidia-smi-topo": ["topo"],
        "lspci": ["lspci"],
        "kernel-log": ["xid", "sxid", "aer", "oom"],
        "mpstat": ["mpstat"],
        "iostat": ["iostat"],
        "meminfo": ["proc"],
        "ibstat": ["ib"],
        "iperf3": ["iperf3"],
        "fio": ["fio"],
        "kubectl-describe-pod": ["k8s"],
        "kubectl-describe-node": ["k8s"],
        "kubectl-events": ["k8s"],
        "ibv-devinfo": ["ib"],
        "proc-stat": ["proc"],
        "proc-pressure": ["proc"],
        "nvidia-smi-topo-p2p": ["topo"],
        "error-text": [],
    }
    # variants of one parser (nvidia-smi-topo-p2p-r, proc-pressure-io) share its seeds
    for name in list(by_parser):
        if target.startswith(name + "-") and target not in by_parser:
            by_parser[target] = by_parser[name]
    if target == "expression":
        import yaml

        from gpu_triage.engine.loader import builtin_texts

        exprs = []
        for _, text in builtin_texts():
            for doc in yaml.safe_load_all(text):
                if isinstance(doc, dict) and "when" in doc:
                    exprs.append(str(doc["when"]).encode())
        return exprs
    if target == "rule-yaml":
        from gpu_triage.engine.loader import builtin_texts

        return [t.encode() for _, t in builtin_texts()][:12]
    if target == "snapshot":
        files = sorted((ROOT / "tests" / "data" / "snapshots").glob("*.json"))
        return [f.read_bytes() for f in files]
    if target == "error-text":  # what responders paste: the incidents' files
        incidents = ROOT / "tests" / "data" / "incidents"
        return [f.read_bytes() for f in sorted(incidents.glob("*/*")) if f.suffix != ".yaml"]
    if target == "compute-apps":
        return [b"pid, process_name, used_gpu_memory [MiB]\n2871, python, 70000 MiB\n"]
    if target == "intake":  # every format, and sessions of them with prompts
        files = sorted(f for base in (real, hand) for f in base.rglob("*") if f.is_file())
        seeds = [f.read_bytes() for f in files if f.suffix != ".yaml"]
        sessions = [
            b"".join(
                b"root@node:~# cat " + f.name.encode() + b"\n" + f.read_bytes() for f in files[i::7]
            )
            for i in range(7)
        ]
        return seeds + sessions
    dirs = by_parser.get(target, [])
    found = [
        f.read_bytes()
        for d in dirs
        for base in (real, hand)
        if (base / d).is_dir()
        for f in sorted((base / d).iterdir())
        if f.is_file()
    ]
    return found or [b"\n"]


def mutate(data: bytes, rnd: random.Random, pool: list[bytes]) -> bytes:
    ops = rnd.randint(1, 4)
    b = bytearray(data)
    for _ in range(ops):
        choice = rnd.randrange(11)
        n = len(b)
        if choice == 0 and n:  # flip bits
            for _ in range(rnd.randint(1, 8)):
                b[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        elif choice == 1 and n:  # truncate
            del b[rnd.randrange(n) :]
        elif choice == 2:  # splice another seed in
            other = rnd.choice(pool)
            if other:
                i, j = sorted((rnd.randrange(len(other)), rnd.randrange(len(other))))
                b[rnd.randrange(n + 1) : 0] = other[i:j]
        elif choice == 3 and n:  # duplicate a line many times
            lines = bytes(b).split(b"\n")
            k = rnd.randrange(len(lines))
            lines[k:k] = [lines[k]] * rnd.randint(2, 200)
            b = bytearray(b"\n".join(lines))
        elif choice == 4:  # a huge line
            b[rnd.randrange(n + 1) : 0] = bytes([rnd.randrange(32, 127)]) * rnd.randint(
                1000, 200_000
            )
        elif choice == 5:  # binary junk
            b[rnd.randrange(n + 1) : 0] = rnd.randbytes(rnd.randint(1, 256))
        elif choice == 6:  # another encoding
            with contextlib.suppress(UnicodeError, LookupError):
                text = bytes(b).decode("utf-8", "replace")
                b = bytearray(text.encode(rnd.choice(["utf-16", "latin-1", "utf-32"]), "replace"))
        elif choice == 7 and n:  # delete a chunk
            i = rnd.randrange(n)
            del b[i : i + rnd.randint(1, 64)]
        elif choice == 8:  # interesting tokens
            tok = rnd.choice(
                [
                    b"N/A",
                    b"[N/A]",
                    b"ERR!",
                    b"-1",
                    b"99999999999999999999",
                    b"1e308",
                    b"nan",
                    b"\x00",
                    b"Xid",
                    b"(PCI:",
                    b"{",
                    b"[",
                    b"&a",
                    b"*a",
                    b"!!python/object",
                    b"__class__",
                    b"((((",
                    b":",
                    b"|",
                ]
            )
            b[rnd.randrange(n + 1) : 0] = tok
        elif choice == 9 and n:  # swap two chunks
            i, j = rnd.randrange(n), rnd.randrange(n)
            b[i], b[j] = b[j], b[i]
        else:  # whitespace changes (pastes: tabs to spaces, collapsed columns)
            b = bytearray(
                bytes(b).replace(
                    rnd.choice([b"  ", b"\t", b" "]), rnd.choice([b" ", b"", b"\t", b"\r\n"])
                )
            )
    return bytes(b)


def runner_for(target: str) -> tuple[Callable[[bytes], object], tuple[type[BaseException], ...]]:
    from gpu_triage.collectors.parsers import ParseError

    if target == "expression":
        from gpu_triage.engine.compiler import CompileError, compile_rule
        from gpu_triage.engine.expr import ExprError
        from gpu_triage.engine.loader import LoadedRule
        from gpu_triage.engine.model import Rule
        from gpu_triage.io.yamlio import Located

        template = dict(
            id="fuzz",
            title="fuzz rule",
            version=1,
            severity="info",
            stage="FD1",
            symptom="s",
            cause="c",
            fix="f",
            references=["guide/FD1"],
            params={"x": {"default": 1}},
        )

        def run_expr(data: bytes) -> object:
            text = data.decode("utf-8", "replace")
            try:
                rule = Rule.model_validate({**template, "when": text})
            except ValueError:
                return None  # not a string the schema accepts
            return compile_rule(
                LoadedRule(rule, Located("fuzz", 1), "fuzz", 0), {"x": 1}, {}, set()
            )

        from gpu_triage.engine.compiler import _FieldCompileError

        return run_expr, (ExprError, CompileError, _FieldCompileError)
    if target == "rule-yaml":
        from gpu_triage.engine.compiler import compile_rulebook
        from gpu_triage.engine.loader import RawRulebook, load_text

        def run_yaml(data: bytes) -> object:
            raw = RawRulebook()
            load_text(data.decode("utf-8", "replace"), "fuzz.yaml", "fuzz", raw)
            compile_rulebook(raw)  # errors are diagnostics, never exceptions
            return raw

        return run_yaml, ()
    if target == "snapshot":
        from gpu_triage.model.snapshot import SnapshotError, parse_snapshot

        def run_snap(data: bytes) -> object:
            return parse_snapshot(data.decode("utf-8", "replace"), "fuzz.json")

        return run_snap, (SnapshotError,)
    if target == "intake":
        from gpu_triage.collectors.from_text import intake_paste

        def run_intake(data: bytes) -> object:
            return intake_paste(data.decode("utf-8", "replace"), "fuzz")

        return run_intake, ()  # every failure is a piece of the result, never raised
    from gpu_triage.collectors.parsers.registry import clip_long_lines, raw_parser

    # The parser without its ParseError guard (that would hide the bugs we look for),
    # but with the same line clipping production applies.
    raw = raw_parser("nvidia-smi-compute-apps" if target == "compute-apps" else target)

    def parser(text: str, source: str) -> object:
        return raw(clip_long_lines(text), source)

    def run_parser(data: bytes) -> object:
        return parser(data.decode("utf-8", "replace"), "fuzz")

    return run_parser, (ParseError,)


def targets() -> list[str]:
    from gpu_triage.collectors.parsers.registry import PARSERS

    return ["expression", "rule-yaml", "snapshot", "intake", *sorted(PARSERS)]


def fuzz_target(args: tuple[str, int, int]) -> tuple[str, int, int, int, float, list[str]]:
    target, count, seed = args
    rnd = random.Random(f"{seed}-{target}")
    pool = seeds_for(target)
    run, expected = runner_for(target)
    failures, slow = 0, 0
    notes: list[str] = []
    start = time.perf_counter()
    for i in range(count):
        data = (
            mutate(rnd.choice(pool), rnd, pool) if i % 50 else rnd.randbytes(rnd.randint(0, 4096))
        )
        t = time.perf_counter()
        try:
            run(data)
        except expected:
            pass
        except Exception:
            failures += 1
            if len(notes) < 5:
                OUT.mkdir(parents=True, exist_ok=True)
                path = OUT / f"{target}-{seed}-{i}.bin"
                path.write_bytes(data)
                notes.append(f"{path.name}: {traceback.format_exc().splitlines()[-1]}")
        if time.perf_counter() - t > TIME_LIMIT_S:
            slow += 1
            if len(notes) < 5:
                notes.append(f"input {i} took {time.perf_counter() - t:.1f} s")
    return target, count, failures, slow, time.perf_counter() - start, notes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=1_000_000, help="total inputs, all targets")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="comma-separated targets")
    a = ap.parse_args()
    names = [t for t in targets() if not a.only or t in a.only.split(",")]
    # Cheap targets get more inputs; the YAML loader and compiler are slower per input.
    weight = {"rule-yaml": 0.1, "expression": 1.0, "snapshot": 0.5}
    total_w = sum(weight.get(t, 1.0) for t in names)
    jobs = []
    for t in names:
        n = int(a.inputs * weight.get(t, 1.0) / total_w)
        chunks = 8
        jobs += [
            (t, n // chunks + (1 if k < n % chunks else 0), a.seed * 100 + k) for k in range(chunks)
        ]
    t0 = time.perf_counter()
    results: dict[str, list[float]] = {}
    notes: dict[str, list[str]] = {}

    def record(target: str, count: int, fails: int, slow: int, secs: float, nts: list[str]) -> None:
        r = results.setdefault(target, [0, 0, 0, 0.0])
        r[0] += count
        r[1] += fails
        r[2] += slow
        r[3] += secs
        notes.setdefault(target, []).extend(nts)

    pending = list(jobs)
    while pending:  # a worker that dies (a crash in C code) is a failure, not the end
        pool = ProcessPoolExecutor(a.workers)
        futures = {pool.submit(fuzz_target, job): job for job in pending}
        pending = []
        for fut, job in futures.items():
            try:
                record(*fut.result())
            except BrokenProcessPool:
                record(job[0], job[1], 1, 0, 0.0, [f"a worker died (crash) in job seed {job[2]}"])
        pool.shutdown(cancel_futures=True)
    print(f"{'target':<26}{'inputs':>10}{'failures':>10}{'slow':>6}{'µs/input':>10}")
    for t in names:
        n, f, s, secs = results[t]
        print(f"{t:<26}{int(n):>10}{int(f):>10}{int(s):>6}{secs / max(n, 1) * 1e6:>10.0f}")
        for note in notes[t][:3]:
            print(f"    {note}")
    tot = sum(r[0] for r in results.values())
    fails = sum(r[1] for r in results.values())
    print(
        f"total: {int(tot)} inputs, {int(fails)} failures, "
        f"{time.perf_counter() - t0:.0f} s wall on {a.workers} workers"
    )


if __name__ == "__main__":
    main()
