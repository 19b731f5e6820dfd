"""The garbage collector held while a process starts, then frozen and running again."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from gpu_triage.io import startup_gc

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "scenarios" / "xid-storm-contained-ecc.json"


def test_hold_then_settle_freezes_and_runs_the_collector_again(collector: None) -> None:
    gc.enable()
    startup_gc.hold()
    assert not gc.isenabled() and startup_gc._held
    startup_gc.settle()
    assert gc.isenabled() and not startup_gc._held
    assert gc.get_freeze_count() > 0  # what existed is kept out of its passes
    startup_gc.settle()  # once is enough: a second settle changes nothing
    assert gc.isenabled()


def test_a_collector_it_did_not_hold_is_left_as_it_was(collector: None) -> None:
    gc.disable()  # someone else's choice (a caller, a test harness)
    startup_gc.hold()
    startup_gc.settle()
    assert not gc.isenabled() and gc.get_freeze_count() == 0
    gc.enable()
    startup_gc.settle()  # never held: nothing frozen, nothing changed
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_library_call_of_main_never_touches_the_collector(collector: None) -> None:
    from gpu_triage.cli import main

    gc.enable()
    assert main(["facts", "who", "gpu.name"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


PROBE = """
import gc, sys
from gpu_triage import cli
from gpu_triage.cli import common
def seen(what):  # printed at once: a one-shot command ends its process with os._exit
    print(f"{{what}}={{gc.isenabled()}}", flush=True)
load_book = common.load_book
def probe_load(args):
    seen("rulebook")
    return load_book(args)
common.load_book = probe_load
{patch}
sys.argv = ["gpu-triage", *sys.argv[1:]]
cli.main()
"""

RUN_PATCH = """
import gpu_triage.cli.run as run_cmd
run_cmd.load_book = probe_load
from gpu_triage.ops import unattended
evaluate = unattended.evaluate
def probe_eval(*a, **k):
    seen("evaluate")
    return evaluate(*a, **k)
unattended.evaluate = probe_eval
"""

OTHER_PATCH = """
import gpu_triage.cli.facts as facts_cmd
real = facts_cmd.cmd_facts
def probe_cmd(args, ap):
    seen("command")
    return real(args, ap)
facts_cmd.cmd_facts = probe_cmd
"""


def _probe(patch: str, *argv: str, tmp: Path) -> str:
    code = PROBE.format(patch=patch)
    res = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={"PATH": "/usr/bin:/bin", "GPU_TRIAGE_CACHE_DIR": str(tmp / "cache")},
        check=False,
    )
    return " ".join(line for line in res.stdout.splitlines() if "=" in line) or res.stderr


def test_a_run_loads_its_rulebook_held_and_evaluates_with_the_collector_on(
    tmp_path: Path,
) -> None:
    out = str(tmp_path / "findings.json")
    argv = ["run", "--snapshot", str(SNAPSHOT), "--engine", "reference", "--out", out]
    assert _probe(RUN_PATCH, *argv, tmp=tmp_path) == "rulebook=False evaluate=True"


def test_any_other_command_starts_with_the_collector_on(tmp_path: Path) -> None:
    assert (
        _probe(OTHER_PATCH, "facts", "who", "gpu.name", tmp=tmp_path)
        == "command=True rulebook=True"
    )
