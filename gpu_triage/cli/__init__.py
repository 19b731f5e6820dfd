"""The `gpu-triage` command: the parser and the dispatch; one module per command group.

Nothing here imports Textual: the TUI is loaded only by `tui_launch.cmd_tui`. The
command modules are imported inside :func:`main`, after SIGTERM is held (an
unattended loop must not die of a signal that arrives while it starts), and every
failure ends in the exit-code contract: 64 for any usage error (argparse's own
included), 3 with a one-line message for anything unexpected, never 1 by accident.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, cast

if sys.argv[1:2] == ["run"] and not any("reference" in a for a in sys.argv):
    # An unattended run evaluates on the durable_rules worker: start its process first,
    # so it starts up beside the imports below rather than after them (cold start).
    from gpu_triage.engine.durable_worker import prespawn

    prespawn()

from gpu_triage import __version__

USAGE = 64
UNKNOWN = 3


class ArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, which the contract reads as critical: 64 here."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from gpu_triage.cli import (
        check,
        collect,
        diff,
        explain,
        facts,
        fleet,
        readiness,
        rules,
        run,
        tui_launch,
    )

    ap = ArgumentParser(
        prog="gpu-triage",
        description="Rule-based incident triage for NVIDIA GPU nodes.",
        epilog="Exit codes of `run`: 0 healthy, 1 warning, 2 critical, 3 unknown "
        "(could not look: a collector failed or timed out, no GPU facts, the rulebook "
        "could not load, an internal error), 64 usage.",
    )
    ap.add_argument("--version", action="version", version=f"gpu-triage {__version__}")
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser),
    )

    run.add_parser(sub)
    collect.add_parser(sub)
    explain.add_parser(sub)
    rules.add_parser(sub)
    tui_launch.add_parser(sub)
    fleet.add_parser(sub)
    check.add_parser(sub)
    facts.add_parser(sub)
    diff.add_parser(sub)
    readiness.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    from gpu_triage.io.stopping import hold

    held = hold()  # first: before the imports and the rulebook
    looping = False
    try:
        ap = build_parser()
        args = ap.parse_args(argv)
        looping = args.command == "run" and getattr(args, "interval", None) is not None
        if looping:
            args.stop = held.stop
        else:
            held.release()
        code = _dispatch(ap, args, argv)
        if looping and argv is None:
            # A stopping daemon has written everything (atomically); tearing down the
            # interpreter's modules takes about a second: SIGTERM must end it sooner.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the top-level handler: 3, never a traceback and 1
        where = getattr(locals().get("args"), "command", None) or "startup"
        print(
            f"gpu-triage: internal error in {where}: {type(exc).__name__}: {exc}".splitlines()[0],
            file=sys.stderr,
        )
        return UNKNOWN
    finally:
        held.release(redeliver=not looping)


def _dispatch(ap: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None) -> int:
    from gpu_triage.cli import (
        check,
        collect,
        diff,
        explain,
        facts,
        fleet,
        readiness,
        rules,
        run,
        tui_launch,
    )

    if args.command == "run":
        return run.cmd_run(args)
    if args.command == "collect":
        return collect.cmd_collect(args)
    if args.command == "explain":
        return explain.cmd_explain(args)
    if args.command == "rules":
        return rules.cmd_rules(args, ap)
    if args.command == "facts":
        return facts.cmd_facts(args, ap)
    if args.command == "diff":
        return diff.cmd_diff(args)
    if args.command == "fleet":
        return fleet.cmd_fleet(args)
    if args.command == "readiness":
        return readiness.cmd_readiness(args)
    if args.command in ("npd", "slurm-healthcheck"):
        return check.cmd_check(args)
    if args.command == "tui" or (args.command is None and argv is None and sys.stdin.isatty()):
        return tui_launch.cmd_tui(args if args.command == "tui" else ap.parse_args(["tui"]))
    ap.print_help()
    return 0
