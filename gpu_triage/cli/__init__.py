"""The `gpu-triage` command: the parser and the dispatch; one module per command group.

Nothing here imports Textual: the TUI is loaded only by `tui_launch.cmd_tui`. One table,
:data:`COMMANDS`, drives registration and dispatch. Only the module of the command being
run is imported (the others get a one-line entry for --help), inside :func:`main`, after
SIGTERM is held (an unattended loop must not die of a signal that arrives while it
starts), and every failure ends in the exit-code contract: 64 for any usage error
(argparse's own included), 3 with a one-line message for anything unexpected, never 1
by accident.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from types import ModuleType
from typing import NamedTuple, NoReturn, cast

from gpu_triage import __version__
from gpu_triage.io import startup_gc
from gpu_triage.model.pydantic_import import import_pydantic

# No pydantic plugin runs inside gpu-triage: one installed on the node would see every
# fact validated (as root), and looking for plugins scans every installed package.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _first_word() -> str:
    """The command this process was started for, as its first argument says (none, at a
    terminal: the TUI)."""
    if sys.argv[1:]:
        return sys.argv[1]
    try:
        return "tui" if sys.stdin is not None and sys.stdin.isatty() else ""
    except (ValueError, OSError):  # a closed stdin
        return ""


if _first_word() in ("run", "tui") and not any("reference" in a for a in sys.argv):
    # An unattended run and the TUI evaluate on the durable_rules worker: start its
    # process first, so it starts up (and loads its ruleset) beside the imports below
    # rather than after them: a cold start, and the TUI's first paint, wait for it less.
    from gpu_triage.engine.durable_worker import prespawn

    prespawn()

import_pydantic()  # before a command module imports pydantic: it leaves asyncio out

USAGE = 64
UNKNOWN = 3


class ArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, which the contract reads as critical: 64 here."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


class Command(NamedTuple):
    """One command: the module ``gpu_triage.cli.<module>`` whose ``add_parser(sub)``
    registers it and whose ``<handler>`` runs it (given the top-level parser too when
    ``wants_parser``). ``help`` is the line ``gpu-triage --help`` shows for it, without
    importing the module (tests check it is the one the module registers).

    A NamedTuple, as the other small records read at every start-up are: it costs a
    tenth of a frozen dataclass to create (which compiles six methods from source)."""

    module: str
    handler: str
    help: str
    wants_parser: bool = False
    # It settles the held garbage collector itself once its rulebook is loaded
    # (gpu_triage.io.startup_gc); every other command has it settled before it starts.
    settles: bool = False


# Every command, in the order --help lists them: registration and dispatch both read it.
COMMANDS: dict[str, Command] = {
    "run": Command(
        "run", "cmd_run", "evaluate a snapshot (or collect one) and write findings", settles=True
    ),
    "collect": Command("collect", "cmd_collect", "collect facts from this node into a snapshot"),
    "explain": Command("explain", "cmd_explain", "why a rule fired, or why not"),
    "rules": Command("rules", "cmd_rules", "auditor commands for the rulebook", True),
    "tui": Command(
        "tui_launch",
        "cmd_tui",
        "the responder's terminal UI (default with no command)",
        settles=True,
    ),
    "fleet": Command("fleet", "cmd_fleet", "what many nodes' history shows that one node cannot"),
    "npd": Command(
        "check", "cmd_check", "node-problem-detector custom plugin (exit 0 OK, 1 NonOK, 2 Unknown)"
    ),
    "slurm-healthcheck": Command(
        "check", "cmd_check", "Slurm HealthCheckProgram: drain on findings, resume own drains"
    ),
    "facts": Command("facts", "cmd_facts", "the fact catalogue", True),
    "diff": Command(
        "diff", "cmd_diff", "compare a slow node with a healthy one: findings and facts that differ"
    ),
    "readiness": Command(
        "readiness",
        "cmd_readiness",
        "acceptance checks for putting a node into service: pass/fail report",
    ),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"gpu_triage.cli.{name}")


def command_word(argv: list[str]) -> str | None:
    """The command ``argv`` names, when it is one (the first word; options before it are
    --help and --version only, which need every command)."""
    word = argv[0] if argv else None
    return word if word in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``only``, the full parser of that command alone
    (its module the only one imported) and one-line entries for the others."""
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
    wanted = None if only is None else COMMANDS[only].module
    registered: set[str] = set()
    for name, command in COMMANDS.items():
        if wanted is None or command.module == wanted:
            if command.module not in registered:  # one module may register several
                registered.add(command.module)
                _module(command.module).add_parser(sub)
        else:
            sub.add_parser(name, help=command.help)
    return ap


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # this process's entry: its start-up is not scanned for garbage
        startup_gc.hold()
    code = _main(argv)
    if argv is None and command_word(sys.argv[1:]) not in (None, "tui"):
        # A one-shot command of its own process has written and closed everything: end
        # it now. The interpreter's teardown (finalising every module and object, the
        # rulebook's included) costs more than a small evaluation; the durable_rules
        # worker ends by itself when its stdin closes with this process.
        exit_now(code)
    return code


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once stdout and stderr are flushed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def _main(argv: list[str] | None) -> int:
    from gpu_triage.io.stopping import hold

    held = hold()  # first: before the imports and the rulebook
    looping = False
    try:
        ap = build_parser(command_word(sys.argv[1:] if argv is None else argv))
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
            exit_now(code)
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
    command = COMMANDS.get(args.command) if args.command else None
    if command is None and args.command is None and argv is None and sys.stdin.isatty():
        command, args = COMMANDS["tui"], ap.parse_args(["tui"])
    if command is None:
        ap.print_help()
        return 0
    handler = getattr(_module(command.module), command.handler)
    if not command.settles:
        startup_gc.settle()
    code: int = handler(args, ap) if command.wants_parser else handler(args)
    return code
