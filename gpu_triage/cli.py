"""The `gpu-triage` command. Nothing here imports Textual: the TUI is loaded only by `tui`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpu_triage import __version__
from gpu_triage.engine.findings import ExitCode
from gpu_triage.model.demos import demo_names, demo_snapshot_path

SEVERITIES = ("info", "warning", "critical")


def _add_rules_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rules",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="extra rulebook directory or file (overlays, site rules); repeatable",
    )
    p.add_argument("--no-builtin", action="store_true", help="do not load the packaged rulebook")
    p.add_argument(
        "--allow-untrusted-rules",
        action="store_true",
        help="when root, accept rule files writable by other users",
    )


def _add_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--severity",
        choices=("warning", "critical"),
        default="critical",
        help="findings at or above this make the check fail",
    )
    p.add_argument(
        "--findings",
        type=Path,
        help="use the findings file an unattended run wrote instead of collecting",
    )
    p.add_argument(
        "--max-age",
        type=float,
        default=900.0,
        help="seconds after which --findings is too old to trust",
    )
    p.add_argument("--snapshot", type=Path, help="evaluate this snapshot")
    p.add_argument("--window", type=float, default=1.0)
    _add_rules_args(p)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="gpu-triage",
        description="Rule-based incident triage for NVIDIA GPU nodes.",
        epilog="Exit codes of `run`: 0 healthy, 1 warning, 2 critical, 3 unknown "
        "(collection failed or the rulebook could not load), 64 usage.",
    )
    ap.add_argument("--version", action="version", version=f"gpu-triage {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="evaluate a snapshot (or collect one) and write findings")
    run.add_argument("--snapshot", type=Path, help="evaluate this snapshot instead of collecting")
    run.add_argument(
        "--demo",
        nargs="?",
        const="incident",
        metavar="NAME",
        help="evaluate a bundled demo incident (names: gpu-triage run --demo list)",
    )
    run.add_argument("--out", type=Path, help="write findings here (atomically); default stdout")
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
    run.add_argument("--kernel-log", type=Path, help="read this file as the kernel log")
    run.add_argument(
        "--site",
        type=Path,
        metavar="FILE",
        help="site inventory (YAML/JSON: expected_pcie_width, pinned_driver_version, "
        "rack, ...; see docs/facts.md, kind site)",
    )
    run.add_argument(
        "--job",
        type=Path,
        metavar="FILE",
        help="job metrics (YAML/JSON: step_time_ms, rank_step_times_ms, "
        "latency_p99_ms, ...; kind job)",
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
    run.add_argument("--engine", choices=("auto", "durable", "reference"), default="auto")
    run.add_argument("--window", type=float, default=1.0, help="sampling window when collecting")
    _add_rules_args(run)

    col = sub.add_parser("collect", help="collect facts from this node into a snapshot")
    col.add_argument("--out", type=Path, help="snapshot file (default stdout)")
    col.add_argument("--window", type=float, default=1.0, help="sampling window in seconds")
    col.add_argument(
        "--redact",
        action="store_true",
        help="remove hostnames, serials, UUIDs, users and command lines",
    )
    col.add_argument("--only", help="comma-separated collector names")
    col.add_argument("--kernel-log", type=Path, help="read this file as the kernel log")
    col.add_argument(
        "--from-text",
        nargs=2,
        action="append",
        metavar=("PARSER", "FILE"),
        default=[],
        help="build the snapshot from saved command output; repeatable",
    )

    ex = sub.add_parser("explain", help="why a rule fired, or why not")
    ex.add_argument("rule")
    ex.add_argument("--snapshot", type=Path, required=True)
    _add_rules_args(ex)

    rules = sub.add_parser("rules", help="auditor commands for the rulebook")
    rsub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    lint = rsub.add_parser("lint", help="check rule files; FILE:LINE:COL messages, exit 1 on error")
    lint.add_argument("paths", nargs="*", type=Path)
    test = rsub.add_parser("test", help="run every rule's embedded test cases")
    test.add_argument("paths", nargs="*", type=Path)
    test.add_argument("--engine", choices=("both", "durable", "reference"), default="both")
    test.add_argument("--rule", action="append", default=[], help="only this rule id")
    lst = rsub.add_parser("list", help="list the rules")
    _add_rules_args(lst)
    docs = rsub.add_parser("docs", help="the rulebook as a Markdown catalogue")
    docs.add_argument("--out", type=Path)
    _add_rules_args(docs)
    schema = rsub.add_parser("schema", help="JSON Schema of rule files (or findings documents)")
    schema.add_argument("--kind", choices=("rule", "findings"), default="rule")
    schema.add_argument("--out", type=Path)

    cov = rsub.add_parser("coverage", help="knowledge-map items and the rules that cite them")
    cov.add_argument("--format", choices=("text", "json"), default="text")
    _add_rules_args(cov)

    tui = sub.add_parser("tui", help="the responder's terminal UI (default with no command)")
    tui.add_argument("--snapshot", type=Path, help="open this snapshot instead of collecting")
    tui.add_argument(
        "--demo",
        nargs="?",
        const="incident",
        metavar="NAME",
        help="open a bundled demo incident (default: incident)",
    )
    tui.add_argument("--window", type=float, default=1.0)
    tui.add_argument("--engine", choices=("auto", "durable", "reference"), default="auto")
    tui.add_argument("--record", type=Path, help="incident record file (default: a new one)")
    _add_rules_args(tui)

    fleet = sub.add_parser("fleet", help="what many nodes' history shows that one node cannot")
    fleet.add_argument(
        "paths",
        nargs="+",
        type=Path,
        help="JSONL histories, findings documents, snapshots, or folders of them",
    )
    fleet.add_argument("--format", choices=("markdown", "json"), default="markdown")
    fleet.add_argument("--out", type=Path)
    fleet.add_argument("--inventory", type=Path, help="CSV with host,rack,row columns")
    fleet.add_argument("--top", type=int, default=20)
    fleet.add_argument("--workers", type=int, help="processes reading files (default: CPUs)")

    npd = sub.add_parser(
        "npd", help="node-problem-detector custom plugin (exit 0 OK, 1 NonOK, 2 Unknown)"
    )
    _add_check_args(npd)
    slurm = sub.add_parser(
        "slurm-healthcheck", help="Slurm HealthCheckProgram: drain on findings, resume own drains"
    )
    _add_check_args(slurm)
    slurm.add_argument("--node", help="Slurm node name (default: short hostname)")
    slurm.add_argument("--scontrol", default="scontrol", help="path of scontrol")

    facts = sub.add_parser("facts", help="the fact catalogue")
    fsub = facts.add_subparsers(dest="facts_command", metavar="SUBCOMMAND")
    fdocs = fsub.add_parser("docs", help="the fact catalogue as Markdown")
    fdocs.add_argument("--out", type=Path)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "collect":
            return cmd_collect(args)
        if args.command == "explain":
            return cmd_explain(args)
        if args.command == "rules":
            return cmd_rules(args, ap)
        if args.command == "facts":
            return cmd_facts(args)
        if args.command == "fleet":
            return cmd_fleet(args)
        if args.command in ("npd", "slurm-healthcheck"):
            return cmd_check(args)
        if args.command == "tui" or (args.command is None and argv is None and sys.stdin.isatty()):
            return cmd_tui(args if args.command == "tui" else ap.parse_args(["tui"]))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    ap.print_help()
    return 0


def _err(msg: str) -> None:
    print(f"gpu-triage: {msg}", file=sys.stderr)


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    from gpu_triage.io.files import write_atomic

    write_atomic(out, text)


def _load_book(args: argparse.Namespace) -> Any:
    from gpu_triage.engine.compiler import load_rulebook

    return load_rulebook(
        list(args.rules),
        include_builtin=not args.no_builtin,
        allow_untrusted=args.allow_untrusted_rules,
    )


def _load_snapshot(path: Path) -> Any:
    from gpu_triage.model.snapshot import load_snapshot

    return load_snapshot(path)


# --------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from gpu_triage.io.files import is_special

    early = _start_collecting(args)  # the window runs while the rulebook loads

    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError
    from gpu_triage.ops.history import History
    from gpu_triage.ops.unattended import RunSpec, run_loop, run_once

    try:
        book = _load_book(args)
    except RulebookError as exc:
        _err(f"the rulebook could not be loaded:\n{exc}")
        return ExitCode.UNKNOWN
    if args.demo == "list":
        print("\n".join(demo_names()))
        return 0
    if args.demo:
        try:
            args.snapshot = demo_snapshot_path(args.demo)
        except ValueError as exc:
            _err(str(exc))
            return ExitCode.USAGE
    if args.interval is not None and args.interval <= 0:
        _err("--interval must be positive")
        return ExitCode.USAGE

    try:
        supplied = _supplied_facts(args)
    except ValueError as exc:
        _err(str(exc))
        return ExitCode.USAGE

    def get_snapshot() -> tuple[Any, str]:
        if args.snapshot:
            snap, source = _load_snapshot(args.snapshot), str(args.snapshot)
        elif early:  # the first live run was started before the rulebook loaded
            snap, source = early.pop().result(), "live"
        else:
            snap, source = _collect(window=args.window, kernel_log=args.kernel_log), "live"
        for attr, value in supplied.items():
            if attr == "answers":
                snap.facts.answers.update(value)
            else:
                setattr(snap.facts, attr, value)
        return snap, source

    state = args.state
    if state is None and args.out is not None and not is_special(args.out):
        state = args.out.with_name(f".{args.out.name}.state.json")
    also: list[tuple[str, Path]] = []
    for item in args.also:
        fmt, sep, path = item.partition(":")
        if not sep or fmt not in ("json", "jsonl", "markdown", "prometheus") or not path:
            _err(
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
        History.load(state),
        also,
    )
    try:
        if args.interval is not None:
            return run_loop(spec, args.interval)
        doc = run_once(spec)
    except SnapshotError as exc:
        _err(str(exc))
        return ExitCode.UNKNOWN
    except OSError as exc:
        _err(f"cannot write {args.out}: {exc}")
        return ExitCode.UNKNOWN
    if doc.engine.fallback_reason and args.engine != "reference":
        _err(f"engine: {doc.engine.name} ({doc.engine.fallback_reason})")
    return int(doc.exit_code)


def _supplied_facts(args: argparse.Namespace) -> dict[str, Any]:
    """What a person supplies beside the collection: site inventory, job metrics, answers."""
    from gpu_triage.model.supplied import read_supplied

    return read_supplied(args.site, args.job, args.answers)


def _start_collecting(args: argparse.Namespace) -> list[Any]:
    """Start the first live collection in a thread at once: collection does not need the
    rulebook, and the sampling window is most of a run's time."""
    if args.snapshot or args.demo:
        return []
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="collect")
    future = pool.submit(_collect, window=args.window, kernel_log=args.kernel_log)
    pool.shutdown(wait=False)
    return [future]


def _collect(
    window: float,
    only: set[str] | None = None,
    kernel_log: Path | None = None,
    progress: bool = True,
) -> Any:
    from gpu_triage.collectors.base import CollectContext
    from gpu_triage.collectors.runner import collect_snapshot, default_collectors

    collectors = [c for c in default_collectors() if not only or c.name in only]
    ctx = CollectContext(window_s=window, kernel_log_file=kernel_log)
    show = progress and sys.stderr.isatty()

    def report(name: str, state: Any) -> None:
        if show:
            msg = "running" if state is None else state.value
            print(f"  {name:<20} {msg}", file=sys.stderr)

    return collect_snapshot(collectors, ctx, progress=report)


def cmd_collect(args: argparse.Namespace) -> int:
    from gpu_triage.model.snapshot import dump_snapshot

    if args.from_text:
        from gpu_triage.collectors.from_text import snapshot_from_texts

        try:
            snap = snapshot_from_texts([(k, Path(f)) for k, f in args.from_text])
        except (KeyError, OSError, ValueError) as exc:
            _err(str(exc))
            return ExitCode.USAGE
    else:
        only = set(args.only.split(",")) if args.only else None
        snap = _collect(args.window, only, args.kernel_log)
    if args.redact:
        from gpu_triage.collectors.redact import redact_snapshot

        snap = redact_snapshot(snap)
    try:
        _emit(dump_snapshot(snap), args.out)
    except OSError as exc:
        _err(f"cannot write {args.out}: {exc}")
        return ExitCode.UNKNOWN
    if sys.stderr.isatty():
        for c in snap.collectors:
            print(
                f"  {c.name:<20} {c.state.value:<12} {c.duration_s:6.2f}s {c.error}",
                file=sys.stderr,
            )
    return 0


# --------------------------------------------------------------------------- explain


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu_triage.engine.explain import explain, render_explanation
    from gpu_triage.engine.inputs import EvalInput
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError

    try:
        book = _load_book(args)
        snap = _load_snapshot(args.snapshot)
    except (RulebookError, SnapshotError) as exc:
        _err(str(exc))
        return ExitCode.UNKNOWN
    try:
        x = explain(EvalInput.from_snapshot(snap), book, args.rule)
    except KeyError as exc:
        _err(str(exc.args[0]))
        return ExitCode.USAGE
    print(render_explanation(x))
    return 0


# --------------------------------------------------------------------------- rules


def _rule_paths(paths: list[Path]) -> tuple[list[Path], bool]:
    """No paths: the packaged rulebook. Paths: those, with the packaged rulebook only
    when one of them is it."""
    return (paths, False) if paths else ([], True)


def cmd_rules(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    sub = args.rules_command
    if sub == "lint":
        from gpu_triage.collectors.parsers.registry import PARSERS
        from gpu_triage.engine.lint import lint

        paths, builtin = _rule_paths(args.paths)
        diags = lint(PARSERS, paths, include_builtin=builtin)
        for d in diags:
            print(d)
        errors = sum(d.level == "error" for d in diags)
        print(f"{errors} error(s), {len(diags) - errors} warning(s)", file=sys.stderr)
        return 1 if errors else 0
    if sub == "test":
        return _rules_test(args)
    if sub == "list":
        book = _load_book(args)
        for r in book.rules:
            subject = ",".join(r.iter_kinds) or "node"
            print(
                f"{r.id:<40} {r.severity.value:<8} {r.rule.stage.value:<9} {subject:<10} "
                f"{r.rulebook}"
            )
        return 0
    if sub == "coverage":
        from gpu_triage.engine.coverage import coverage_command

        return coverage_command(_load_book(args), args.format)
    if sub == "docs":
        from gpu_triage.engine.docs import rules_markdown

        _emit(rules_markdown(_load_book(args)), args.out)
        return 0
    if sub == "schema":
        from gpu_triage.engine.schema import findings_schema_text, rule_schema_text

        _emit(rule_schema_text() if args.kind == "rule" else findings_schema_text(), args.out)
        return 0
    _subparser(ap, "rules").print_help(sys.stderr)
    return ExitCode.USAGE


def _rules_test(args: argparse.Namespace) -> int:
    from gpu_triage.engine.backend import Backend, BackendFailure, ReferenceBackend
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.engine.ruletest import run_rule_tests

    paths, builtin = _rule_paths(args.paths)
    try:
        book = load_rulebook(paths, include_builtin=builtin, allow_untrusted=True)
    except RulebookError as exc:
        _err(f"the rulebook could not be loaded:\n{exc}")
        return 1
    backends: list[Backend] = []
    if args.engine in ("both", "reference"):
        backends.append(ReferenceBackend())
    if args.engine in ("both", "durable"):
        from gpu_triage.engine.durable_backend import shared_backend

        try:
            backends.append(shared_backend(book))
        except BackendFailure as exc:
            if args.engine == "durable":
                _err(f"durable_rules backend unavailable: {exc}")
                return 1
            _err(f"note: durable_rules backend unavailable ({exc}); testing the reference only")
    results = run_rule_tests(book, backends, set(args.rule) or None)
    failed = [r for r in results if not r.passed]
    for r in failed:
        print(f"FAIL {r.rule_id}: {r.name} ({r.file})")
        for p in r.problems:
            print(f"     {p}")
    engines = "+".join(b.name for b in backends)
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    print(f"({len(book.rules)} rules, engines: {engines})", file=sys.stderr)
    return 1 if failed else 0


def cmd_facts(args: argparse.Namespace) -> int:
    if args.facts_command == "docs":
        from gpu_triage.model.catalog import catalog_markdown

        _emit(catalog_markdown() + "\n", args.out)
        return 0
    _subparser(build_parser(), "facts").print_help(sys.stderr)
    return ExitCode.USAGE


def _subparser(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = action.choices[name]
    return sub


def cmd_tui(args: argparse.Namespace) -> int:
    # Textual is imported here and only here: the unattended path never loads it.
    from gpu_triage.ops.session import TuiOptions
    from gpu_triage.tui.app import run_tui

    return run_tui(
        TuiOptions(
            rules=tuple(args.rules),
            include_builtin=not args.no_builtin,
            allow_untrusted_rules=args.allow_untrusted_rules,
            engine=args.engine,
            snapshot=args.snapshot,
            demo=args.demo,
            window_s=args.window,
            record=args.record,
        )
    )


def cmd_fleet(args: argparse.Namespace) -> int:
    from gpu_triage.ops.fleet import Inventory, analyse, fleet_markdown, read_fleet

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        _err(f"no such file or directory: {missing[0]}")
        return ExitCode.USAGE
    nodes, runs, errors, files = read_fleet(args.paths, args.workers)
    rep = analyse(nodes, runs, errors, files, Inventory.load(args.inventory), top=args.top)
    text = fleet_markdown(rep) if args.format == "markdown" else rep.model_dump_json(indent=2)
    _emit(text if text.endswith("\n") else text + "\n", args.out)
    return 0


def _check_findings(args: argparse.Namespace) -> tuple[Any, str]:
    """The findings a check acts on: a recent findings file, a snapshot, or a live run."""
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError
    from gpu_triage.ops.integrations import read_recent_findings

    if args.findings is not None:
        return read_recent_findings(args.findings, args.max_age)
    try:
        book = _load_book(args)
        snap = (
            _load_snapshot(args.snapshot)
            if args.snapshot
            else _collect(args.window, progress=False)
        )
    except (RulebookError, SnapshotError) as exc:
        return None, str(exc).splitlines()[0]
    return evaluate(snap, book), ""


def cmd_check(args: argparse.Namespace) -> int:
    from gpu_triage.ops import integrations as integ

    doc, error = _check_findings(args)
    if args.command == "npd":
        code, message = integ.npd_verdict(doc, args.severity, error=error)
        print(message)
        return code
    from gpu_triage.io.commands import run_command

    def run(argv: list[str]) -> tuple[int, str]:
        res = run_command([args.scontrol, *argv[1:]], 30.0)
        return (res.returncode if res.returncode is not None else 127), res.stdout + res.stderr

    code, message = integ.slurm_healthcheck(
        doc, args.node or integ.slurm_node_name(), run, severity=args.severity
    )
    print(f"gpu-triage slurm-healthcheck: {message}" + (f" ({error})" if error else ""))
    return code
