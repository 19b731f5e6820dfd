"""The incident beside a healthy twin (``gpu-triage diff SLOW HEALTHY`` in the TUI):
findings on one node and not the other, then the facts that differ beyond their noise,
in fast-diagnosis order (gpu_triage/ops/diff.py)."""

from __future__ import annotations

import re
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

from gpu_triage.engine.occurrences import index_ranges
from gpu_triage.ops.diff import DiffReport, fact_table
from gpu_triage.tui import render
from gpu_triage.tui.modals import MODAL_CSS
from gpu_triage.tui.screens import TriageScreen, framed


class SnapshotPathModal(ModalScreen[Path | None]):
    """Which snapshot is the healthy twin: a path, typed (the Input owns every key)."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="compare-cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Compare with a healthy node", style="bold"))
            yield Static(
                "A snapshot of a twin that works (gpu-triage collect --out FILE on it).",
                classes="hint",
            )
            yield Input(placeholder="path to the healthy snapshot (.json)", id="compare-path")
            yield Static("enter compares · escape cancels", classes="hint")

    def unsaved(self) -> str:
        typed = self.query_one("#compare-path", Input).value.strip()
        return "a snapshot path is typed but not opened" if typed else ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.notify("Type the path of the healthy node's snapshot.", severity="warning")
            return
        self.dismiss(Path(text).expanduser())

    def action_cancel(self) -> None:
        self.dismiss(None)


def compare(app: object, healthy: Path) -> DiffReport:
    """Evaluate the healthy snapshot and diff it against the session (a worker thread)."""
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.model.snapshot import load_snapshot
    from gpu_triage.ops.diff import diff_documents

    session = app.session  # type: ignore[attr-defined]
    twin = load_snapshot(healthy)
    doc = session.doc or session.evaluate("before comparing")
    twin_doc = evaluate(twin, session.book, engine=session.engine, source=str(healthy))
    return diff_documents(
        session.snapshot.facts,
        doc,
        twin.facts,
        twin_doc,
        session.book,
        slow_label=session.snapshot.hostname or "this incident",
        healthy_label=twin.hostname or str(healthy),
    )


# Characters of a cell before "…" (item, fact, slow, healthy, stage, read by): at 80
# columns the two values stay on screen; the item column folds many disks.
WIDTHS = (16, 24, 13, 13, 9, 40)
_GPU = re.compile(r"GPU (\d+)(?: \([^()]*\))?")


def named(subjects: list[str]) -> str:
    """ "GPU 0 (0000:1b:00.0), GPU 1 (…)" as people say it: "GPUs 0-7"."""
    matches = [_GPU.fullmatch(s) for s in subjects]
    if len(subjects) > 1 and all(matches):
        return "GPUs " + index_ranges([int(m.group(1)) for m in matches if m])
    return ", ".join(subjects)


def _fit(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class DiffScreen(TriageScreen):
    CSS = (
        framed("diff-table")
        + """
#diff-findings-pane { height: auto; max-height: 45%; padding: 0 1; }
#diff-table { height: 1fr; }
#diff-noise { height: auto; max-height: 2; padding: 0 1; }
"""
    )
    BINDINGS = [Binding("escape", "dismiss_screen", "Back", id="diff-back")]

    def __init__(self, report: DiffReport) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diff-findings-pane"):
            yield Static(id="diff-findings")
        yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="diff-noise")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        r = self.report
        t = render.SafeText(f"{r.slow}", style="bold")
        t.append(" compared with ")
        t.append(f"{r.healthy}\n", style="bold")
        slow_only = [d for d in r.findings if d.side == "slow_only"]
        healthy_only = [d for d in r.findings if d.side == "healthy_only"]
        if slow_only:
            t.append(f"Only on {r.slow}:\n", style="bold underline")
            for d in slow_only:
                sev = d.severity.value
                t.append(f"  {render.SEVERITY_WORD[sev]:<8} ", style=render.SEVERITY_STYLE[sev])
                t.append(f"{d.title}  ")
                t.append(f"(stage {d.stage.value}) {named(d.subjects)}\n", style="dim")
        if healthy_only:
            t.append(f"Only on {r.healthy}: ", style="bold underline")
            t.append(", ".join(d.title for d in healthy_only) + "\n")
        if not r.findings:
            t.append("No rule fires on one node and not on the other.\n", style="dim")
        self.query_one("#diff-findings", Static).update(t)
        table = self.query_one("#diff-table", DataTable)
        table.border_title = "Facts that differ, in fast-diagnosis order"
        # The values first after what they are: at 80 columns they must not scroll away.
        table.add_columns("item", "fact", _fit(r.slow, 13), _fit(r.healthy, 13), "stage", "read by")
        rows = fact_table(r)
        for stage, item, fact, slow, healthy, readers in rows:
            cells = (item, fact, slow, healthy, stage, readers)
            table.add_row(
                *(render.SafeText(_fit(c, w)) for c, w in zip(cells, WIDTHS, strict=True))
            )
        if not rows:
            table.add_row("", "", render.SafeText("no fact differs beyond its noise"), "", "", "")
        noise = "; ".join(f"{k}: {v}" for k, v in r.noise.items())
        self.query_one("#diff-noise", Static).update(
            render.SafeText(f"differs means: {noise}", style="dim")
        )
        table.focus()

    def action_dismiss_screen(self) -> None:
        self.dismiss()
