"""#17's TUI items, driven with Pilot: text inputs own their keys, quitting asks when it
would lose work, enter opens the detail, findings filter and sort, the GPU overview,
visible focus, a footer and help that fit 80 columns, every action in the palette."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.io.commands import group_alive
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.record import IncidentRecord
from gpu_triage.ops.session import TriageSession
from gpu_triage.tui.app import TriageApp
from gpu_triage.tui.facts_screen import FactsScreen
from gpu_triage.tui.gpus import GpuScreen
from gpu_triage.tui.keys import KeysScreen, screen_actions
from gpu_triage.tui.modals import ConfirmQuitModal, NoteModal
from gpu_triage.tui.runbook_screen import RunbookScreen
from gpu_triage.tui.screens import DetailScreen, FindingsScreen

from .conftest import (
    H100_Q,
    SLEEPER,
    as_local_node,
    demo_snapshot,
    python_cat,
    screen_text,
    write_rulebook,
)

# Every letter a screen binds, inside words a responder types.
TYPED = "quota temperature exported facts gpus why runbook severity sort history note"


def _app(tmp_path: Path, snap: Snapshot | None = None, *, builtin: bool = True) -> TriageApp:
    if builtin:
        book = load_rulebook()
    else:
        rules = write_rulebook(tmp_path, step_cmd=python_cat(H100_Q), sleep_cmd=SLEEPER)
        book = load_rulebook([rules], include_builtin=False, allow_untrusted=True)
    record = IncidentRecord(tmp_path / "rec" / "incident.jsonl")
    session = TriageSession(
        snap or demo_snapshot(), book, engine="reference", source="test", record=record
    )
    as_local_node(session, tmp_path)
    return TriageApp(book=book, session=session, engine="reference", source_label="test")


async def _settle(app: TriageApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def _exported(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "rec").glob("*.md")) + sorted((tmp_path / "rec").glob("*.json"))


def _run(coro: Any) -> None:
    asyncio.run(coro)


# --------------------------------------------------------------------------- 1. inputs


def test_facts_search_is_focused_and_owns_every_key(tmp_path: Path) -> None:
    """The bug: typing "temperature" exported three times (e), "quota" quit (q)."""

    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("f")
            await pilot.pause()
            assert isinstance(app.screen, FactsScreen)
            box = app.screen.query_one("#search", Input)
            assert box.has_focus  # it looks focused because it is
            await pilot.press(*TYPED)
            await pilot.pause(0.4)
            assert box.value == TYPED
            assert app.is_running and isinstance(app.screen, FactsScreen)
            assert _exported(tmp_path) == [] and app.last_export is None
            await pilot.press("ctrl+a", "ctrl+k", *"gpu 2 temperature_gpu")
            await pilot.pause(0.4)
            assert app.screen.query_one("#facts-table").row_count == 1
            await pilot.press("enter")  # enter moves to the table: keys are keys again
            await pilot.pause()
            assert app.screen.query_one("#facts-table").has_focus

    _run(go())


@pytest.mark.parametrize("opener", ["note", "filter"])
def test_every_text_input_owns_its_keys(tmp_path: Path, opener: str) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("n" if opener == "note" else "slash")
            await pilot.pause()
            box = app.screen.focused
            assert isinstance(box, Input)
            screen = app.screen
            await pilot.press(*TYPED)
            await pilot.pause(0.3)
            assert box.value == TYPED
            assert app.is_running and app.screen is screen
            assert _exported(tmp_path) == []

    _run(go())


# --------------------------------------------------------------------------- 2. quitting


def test_quit_with_a_typed_note_asks_and_keeps_it(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("n", *"riser reseated")
            await pilot.press("ctrl+q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuitModal)
            text = " ".join(screen_text(app).split())
            assert "a note on GPU fell off the bus" in text and "is typed but not saved" in text
            await pilot.press("n")
            await pilot.pause()
            assert isinstance(app.screen, NoteModal) and app.is_running
            assert app.screen.query_one("#note", Input).value == "riser reseated"
            await pilot.press("enter")  # saved: nothing is lost by quitting now
            await pilot.pause()
            await pilot.press("q")
            await pilot.pause()
            assert not app.is_running

    _run(go())


@pytest.mark.slow
def test_quit_with_a_step_running_asks_then_stops_its_group(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, builtin=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            screen = app.screen
            assert isinstance(screen, FindingsScreen)
            f = next(f for f in app.session.ordered(app.session.doc) if f.rule_id == "test-thermal")
            screen.query_one("#findings", OptionList).highlighted = screen._keys.index(
                (f.rule_id, f.subject_key)
            )
            await pilot.press("r", "down", "r", "y")
            runbook = app.screen
            assert isinstance(runbook, RunbookScreen)
            for _ in range(100):
                await pilot.pause(0.05)
                if any("sleeping" in line for line in runbook.query_one("#output").lines):
                    break
            assert runbook.running == 1
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuitModal)
            await pilot.press("y")
            for _ in range(200):
                await pilot.pause(0.05)
                if not app.is_running:
                    break
            assert not app.is_running
        result = app.session.steps[(f.rule_id, f.subject_key, 1)].result
        assert result is not None and result.cancelled
        assert result.pgid is not None and not group_alive(result.pgid)

    _run(go())


def test_quit_with_nothing_to_lose_does_not_ask(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("q")
            await pilot.pause()
            assert not app.is_running

    _run(go())


# --------------------------------------------------------------------------- 3. detail


def test_enter_opens_the_detail_using_the_whole_terminal(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            first = app.screen.current()
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen)
            assert app.screen.finding.rule_id == first.rule_id
            lines = [ln for ln in screen_text(app).splitlines()[:-1] if ln.strip()]
            assert len(lines) >= 18, lines  # was about 10 in the stacked pane
            assert "Symptom:" in screen_text(app) and "Cause:" in screen_text(app)
            await pilot.press("r")  # the runbook from the detail
            await pilot.pause()
            assert isinstance(app.screen, RunbookScreen)
            await pilot.press("escape", "escape")
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen)

    _run(go())


# --------------------------------------------------------------------------- 4. filter, sort


def _listed(screen: FindingsScreen) -> list[tuple[str, str]]:
    return [k for k in screen._keys if k]


def test_findings_filter_by_text_and_severity_and_sort(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(app, pilot)
            screen = app.screen
            assert isinstance(screen, FindingsScreen)
            everything = _listed(screen)
            await pilot.press("slash", *"pcie 5", "enter")
            await pilot.pause(0.3)
            shown = _listed(screen)
            assert shown and len(shown) < len(everything)
            assert all("pcie" in k[0] for k in shown), shown
            assert "filter “pcie 5”" in screen_text(app)  # the list says it is narrowed
            assert screen.query_one("#findings").has_focus
            await pilot.press("escape")  # clears it
            await pilot.pause()
            assert _listed(screen) == everything
            await pilot.press("v", "v")  # all -> warning and above -> critical only
            await pilot.pause()
            doc = app.session.doc
            critical = {
                (f.rule_id, f.subject_key)
                for f in app.session.ordered(doc)
                if f.severity.value == "critical"
            }
            assert set(_listed(screen)) == critical
            await pilot.press("v")
            await pilot.pause()
            await pilot.press("s", "s")  # rank -> severity -> stage
            await pilot.pause()
            assert screen.view.sort == "stage"
            fired = [
                k
                for k in _listed(screen)
                if any((f.rule_id, f.subject_key) == k for f in doc.findings)
            ]
            ranks = [app.session.find(*k).stage.rank for k in fired]
            assert ranks == sorted(ranks)

    _run(go())


# --------------------------------------------------------------------------- 5. GPUs


def test_gpu_overview_one_row_per_gpu_and_enter_opens_the_worst(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("g")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, GpuScreen)
            assert screen.query_one("#gpu-table").row_count == 8
            text = screen_text(app)
            assert "GPU 3 LOST" in text and "79" in text
            await pilot.press("down", "down", "down")
            await pilot.pause()
            assert "worst: CRITICAL GPU fell off the bus" in screen_text(app)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen)
            assert app.screen.finding.severity.value == "critical"

    _run(go())


# ------------------------------------------------ 6. focus, footer, help, palette


def _footer(app: TriageApp) -> str:
    return screen_text(app).splitlines()[-1]


async def _open(app: TriageApp, pilot: Any, name: str) -> None:
    keys = {
        "findings": (),
        "detail": ("enter",),
        "runbook": ("r",),
        "facts": ("f", "enter"),
        "gpus": ("g",),
        "history": ("h",),
        "explain": ("w",),
    }[name]
    for k in keys:
        await pilot.press(k)
        await pilot.pause()


@pytest.mark.parametrize(
    "name", ["findings", "detail", "runbook", "facts", "gpus", "history", "explain"]
)
def test_footer_fits_80_columns_and_palette_has_every_action(tmp_path: Path, name: str) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await _open(app, pilot, name)
            footer = _footer(app)
            assert footer.rstrip().endswith("^p palette"), footer  # nothing pushed off
            screen = app.screen
            shown = [
                b.binding.description
                for b in screen.active_bindings.values()
                if b.binding.show and b.binding.description
            ]
            for desc in shown:
                assert desc in footer, (desc, footer)
            titles = {c.title for c in app.get_system_commands(screen)}
            for binding in type(screen).BINDINGS:
                assert not isinstance(binding, tuple)
                hidden = screen.check_action(binding.action, ()) is False  # e.g. nothing to clear
                if binding.description and not binding.action.endswith("focus_next") and not hidden:
                    assert binding.description in titles, binding
            assert "Quit" in titles and "Keys" in titles

    _run(go())


def test_palette_runs_an_action_by_name(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("ctrl+p")
            await pilot.pause(0.3)
            await pilot.press(*"GPUs")
            await pilot.pause(0.6)
            await pilot.press("enter")
            await pilot.pause(0.3)
            assert isinstance(app.screen, GpuScreen)

    _run(go())


def test_keys_overlay_does_not_squeeze_the_main_view(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 45)) as pilot:  # tall: the whole list in view
            await _settle(app, pilot)
            findings = app.screen.query_one("#findings")
            assert findings.outer_size.width == 80
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, KeysScreen)
            text = screen_text(app)
            for a in screen_actions(app, app.screen_stack[-2]):
                assert a.title in text or a.where == "app", a.title
            assert findings.outer_size.width == 80  # the list behind keeps its width
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen)

    _run(go())


def test_focus_is_visible_without_colour(tmp_path: Path) -> None:
    """The focused pane has a heavy frame and its title reversed: seen with NO_COLOR."""

    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(app, pilot)
            text = screen_text(app)
            assert "┏━ Findings" in text and "╭─ Detail" in text
            await pilot.press("tab")
            await pilot.pause()
            text = screen_text(app)
            assert "╭─ Findings" in text and "┏━ Detail" in text

    _run(go())
