"""#14's TUI paste and first screen "what are you seeing?", #16's diff in the TUI."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.widgets import TextArea

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.model.snapshot import load_snapshot
from gpu_triage.ops.record import IncidentRecord, read_entries
from gpu_triage.ops.session import TriageSession
from gpu_triage.tui.app import TriageApp
from gpu_triage.tui.compare import DiffScreen, SnapshotPathModal
from gpu_triage.tui.intake import PasteScreen, SymptomScreen
from gpu_triage.tui.modals import ConfirmQuitModal
from gpu_triage.tui.screens import FindingsScreen

from .conftest import ROOT, demo_snapshot, screen_text

SCENARIOS = ROOT / "tests" / "scenarios"
SLOW, HEALTHY = SCENARIOS / "cm1-input-bound-storage.json", SCENARIOS / "healthy-busy.json"

# A responder's terminal, as pasted: prompts, a failing nvidia-smi, a dmesg grep.
TERMINAL = """\
root@gpu-node-017:~# nvidia-smi
Failed to initialize NVML: Driver/library version mismatch
NVML library version: 550.127
root@gpu-node-017:~# dmesg | grep -i nvrm
[  112.402213] NVRM: API mismatch: the client has the version 550.127.05, but
               NVRM: this kernel module has the version 550.90.07.  Please
               NVRM: make sure that this kernel module and all NVIDIA driver
               NVRM: components have the same version.
root@gpu-node-017:~#
"""


def _app(tmp_path: Path, snap: Any = None, *, ask: bool = False) -> TriageApp:
    book = load_rulebook()
    session = TriageSession(
        snap or demo_snapshot(),
        book,
        engine="reference",
        source="test",
        record=IncidentRecord(tmp_path / "incident.jsonl"),
    )
    return TriageApp(
        book=book, session=session, engine="reference", source_label="test", ask_symptom=ask
    )


async def _settle(app: TriageApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_first_screen_asks_what_you_see_and_ranks_its_differential(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, load_snapshot(SLOW), ask=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            assert isinstance(app.screen, SymptomScreen)
            assert "What are you seeing?" in screen_text(app)
            await pilot.press("down", "enter")  # the second choice: slow
            await _settle(app, pilot)
            assert isinstance(app.screen, FindingsScreen)
            assert app.session.symptom == "slow"
            assert app.session.history[-1].reason == "symptom: slow"
            entries = read_entries(tmp_path / "incident.jsonl")
            assert {"kind": "symptom", "symptom": "slow"}.items() <= entries[-2].items() or any(
                e["kind"] == "symptom" and e["symptom"] == "slow" for e in entries
            )
            # the same ranking `run --symptom slow` gives
            from gpu_triage.engine.evaluate import evaluate

            snap = load_snapshot(SLOW)
            snap.facts.job = app.session.snapshot.facts.job
            want = [f.rule_id for f in evaluate(snap, app.book, engine="reference").findings]
            assert [f.rule_id for f in app.session.doc.findings] == want

    asyncio.run(go())


def test_first_screen_can_be_skipped_and_is_not_shown_twice(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, ask=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            assert isinstance(app.screen, SymptomScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen) and app.session.symptom is None

    asyncio.run(go())


def test_a_pasted_terminal_session_becomes_facts_and_a_finding(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(app, pilot)
            before = {f.rule_id for f in app.session.doc.findings}
            await pilot.press("p")
            await pilot.pause()
            assert isinstance(app.screen, PasteScreen)
            area = app.screen.query_one("#paste-area", TextArea)
            assert area.has_focus
            area.insert(TERMINAL)  # what a bracketed paste does
            await pilot.press("q")  # the text area owns its keys: q is typed, not quit
            await pilot.pause()
            assert app.is_running and area.text.endswith("q")
            await pilot.press("backspace", "ctrl+s")
            await _settle(app, pilot)
            text = screen_text(app)
            assert "Read and added to the facts" in text
            assert "nvidia-smi" in text  # each block named by its command
            after = {f.rule_id for f in app.session.doc.findings}
            new = after - before
            assert new, "the mismatch gives a finding"
            assert any("mismatch" in r or "driver" in r for r in new), new
            assert app.session.doc.findings[0].severity.value == "critical"
            pasted = [e for e in read_entries(tmp_path / "incident.jsonl") if e["kind"] == "paste"]
            assert len(pasted) == 1 and pasted[0]["text"] == TERMINAL

    asyncio.run(go())


def test_unrecognised_paste_adds_nothing_and_says_so(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            facts_before = app.session.snapshot.facts.model_dump()
            await pilot.press("p")
            await pilot.pause()
            app.screen.query_one("#paste-area", TextArea).insert("lorem ipsum\ndolor sit amet\n")
            await pilot.press("ctrl+q")  # unread text: quitting asks
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuitModal)
            await pilot.press("n")
            await pilot.pause()
            await pilot.press("ctrl+s")
            await _settle(app, pilot)
            assert "Nothing recognised: no fact was added" in screen_text(app)
            assert "not recognised" in screen_text(app)
            assert app.session.snapshot.facts.model_dump() == facts_before

    asyncio.run(go())


def test_a_replayed_record_reads_its_paste_again(tmp_path: Path) -> None:
    book = load_rulebook()
    rec = tmp_path / "incident.jsonl"
    s1 = TriageSession(demo_snapshot(), book, engine="reference", record=IncidentRecord(rec))
    s1.add_paste(TERMINAL)
    s1.set_symptom("crash")
    s2 = TriageSession(demo_snapshot(), book, engine="reference", record=IncidentRecord(rec))
    assert s2.replayed is not None and s2.replayed.pastes == 1
    assert s2.symptom == "crash"
    assert s2.snapshot.facts.model_dump() == s1.snapshot.facts.model_dump()


def test_compare_with_a_healthy_twin_ranks_the_cause_on_top(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, load_snapshot(SLOW))
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(app, pilot)
            await pilot.press("c")
            await pilot.pause()
            assert isinstance(app.screen, SnapshotPathModal)
            await pilot.press(*str(HEALTHY), "enter")
            await _settle(app, pilot)
            await pilot.pause(0.2)
            assert isinstance(app.screen, DiffScreen)
            report = app.screen.report
            assert report.findings[0].side == "slow_only"
            assert report.findings[0].rule_id == "input-bound-pipeline"
            lines = screen_text(app).splitlines()
            at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Only on"))
            assert report.findings[0].title in lines[at + 1]  # the cause, on top
            assert "GPUs 0-7" in lines[at + 1]  # its eight GPUs named as people say it
            text = "\n".join(lines)
            assert "disk.util_pct" in text and "Facts that differ" in text

    asyncio.run(go())


def test_compare_with_a_missing_snapshot_says_why(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("c")
            await pilot.pause()
            await pilot.press(*str(tmp_path / "nope.json"), "enter")
            await _settle(app, pilot)
            assert isinstance(app.screen, FindingsScreen)
            assert any("nope.json" in str(n.message) for n in app._notifications)

    asyncio.run(go())
