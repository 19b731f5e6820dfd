"""`gpu-triage tui` hands the TUI a typed TuiOptions built from its flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_triage.cli import main
from gpu_triage.ops.session import TuiOptions


def test_cli_builds_typed_tui_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TuiOptions] = []
    monkeypatch.setattr("gpu_triage.tui.app.run_tui", lambda opts: seen.append(opts) or 0)
    argv = ["tui", "--demo", "--engine", "reference", "--window", "2.5"]
    argv += ["--record", str(tmp_path / "r.jsonl"), "--rules", str(tmp_path), "--no-builtin"]
    argv += ["--symptom", "slow"]
    assert main(argv) == 0
    assert seen == [
        TuiOptions(
            rules=(tmp_path,),
            include_builtin=False,
            engine="reference",
            demo="incident",
            window_s=2.5,
            record=tmp_path / "r.jsonl",
            symptom="slow",
        )
    ]


@pytest.mark.parametrize(
    ("engine", "order"), [("auto", "prespawn textual"), ("reference", "textual")]
)
def test_tui_starts_the_durable_worker_before_importing_textual(
    engine: str, order: str, tmp_path: Path
) -> None:
    """The worker's interpreter starts beside Textual's import (cold start), and only when
    the durable engine may be used."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "log = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual': log.append('textual')\n"
        "sys.meta_path.insert(0, Spy())\n"
        "from gpu_triage.engine import durable_worker\n"
        "durable_worker.prespawn = lambda: log.append('prespawn')\n"
        "from gpu_triage.cli import main\n"
        f"rc = main(['tui', '--snapshot', 'missing.json', '--engine', {engine!r}])\n"
        "print(rc, ' '.join(log))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    rc, *log = res.stdout.split()
    assert rc == "3"  # the missing snapshot, after the start
    assert " ".join(dict.fromkeys(log)) == order  # the first time each happened


@pytest.mark.parametrize(
    ("argv", "spawned"),
    [
        (["tui"], True),
        (["tui", "--engine", "reference"], False),
        (["run", "--snapshot", "s.json"], True),
        (["facts", "docs"], False),
    ],
)
def test_the_cli_starts_the_worker_first_for_the_commands_that_use_it(
    argv: list[str], spawned: bool, tmp_path: Path
) -> None:
    """`gpu-triage tui` and `run` start the durable_rules worker as the CLI module is
    imported, before pydantic and the rulebook: it has its ruleset loaded by the first
    evaluation (the TUI's first paint waited for it)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"sys.argv = ['gpu-triage', *{argv!r}]\n"
        "from gpu_triage.engine import durable_worker\n"
        "log = []\n"
        "durable_worker.prespawn = lambda: log.append('prespawn')\n"
        "import gpu_triage.cli\n"
        "print(' '.join(log) or 'none')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert res.stdout.split() == (["prespawn"] if spawned else ["none"])


def _opts(tmp_path: Path, **kw: object) -> TuiOptions:
    return TuiOptions(
        demo="incident", engine="reference", record=tmp_path / "r.jsonl", symptom="none", **kw
    )


def _shows_findings_once_evaluated(app: Any) -> None:
    """Run ``app`` headless until its evaluations end: the findings are listed."""
    import asyncio

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.session.doc is not None and app.screen._keys[1:]

    asyncio.run(go())


def test_a_snapshot_is_evaluated_before_the_first_frame(tmp_path: Path) -> None:
    """Its first frame shows the findings, on the findings screen itself (no empty
    default screen under it)."""
    import asyncio

    from gpu_triage.tui.app import build_app
    from gpu_triage.tui.screens import FindingsScreen

    app = build_app(_opts(tmp_path))
    assert app.session.doc is not None and len(app.session.history) == 1

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert [type(s) for s in app.screen_stack] == [FindingsScreen]
            assert app.screen._keys[1:]  # the findings listed, without waiting
            await app.workers.wait_for_complete()
            assert len(app.session.history) == 1  # not evaluated a second time

    asyncio.run(go())


def test_a_large_snapshot_is_evaluated_behind_the_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One beyond the bound opens at once on "evaluating…", then shows its findings."""
    from gpu_triage.tui import app as tui_app

    monkeypatch.setattr(tui_app, "EVALUATE_BEFORE_PAINT_ITEMS", 0)
    app = tui_app.build_app(_opts(tmp_path))
    assert app.session.doc is None

    _shows_findings_once_evaluated(app)


def test_the_tui_runs_with_the_collector_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector: None
) -> None:
    """The collector held by the process entry runs again, its start-up frozen, before
    the app's loop starts (a session of hours must collect its garbage)."""
    import gc

    from gpu_triage.io import startup_gc
    from gpu_triage.tui import app as tui_app

    seen: list[bool] = []
    monkeypatch.setattr(tui_app.TriageApp, "run", lambda self: seen.append(gc.isenabled()))
    startup_gc.hold()
    assert tui_app.run_tui(_opts(tmp_path)) == 0
    assert seen == [True]


def test_the_first_paint_imports_no_collector_or_parser(tmp_path: Path) -> None:
    """A snapshot's findings need the engine only: the collectors, the parsers and the
    paste intake are imported when a collection, a step's output or a paste comes."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import gpu_triage.ops.session, gpu_triage.tui.app\n"
        "print(' '.join(m for m in sys.modules if m.startswith('gpu_triage.collectors')))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert res.stdout.split() == []


def test_the_first_frame_loads_no_other_screen_or_dialog(tmp_path: Path) -> None:
    """The findings screen is drawn without the runbook and facts screens, the dialogs,
    the keys screen and the table and log widgets they use (about 8 ms of the first
    paint): each is imported when first opened."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from gpu_triage.ops.session import TuiOptions\n"
        "from gpu_triage.tui.app import build_app\n"
        "app = build_app(TuiOptions(demo='incident', engine='reference', symptom='none',"
        f" record={str(tmp_path / 'r.jsonl')!r}))\n"
        "async def go():\n"
        "    async with app.run_test(size=(80, 24)) as pilot:\n"
        "        await pilot.pause()\n"
        "        assert app.screen._keys[1:]\n"  # the findings are on screen
        "asyncio.run(go())\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    loaded = set(res.stdout.split())
    later = {
        "gpu_triage.tui.runbook_screen",
        "gpu_triage.tui.facts_screen",
        "gpu_triage.tui.modals",
        "gpu_triage.tui.keys",
        "textual.widgets._data_table",
        "textual.widgets._log",
    }
    assert "gpu_triage.tui.screens" in loaded
    assert loaded & later == set()


def test_a_first_evaluation_that_fails_is_done_again_by_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure before the first frame does not end the TUI: the app evaluates again
    behind its screen (where a failure is shown, as after any step)."""
    from gpu_triage.ops.session import TriageSession
    from gpu_triage.tui.app import build_app

    real = TriageSession.evaluate
    calls: list[str] = []

    def flaky(self: TriageSession, reason: str) -> Any:
        calls.append(reason)
        if len(calls) == 1:
            real(self, reason)  # evaluated and recorded, then it breaks
            raise RuntimeError("engine broke")
        return real(self, reason)

    monkeypatch.setattr(TriageSession, "evaluate", flaky)
    app = build_app(_opts(tmp_path))
    assert app.session.doc is None and app.session.history == []

    _shows_findings_once_evaluated(app)
    assert calls == ["opened", "opened"]
