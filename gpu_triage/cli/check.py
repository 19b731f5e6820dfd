"""`gpu-triage npd` and `gpu-triage slurm-healthcheck`: health checks for
node-problem-detector and Slurm, from a recent findings file, a snapshot or a live run."""

from __future__ import annotations

import argparse
from typing import Any

from gpu_triage.cli.collect import collect_live
from gpu_triage.cli.common import add_check_args, load_book, load_snapshot, say


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage npd and slurm-healthcheck` on the top-level subparsers."""
    npd = sub.add_parser(
        "npd", help="node-problem-detector custom plugin (exit 0 OK, 1 NonOK, 2 Unknown)"
    )
    add_check_args(npd)
    slurm = sub.add_parser(
        "slurm-healthcheck", help="Slurm HealthCheckProgram: drain on findings, resume own drains"
    )
    add_check_args(slurm)
    slurm.add_argument("--node", help="Slurm node name (default: short hostname)")
    slurm.add_argument("--scontrol", default="scontrol", help="path of scontrol")


def _check_findings(args: argparse.Namespace) -> tuple[Any, str]:
    """The findings a check acts on: a recent findings file, a snapshot, or a live run."""
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError
    from gpu_triage.ops.integrations import read_recent_findings

    if args.findings is not None:
        return read_recent_findings(args.findings, args.max_age)
    try:
        book = load_book(args)
        snap = (
            load_snapshot(args.snapshot)
            if args.snapshot
            else collect_live(args.window, progress=False)
        )
    except (RulebookError, SnapshotError) as exc:
        return None, str(exc).splitlines()[0]
    return evaluate(snap, book), ""


def cmd_check(args: argparse.Namespace) -> int:
    from gpu_triage.ops import integrations as integ

    try:
        doc, error = _check_findings(args)
    except Exception as exc:  # noqa: BLE001 - a check that cannot look says "unknown"
        text = str(exc).strip().splitlines()
        doc, error = None, f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
    if args.command == "npd":
        code, message = integ.npd_verdict(doc, args.severity, error=error)
        say(message)
        return code
    from gpu_triage.io.commands import run_command

    def run(argv: list[str]) -> tuple[int, str]:
        res = run_command([args.scontrol, *argv[1:]], 30.0)
        return (res.returncode if res.returncode is not None else 127), res.stdout + res.stderr

    code, message = integ.slurm_healthcheck(
        doc, args.node or integ.slurm_node_name(), run, severity=args.severity, error=error
    )
    say(f"gpu-triage slurm-healthcheck: {message}" + (f" ({error})" if error else ""))
    return code
