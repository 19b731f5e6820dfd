"""The COMMANDS table: it registers and dispatches every command, --help lists them all
with the help their modules give, and a command imports only its own module (the cold
start of an unattended run pays for nothing else)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage import cli
from tests.conftest import ROOT

SNAPSHOT = ROOT / "tests" / "scenarios" / "xid-storm-contained-ecc.json"


def _helps(ap: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help for a in action._choices_actions}


def test_table_help_is_what_each_module_registers_and_order_is_kept() -> None:
    full = _helps(cli.build_parser())
    assert list(full) == list(cli.COMMANDS)
    assert full == {name: c.help for name, c in cli.COMMANDS.items()}


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_a_lazy_parser_lists_every_command_and_parses_its_own_fully(name: str) -> None:
    lazy = cli.build_parser(name)
    assert _helps(lazy) == _helps(cli.build_parser())
    full = cli.common.subparser(cli.build_parser(), name)
    own = cli.common.subparser(lazy, name)
    assert [a.option_strings for a in own._actions] == [a.option_strings for a in full._actions]


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["run", "--snapshot", "x"], "run"),
        (["slurm-healthcheck"], "slurm-healthcheck"),
        (["--version"], None),
        (["-h"], None),
        ([], None),
        (["rnu"], None),  # a typo: the full parser names the choices in its error
        (["--snapshot", "run"], None),
    ],
)
def test_command_word(argv: list[str], word: str | None) -> None:
    assert cli.command_word(argv) == word


def test_each_command_dispatches_to_its_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []
    for name, command in cli.COMMANDS.items():
        module = cli._module(command.module)

        def handler(args: argparse.Namespace, ap: object = None, _name: str = name) -> int:
            seen.append((args.command, ap is not None))
            return 7

        monkeypatch.setattr(module, command.handler, handler)
    argv = {"explain": ["explain", "--snapshot", "s", "R"], "facts": ["facts", "docs"]}
    argv |= {"rules": ["rules", "list"], "diff": ["diff", "a", "b"], "fleet": ["fleet", "h"]}
    for name in cli.COMMANDS:
        assert cli.main(argv.get(name, [name])) == 7, name
    assert seen == [(n, c.wants_parser) for n, c in cli.COMMANDS.items()]


def test_run_imports_no_other_command_module_and_never_textual(tmp_path: Path) -> None:
    out = tmp_path / "findings.json"
    code = (
        "import sys; from gpu_triage import cli; "
        f"rc = cli.main(['run', '--snapshot', {str(SNAPSHOT)!r}, '--format', 'json', "
        f"'--engine', 'reference', '--out', {str(out)!r}]); "
        "print(sorted(m for m in sys.modules if m.startswith('gpu_triage.cli.') "
        "or m.split('.')[0] in ('textual', 'rich', 'yaml', 'asyncio')))"
    )
    env = {"GPU_TRIAGE_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    for run in ("compiles the rulebook", "reads it from the cache"):
        res = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=tmp_path,
        )
        assert res.returncode == 0, (run, res.stderr)
        assert json.loads(out.read_text())["exit_status"] == 2
    # the second run: no other command, no Textual, no YAML (the rulebook came cached), no
    # asyncio (see gpu_triage.model.pydantic_import)
    loaded = json.loads(res.stdout.strip().replace("'", '"'))
    assert loaded == ["gpu_triage.cli.collect", "gpu_triage.cli.common", "gpu_triage.cli.run"]


ASYNCIO_PROBE = """
import sys, warnings
from gpu_triage import cli
from gpu_triage.model.snapshot import Snapshot
Snapshot.model_validate({})
print("asyncio" in sys.modules)
import asyncio
print(asyncio.run.__module__)
import pydantic_core.core_schema as cs
warnings.simplefilter("error")
try:
    cs.field_before_validator_function(lambda v, i: v, "f", cs.int_schema())
except DeprecationWarning:
    print("warned")
"""


def test_asyncio_left_out_while_pydantic_loads_is_the_real_one_afterwards() -> None:
    res = subprocess.run(
        [sys.executable, "-c", ASYNCIO_PROBE], capture_output=True, text=True, check=True
    )
    # not loaded by the CLI's models; the real asyncio when asked; pydantic-core's
    # deprecated functions still say so
    assert res.stdout.split() == ["False", "asyncio.runners", "warned"]
