"""The TUI driven with Pilot: open, select, run a step, cancel one, answer, export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.findings import Status
from gpu_triage.io.commands import group_alive
from gpu_triage.model.facts import UnavailableReason
from gpu_triage.model.snapshot import CollectorState, Snapshot
from gpu_triage.ops.record import IncidentRecord, read_entries
from gpu_triage.ops.session import TriageSession
from gpu_triage.tui.app import TriageApp
from gpu_triage.tui.facts_screen import FactsScreen
from gpu_triage.tui.modals import ConfirmQuitModal
from gpu_triage.tui.runbook_screen import RunbookScreen
from gpu_triage.tui.screens import FindingsScreen

from .conftest import (
    H100_Q,
    SLEEPER,
    as_local_node,
    demo_snapshot,
    python_cat,
    screen_text,
    write_rulebook,
)


def _snapshot_gpu0_unknown() -> Snapshot:
    """The demo incident, with GPU 0's clock-event reasons not readable."""
    snap = demo_snapshot()
    g0 = snap.facts.gpus[0]
    assert g0.pci_bus_id == "0000:18:00.0"  # the bus id of the recorded H100 output
    for name in ("throttle_hw_thermal_slowdown", "throttle_sw_thermal_slowdown"):
        setattr(g0, name, None)
        g0.mark_unavailable(name, UnavailableReason.NOT_SUPPORTED, "test")
    return snap


def _app(tmp_path: Path, snap: Snapshot, *, builtin: bool = True, local: bool = True) -> TriageApp:
    if builtin:
        book = load_rulebook()
    else:
        rules = write_rulebook(tmp_path, step_cmd=python_cat(H100_Q), sleep_cmd=SLEEPER)
        book = load_rulebook([rules], include_builtin=False, allow_untrusted=True)
    record = IncidentRecord(tmp_path / "incident.jsonl")
    session = TriageSession(snap, book, engine="reference", source="test", record=record)
    if local:
        as_local_node(session, tmp_path)
    return TriageApp(book=book, session=session, engine="reference", source_label="test")


async def _settle(app: TriageApp, pilot: object) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


def _select(screen: FindingsScreen, rule_id: str, subject_key: str) -> None:
    from textual.widgets import OptionList

    idx = screen._keys.index((rule_id, subject_key))
    screen.query_one("#findings", OptionList).highlighted = idx


def test_open_snapshot_shows_ranked_findings_and_sections(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, demo_snapshot())
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            assert isinstance(app.screen, FindingsScreen)
            doc = app.session.doc
            assert doc is not None
            keys = [k for k in app.screen._keys if k]
            ordered = TriageSession.ordered(doc)
            assert keys == [(f.rule_id, f.subject_key) for f in ordered]
            text = screen_text(app)
            assert "CRITICAL GPU fell off the bus" in text  # severity in words
            assert "1 critical" in text and "cannot evaluate" in text
            # the detail of the first (most urgent) finding is shown
            assert "Symptom:" in text
            # sections exist even when scrolled out of view
            ol_text = [str(o.prompt) for o in app.screen.query_one("#findings").options]
            assert any("CANNOT EVALUATE" in t for t in ol_text)
            assert any("NEEDS CONFIRMATION" in t for t in ol_text)

    asyncio.run(go())


def test_select_a_finding_shows_detail_why_and_facts(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, demo_snapshot())
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(app, pilot)
            await pilot.press("down")
            await pilot.pause()
            f = app.screen.current()
            assert f is not None and f.rule_id == "gpu-thermal-throttling"
            detail = str(app.screen.query_one("#detail").render())
            for part in (
                "Symptom:",
                "Cause:",
                "Fix:",
                "Evidence",
                "gpu.temperature_slowdown_c",
                "°C",
                "Competing causes",
                "ruled out",
                "Runbook",
                "references:",
            ):
                assert part in detail, part
            await pilot.press("w")
            await pilot.pause()
            assert "FIRED" in screen_text(app) and "when:" in screen_text(app)
            await pilot.press("escape", "f")
            await pilot.pause()
            assert isinstance(app.screen, FactsScreen)
            await pilot.press(*"gpu 2 temperature_gpu")
            await pilot.pause(0.4)
            rows = app.screen.query_one("#facts-table").row_count
            assert rows == 1
            await pilot.press("escape", "escape", "escape")
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen)

    asyncio.run(go())


@pytest.mark.slow
def test_run_a_step_parses_output_and_reevaluates(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, _snapshot_gpu0_unknown(), builtin=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            doc = app.session.doc
            assert doc is not None
            unknown = [f for f in doc.cannot_evaluate if f.rule_id == "test-thermal"]
            assert [f.subject_key for f in unknown] == ["gpu:0000:18:00.0"]
            _select(app.screen, "test-thermal", "gpu:0000:18:00.0")
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, RunbookScreen)
            await pilot.press("r")
            await pilot.pause()
            assert "Run this command?" in screen_text(app)
            assert "sys.stdout.write" in screen_text(app)
            await pilot.press("y")
            await _settle(app, pilot)
            await pilot.pause(0.2)
            runbook = app.screen
            assert isinstance(runbook, RunbookScreen)
            log_text = "\n".join(runbook.query_one("#output").lines)
            assert "Clocks Event Reasons" in log_text or "HW Thermal Slowdown" in log_text
            assert "outcome: ruled out" in log_text
            st = app.session.steps[("test-thermal", "gpu:0000:18:00.0", 0)]
            assert st.outcome == "ruled out"
            g0 = app.session.snapshot.facts.gpus[0]
            assert g0.throttle_hw_thermal_slowdown is False
            # re-evaluated: GPU 0 is no longer "cannot evaluate"
            doc = app.session.doc
            assert not [f for f in doc.cannot_evaluate if f.rule_id == "test-thermal"]
            assert len(app.session.history) == 2
            assert "no longer fires" in screen_text(app)
            kinds = [e["kind"] for e in read_entries(tmp_path / "incident.jsonl")]
            assert kinds.count("findings") == 2 and "command" in kinds

    asyncio.run(go())


@pytest.mark.slow
def test_cancel_a_long_step_kills_its_process_group(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, _snapshot_gpu0_unknown(), builtin=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            _select(app.screen, "test-thermal", "gpu:0000:18:00.0")
            await pilot.press("r", "down", "r", "y")
            runbook = app.screen
            assert isinstance(runbook, RunbookScreen)
            for _ in range(100):
                await pilot.pause(0.05)
                if any("sleeping" in line for line in runbook.query_one("#output").lines):
                    break
            assert runbook.running == 1
            await pilot.press("escape")  # refused while running
            assert app.screen is runbook
            await pilot.press("q")  # quitting asks first, naming the running step
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuitModal)
            assert "Wait a long time" in screen_text(app) and "is running" in screen_text(app)
            await pilot.press("n")  # stay: the step keeps running
            await pilot.pause()
            assert app.screen is runbook and app.is_running and runbook.running == 1
            await pilot.press("c")
            await _settle(app, pilot)
            result = app.session.steps[("test-thermal", "gpu:0000:18:00.0", 1)].result
            assert result is not None and result.cancelled
            assert result.pgid is not None and not group_alive(result.pgid)
            assert runbook.running is None

    asyncio.run(go())


def test_answer_a_question_reevaluates(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, demo_snapshot(), builtin=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            doc = app.session.doc
            assert [f.rule_id for f in doc.needs_confirmation] == ["test-question"]
            _select(app.screen, "test-question", "node")
            await pilot.press("a")
            await pilot.pause()
            assert "Is the training job stalled?" in screen_text(app)
            await pilot.press("y")
            await _settle(app, pilot)
            assert app.session.snapshot.facts.answers == {"training_stalled": True}
            doc = app.session.doc
            assert not doc.needs_confirmation
            assert any(
                f.rule_id == "test-question" and f.status is Status.FIRED for f in doc.findings
            )
            entries = read_entries(tmp_path / "incident.jsonl")
            assert {"kind": "answer", "question": "training_stalled"}.items() <= {
                k: v for e in entries if e["kind"] == "answer" for k, v in e.items()
            }.items()

    asyncio.run(go())


def test_mark_note_and_export_record(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, demo_snapshot())
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, RunbookScreen)
            await pilot.press("s", "n", *"reseated the riser", "enter")
            await pilot.pause()
            await pilot.press("escape", "e")
            await pilot.pause()
            assert app.last_export is not None
            md, js = app.last_export
            text = md.read_text()
            assert "# Incident record: gpu-node-017" in text
            assert "as skipped" in text and "reseated the riser" in text
            data = json.loads(js.read_text())
            assert [e["kind"] for e in data["events"]][:2] == ["opened", "findings"]

    asyncio.run(go())


def test_risky_step_needs_a_second_confirmation(tmp_path: Path) -> None:
    from gpu_triage.engine.model import RunbookStep
    from gpu_triage.tui.modals import ConfirmRunModal, SecondConfirmModal

    async def go() -> None:
        app = _app(tmp_path, demo_snapshot())
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("r")
            await pilot.pause()
            runbook = app.screen
            assert isinstance(runbook, RunbookScreen)
            risky = RunbookStep(
                title="Reset the GPU",
                command=python_cat(H100_Q),
                meaning="m",
                decision="d",
                changes_system=True,
            )
            runbook.finding = runbook.finding.model_copy(update={"runbook": [risky]})
            runbook._fill_steps()
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmRunModal)
            assert "CHANGES THE SYSTEM" in screen_text(app)
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, SecondConfirmModal)
            await pilot.press("y", "enter")  # anything but "run" does not run it
            await _settle(app, pilot)
            assert app.screen is runbook
            assert not app.session.steps.get(
                (runbook.finding.rule_id, runbook.finding.subject_key, 0)
            )

    asyncio.run(go())


def test_narrow_layout_stacks_panes(tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path, demo_snapshot())
        async with app.run_test(size=(60, 20)) as pilot:
            await _settle(app, pilot)
            assert app.screen.has_class("-narrow")
            lst, detail = app.screen.query_one("#findings"), app.screen.query_one("#detail-pane")
            assert detail.region.y >= lst.region.bottom
            await pilot.resize_terminal(140, 40)
            await pilot.pause()
            assert app.screen.has_class("-wide")
            assert detail.region.x >= lst.region.right

    asyncio.run(go())


def test_live_mode_shows_collector_progress_then_findings(tmp_path: Path) -> None:
    import threading

    gate = threading.Event()

    def collect(progress):  # type: ignore[no-untyped-def]
        progress("nvml", None)
        progress("host", None)
        progress("nvml", CollectorState.OK)
        gate.wait(5)
        progress("host", CollectorState.FAILED)
        return demo_snapshot()

    async def go() -> None:
        book = load_rulebook()
        app = TriageApp(
            book=book,
            collect=collect,
            collector_names=["nvml", "host"],
            engine="reference",
            record_path=tmp_path / "live.jsonl",
        )
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(100):
                await pilot.pause(0.02)
                states = getattr(app.screen, "states", {})
                if states.get("nvml") == "ok":
                    break
            await pilot.pause()
            text = screen_text(app)
            assert "nvml" in text and "ok" in text and "running" in text
            gate.set()
            await _settle(app, pilot)
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen)
            assert app.session.doc is not None
            gate.clear()
            await pilot.press("ctrl+r")
            await pilot.pause()
            gate.set()
            await _settle(app, pilot)
            await pilot.pause()
            assert isinstance(app.screen, FindingsScreen)
            assert [h.reason for h in app.session.history] == [
                "first collection",
                "re-collected on request",
            ]

    asyncio.run(go())


@pytest.mark.slow
def test_steps_of_another_nodes_snapshot_do_not_run_here(tmp_path: Path) -> None:
    """A demo or a snapshot from elsewhere: r runs nothing, names the incident's node, and
    offers the command to copy; no local output is merged into its facts."""

    async def go() -> None:
        app = _app(tmp_path, _snapshot_gpu0_unknown(), builtin=False, local=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(app, pilot)
            _select(app.screen, "test-thermal", "gpu:0000:18:00.0")
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("r")
            await pilot.pause()
            assert "Run this command?" not in screen_text(app)
            notes = [n.message for n in app._notifications]
            assert any("gpu-node-017" in n and "p copies" in n for n in notes), notes
            await pilot.press("p")
            await pilot.pause()
            assert "sys.stdout.write" in app.clipboard  # the step's exact command
            assert not app.session.steps

    asyncio.run(go())


def test_a_session_never_merges_output_into_another_nodes_facts(tmp_path: Path) -> None:
    from gpu_triage.io.commands import CommandResult

    book = load_rulebook()
    session = TriageSession(demo_snapshot(), book, engine="reference")
    doc = session.evaluate("open")
    f = next(f for f in doc.findings if f.runbook and f.runbook[0].parser)
    here, why = session.steps_run_here()
    assert not here and "gpu-node-017" in why
    result = CommandResult(argv=["x"], returncode=0, stdout="", stderr="", duration_s=0.0)
    with pytest.raises(ValueError, match="not merged"):
        session.apply_output(f, 0, result)
    as_local_node(session, tmp_path)
    assert session.steps_run_here()[0]
    (tmp_path / "identity" / "proc/sys/kernel/random/boot_id").write_text("another-boot\n")
    here, why = session.steps_run_here()
    assert not here and "rebooted" in why


@pytest.mark.slow
def test_a_step_with_a_parameter_asks_for_it_before_it_can_run(tmp_path: Path) -> None:
    async def go() -> None:
        snap = _snapshot_gpu0_unknown()
        rules = write_rulebook(
            tmp_path, step_cmd=[*python_cat(H100_Q), "{input.tag}"], sleep_cmd=SLEEPER
        )
        book = load_rulebook([rules], include_builtin=False, allow_untrusted=True)
        session = TriageSession(snap, book, engine="reference", source="test")
        as_local_node(session, tmp_path)
        app = TriageApp(book=book, session=session, engine="reference", source_label="test")
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(app, pilot)
            _select(app.screen, "test-thermal", "gpu:0000:18:00.0")
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("r")
            await pilot.pause()
            text = screen_text(app)
            assert "fill in before it can run" in text and "input.tag:" in text
            await pilot.press("enter")  # empty: stays
            await pilot.pause()
            assert "fill in before it can run" in screen_text(app)
            await pilot.press(*"run-7", "enter")
            await pilot.pause()
            text = screen_text(app)
            assert "Run this command?" in text and "run-7" in text and "{input.tag}" not in text
            await pilot.press("n")
            await pilot.pause()

    asyncio.run(go())
