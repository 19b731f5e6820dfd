"""Golden text renderings of the main screens (monochrome, as NO_COLOR shows them).

A test rulebook is used, not the packaged one, so rule edits do not churn the goldens.
GPU_TRIAGE_UPDATE_SNAPSHOTS=1 rewrites them; look at the diff before committing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.ops.record import IncidentRecord
from gpu_triage.ops.session import TriageSession
from gpu_triage.tui.app import TriageApp

from .conftest import as_local_node, check_golden, demo_snapshot, screen_text, write_rulebook

pytestmark = pytest.mark.slow

_BACKGROUND = ("evaluate", "compare", "paste")
HEALTHY = Path(__file__).resolve().parents[1] / "scenarios" / "healthy-busy.json"


def _app(tmp_path: Path) -> TriageApp:
    rules = write_rulebook(
        tmp_path,
        step_cmd=["nvidia-smi", "-q", "-d", "PERFORMANCE"],
        sleep_cmd=["sleep", "60"],
    )
    # Loaded by a relative path (the fixture below changes into tmp_path): the detail
    # names the rule's file, the same in every run.
    book = load_rulebook([rules.relative_to(tmp_path)], include_builtin=False, allow_untrusted=True)
    session = TriageSession(
        demo_snapshot(),
        book,
        engine="reference",
        source="demo",
        record=IncidentRecord(tmp_path / "r.jsonl"),
    )
    as_local_node(session, tmp_path)
    return TriageApp(book=book, session=session, engine="reference", source_label="demo incident")


@pytest.fixture(autouse=True)
def _same_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # restored after the test (_app changes into it)
    monkeypatch.setattr("gpu_triage.tui.modals._who", lambda: "responder@node")


def _shot(name: str, size: tuple[int, int], keys: tuple[str, ...], tmp_path: Path) -> None:
    async def go() -> None:
        app = _app(tmp_path)
        async with app.run_test(size=size) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            # Background work (an evaluation, a comparison) done; not a step waiting on a
            # confirmation modal, which would wait for ever.
            for _ in range(100):
                busy = [w for w in app.workers if w.is_running and w.group in _BACKGROUND]
                if not busy:
                    break
                await pilot.pause(0.05)
            await pilot.pause()
            check_golden(name, screen_text(app))

    asyncio.run(go())


def test_findings_80x24(tmp_path: Path) -> None:
    _shot("findings-80x24", (80, 24), (), tmp_path)


def test_findings_wide_120x30(tmp_path: Path) -> None:
    _shot("findings-120x30", (120, 30), (), tmp_path)


def test_findings_narrow_60x20(tmp_path: Path) -> None:
    _shot("findings-60x20", (60, 20), (), tmp_path)


def test_runbook_80x24(tmp_path: Path) -> None:
    _shot("runbook-80x24", (80, 24), ("r",), tmp_path)


def test_confirm_modal_80x24(tmp_path: Path) -> None:
    _shot("confirm-80x24", (80, 24), ("r", "r"), tmp_path)


def test_question_modal_80x24(tmp_path: Path) -> None:
    _shot("question-80x24", (80, 24), ("a",), tmp_path)


# The main screens at the two sizes responders use (#17): 80x24 over SSH, 120x40 at a desk.
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize(
    "screen,keys",
    [
        ("findings", ()),
        ("detail", ("enter",)),
        ("runbook", ("r",)),
        ("gpus", ("g",)),
        ("facts", ("f",)),
        ("keys", ("f1",)),
        ("filtered", ("slash", *"gpu", "enter", "v")),
        ("symptom", ("S",)),
        ("paste", ("p",)),
        ("compare", ("c", *str(HEALTHY), "enter")),
    ],
)
def test_main_screens(
    tmp_path: Path, screen: str, keys: tuple[str, ...], size: tuple[int, int]
) -> None:
    _shot(f"{screen}-{size[0]}x{size[1]}", size, keys, tmp_path)
