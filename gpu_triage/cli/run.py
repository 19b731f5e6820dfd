"""`gpu-triage run`: evaluate a snapshot (or a live collection) and write findings, once or
on an --interval schedule."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpu_triage.cli.collect import (
    add_collector_args,
    add_from_text_arg,
    collect_live,
    collector_options,
    read_from_text,
    report_intake,
)
from gpu_triage.cli.common import SEVERITIES, add_rules_args, err, load_book, load_snapshot
from gpu_triage.engine.verdict import ExitCode
from gpu_triage.io import startup_gc
from gpu_triage.io.files import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_MODE
from gpu_triage.model.demos import demo_names, demo_snapshot_path
from gpu_triage.model.facts import Symptom


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage run` on the top-level subparsers."""
    run = sub.add_parser("run", help="evaluate a snapshot (or collect one) and write findings")
    run.add_argument("--snapshot", type=Path, help="evaluate this snapshot instead of collecting")
    run.add_argument(
        "--demo",
        nargs="?",
        const="incident",
        metavar="NAME",
        help="evaluate a bundled demo incident (names: gpu-triage run --demo list)",
    )
    run.add_argument(
        "--out",
        type=Path,
        help="write findings here (atomically; a device, a FIFO or - is written in place); "
        "default stdout",
    )
    run.add_argument(
        "--format",
        choices=("json", "jsonl", "markdown", "prometheus"),
        default="json",
        help="json: full document; jsonl: append one compact line per run; "
        "markdown: report; prometheus: node_exporter textfile",
    )
    run.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="run forever on this schedule (SIGTERM stops it cleanly)",
    )
    run.add_argument(
        "--state",
        type=Path,
        help="history of findings (first/last seen, cleared); default: beside --out",
    )
    add_from_text_arg(
        run,
        "evaluate saved or pasted command output instead of collecting ('-' reads stdin): "
        "the same intake as collect --from-text (kinds recognised by content, sessions split "
        "at prompts, KIND:FILE forces a parser); repeatable; what the paste does not hold "
        "is not provided, never a reason for exit 3",
    )
    run.add_argument(
        "--kernel-log",
        type=Path,
        action="append",
        help="read this file as the kernel log (its newest 32 MiB at most); repeatable: "
        "several files merge by time",
    )
    run.add_argument(
        "--site",
        type=Path,
        metavar="FILE",
        help="site inventory (YAML/JSON: expected_pcie_width, pinned_driver_version, "
        "pinned_kernel, pinned_nic_firmware, burn_in, rack, ...; see README and "
        "docs/facts.md, kind site)",
    )
    run.add_argument(
        "--job",
        type=Path,
        metavar="FILE",
        help="job metrics (YAML/JSON: step_time_ms, rank_step_times_ms, "
        "latency_p99_ms, ...; kind job)",
    )
    run.add_argument(
        "--symptom",
        choices=[s.value for s in Symptom],
        help="what you are seeing: its differential ranks first and its questions are asked first",
    )
    run.add_argument(
        "--error-text",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="the error text the job (or nvidia-smi, docker, a plugin) printed; repeatable",
    )
    run.add_argument(
        "--answers",
        type=Path,
        metavar="FILE",
        help="answers to the rulebook's questions (YAML/JSON: question id -> value)",
    )
    run.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help="write this run in another format too, e.g. jsonl:history.jsonl; repeatable",
    )
    run.add_argument(
        "--min-severity",
        choices=SEVERITIES,
        default="info",
        help="drop fired findings below this severity",
    )
    run.add_argument(
        "--lock-timeout",
        type=float,
        default=DEFAULT_LOCK_TIMEOUT_S,
        metavar="SECONDS",
        help="wait at most this long for another run's lock on an output, then exit 3 "
        f"naming the lock (default {DEFAULT_LOCK_TIMEOUT_S:g})",
    )
    run.add_argument(
        "--out-mode",
        type=_octal_mode,
        default=DEFAULT_MODE,
        metavar="OCTAL",
        help=f"permissions of the files written (default {DEFAULT_MODE:04o}, whatever the umask)",
    )
    run.add_argument("--engine", choices=("auto", "durable", "reference"), default="auto")
    run.add_argument("--window", type=float, default=1.0, help="sampling window when collecting")
    add_collector_args(run)
    add_rules_args(run)


def _octal_mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an octal mode such as 0644") from None
    if not 0 <= mode <= 0o777:
        raise argparse.ArgumentTypeError(f"{text!r}: permission bits only (0000 to 0777)")
    return mode


def cmd_run(args: argparse.Namespace) -> int:
    from gpu_triage.io.files import UnsafeFile, target_kind

    if args.interval is not None and not args.interval > 0:  # NaN too
        err("--interval must be positive")
        return ExitCode.USAGE
    if args.from_text and (args.snapshot or args.demo or args.interval is not None):
        err("--from-text evaluates a paste once: not with --snapshot, --demo or --interval")
        return ExitCode.USAGE
    intake = None
    if args.from_text:  # read before anything else: a bad path is a usage error at once
        intake = read_from_text(args.from_text)
        if isinstance(intake, int):
            return intake
    stop = getattr(args, "stop", None)  # SIGTERM/SIGINT, held by main() in loop mode
    early = _start_collecting(args, stop)  # the window runs while the rulebook loads

    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.ops.history import History
    from gpu_triage.ops.unattended import RunError, RunSpec, Stopped, run_loop, run_once

    durable = args.engine != "reference" and args.demo != "list"
    if durable:  # imported first: a rulebook compiled now caches its durable ruleset too
        from gpu_triage.engine.durable_backend import warm_up
    try:
        book = load_book(args)
    except RulebookError as exc:
        err(f"the rulebook could not be loaded:\n{exc}")
        return ExitCode.UNKNOWN
    if durable:
        warm_up(book)  # the worker compiles the rulebook while the snapshot loads
    startup_gc.settle()  # the modules and the rulebook are loaded: they stay
    if args.demo == "list":
        print("\n".join(demo_names()))
        return 0
    if args.demo:
        try:
            args.snapshot = demo_snapshot_path(args.demo)
        except ValueError as exc:
            err(str(exc))
            return ExitCode.USAGE
    if args.lock_timeout < 0:
        err("--lock-timeout must not be negative")
        return ExitCode.USAGE
    if args.out is not None and str(args.out) == "-":
        args.out = None

    try:
        supplied = _supplied_facts(args)
        errors = read_error_texts(args.error_text)
    except ValueError as exc:
        err(str(exc))
        return ExitCode.USAGE

    def get_snapshot() -> tuple[Any, str]:
        if intake is not None:
            from gpu_triage.collectors.from_text import snapshot_from_intake

            snap, source = snapshot_from_intake(intake), "from-text"
        elif args.snapshot:
            snap, source = load_snapshot(args.snapshot), str(args.snapshot)
        elif early:  # the first live run was started before the rulebook loaded
            snap, source = early.pop().result(), "live"
        else:
            snap, source = collect_live(**_collect_options(args, stop)), "live"
        if stop is not None and stop.is_set():
            raise Stopped
        for attr, value in supplied.items():
            if attr == "answers":
                snap.facts.answers.update(value)
            else:
                setattr(snap.facts, attr, value)
        add_symptom(snap.facts, args.symptom, errors)
        return snap, source

    state = args.state
    try:  # a device, a FIFO or stdout gets no state file beside it
        if state is None and args.out is not None and target_kind(args.out) == "regular":
            state = args.out.with_name(f".{args.out.name}.state.json")
    except UnsafeFile as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    also: list[tuple[str, Path]] = []
    for item in args.also:
        fmt, sep, path = item.partition(":")
        if not sep or fmt not in ("json", "jsonl", "markdown", "prometheus") or not path:
            err(
                f"--also {item!r}: expected FORMAT:PATH with FORMAT json, jsonl, markdown "
                "or prometheus"
            )
            return ExitCode.USAGE
        also.append((fmt, Path(path)))
    spec = RunSpec(
        book,
        args.engine,
        args.format,
        args.out,
        args.min_severity,
        get_snapshot,
        History(path=state),  # read under the outputs' lock by run_once
        also,
        lock_timeout=args.lock_timeout,
        mode=args.out_mode,
    )
    if args.interval is not None:
        if stop is not None and stop.is_set():
            return ExitCode.UNKNOWN  # stopped while starting: no run was made
        return run_loop(spec, args.interval, stop=stop)
    try:
        doc = run_once(spec)
    except RunError as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    except Stopped:
        return ExitCode.UNKNOWN
    except UnsafeFile as exc:  # a refused path or a lock timeout: the message names it
        err(str(exc))
        return ExitCode.UNKNOWN
    except OSError as exc:
        err(f"cannot write {exc.filename or args.out}: {exc.strerror or exc}")
        return ExitCode.UNKNOWN
    if intake is not None:
        report_intake(intake)
    if doc.engine.fallback_reason and args.engine != "reference":
        err(f"engine: {doc.engine.name} ({doc.engine.fallback_reason})")
    if doc.exit_code == ExitCode.UNKNOWN:
        err(doc.verdict)
    return int(doc.exit_code)


def read_error_texts(paths: list[Path]) -> Any:
    """The error texts a responder gives (``--error-text``), as facts; a file with no known
    error in it is a usage error naming it, not a silent nothing."""
    from gpu_triage.model.facts import Facts

    out = Facts()
    if not paths:
        return out
    from gpu_triage.collectors.parsers import ParseError
    from gpu_triage.collectors.parsers.registry import get_parser

    parse = get_parser("error-text")
    for path in paths:
        try:
            part = parse(path.read_bytes().decode("utf-8", errors="replace"), str(path))
        except OSError as exc:
            raise ValueError(f"{path}: cannot read: {exc}") from None
        except ParseError as exc:
            raise ValueError(str(exc)) from None
        out.errors.extend(part.errors)
        if part.driver is not None and out.driver is None:
            out.driver = part.driver
    return out


def add_symptom(facts: Any, symptom: str | None, errors: Any) -> None:
    """The responder's symptom into job.symptom, the error texts into the facts."""
    from gpu_triage.model.facts import JobMetrics

    if symptom:
        if facts.job is None:
            facts.job = JobMetrics(source="--symptom")
        facts.job.symptom = symptom
    if errors.errors:
        facts.errors = [*facts.errors, *errors.errors]
    if errors.driver is not None:
        if facts.driver is None:
            facts.driver = errors.driver
        else:
            from gpu_triage.collectors.merge import merge_fields

            merge_fields(facts.driver, errors.driver)


def _supplied_facts(args: argparse.Namespace) -> dict[str, Any]:
    """What a person supplies beside the collection: site inventory, job metrics, answers."""
    if args.site is None and args.job is None and args.answers is None:
        return {}  # nothing to read: the YAML reader is not even imported
    from gpu_triage.model.supplied import read_supplied

    return read_supplied(args.site, args.job, args.answers)


def _collect_options(args: argparse.Namespace, stop: Any) -> dict[str, Any]:
    return {
        "window": args.window,
        "kernel_log": args.kernel_log,
        "cancel": stop,
        **collector_options(args),
    }


def _start_collecting(args: argparse.Namespace, stop: Any) -> list[Any]:
    """Start the first live collection in a thread at once: collection does not need the
    rulebook, and the sampling window is most of a run's time."""
    if args.snapshot or args.demo or args.from_text:
        return []
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="collect")
    future = pool.submit(collect_live, **_collect_options(args, stop))
    pool.shutdown(wait=False)
    return [future]
