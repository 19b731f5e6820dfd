"""The TUI's screens: findings (main), detail, explanation, history, collection.

The runbook and facts screens have modules of their own (``runbook_screen``,
``facts_screen``), which the app imports when one is first opened: what they need is not
loaded before the first frame."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from gpu_triage.engine.findings import Finding
from gpu_triage.ops import findings_view
from gpu_triage.ops.session import step_key
from gpu_triage.tui import render

if TYPE_CHECKING:
    from gpu_triage.tui.app import TriageApp

SEARCH_DEBOUNCE_S = 0.15
FILTER_PLACEHOLDER = "filter: words all must match (gpu 3, xid, critical …)"


def framed(*ids: str) -> str:
    """CSS for framed panes, as the findings screen's: a round frame, and focus shown in
    the frame itself (heavy, its title reversed), not only in a colour, so that it reads
    the same with NO_COLOR and on a monochrome terminal.

    Each screen but the findings screen brings its own rules (its ``CSS``), read when it
    is first opened, so that the first frame parses only the app's. They are not scoped
    to the screen (``TriageScreen.SCOPED_CSS``): they name the screen's own widgets, and
    a narrow terminal is a class of the screen itself (``Screen.-narrow``)."""
    plain = ", ".join(f"#{i}" for i in ids)
    focused = ", ".join(f"#{i}:focus" for i in ids)
    return (
        f"{plain} {{ border: round $panel; border-title-align: left; }}\n"
        f"{focused} {{ border: heavy $primary; border-title-style: bold reverse; }}\n"
    )


class TriageScreen(Screen[None]):
    """Base: typed access to the app and its session."""

    SCOPED_CSS = False  # a screen's own CSS applies as the app's does (see framed)

    @property
    def triage(self) -> TriageApp:
        return self.app  # type: ignore[return-value]

    def findings_changed(self) -> None:
        """Called by the app after every evaluation."""


def detail_of(app: TriageApp, f: Finding) -> Text:
    session = app.session
    labels = [
        session.steps[k].label if (k := step_key(f, i)) in session.steps else "not run"
        for i in range(len(f.runbook))
    ]
    return render.detail_text(f, labels, session.snapshot.facts.answers)


# --------------------------------------------------------------------------- findings


class FindingsList(OptionList):
    """The findings: enter opens the one under the cursor (shown in the footer)."""

    BINDINGS = [Binding("enter", "select", "Detail", key_display="⏎", show=True)]


class FindingsScreen(TriageScreen):
    BINDINGS = [
        Binding(
            "enter",
            "open_detail",
            "Detail",
            id="open-detail",
            key_display="⏎",
            tooltip="The finding in full: evidence, questions, runbook",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            id="filter",
            tooltip="Show only findings with these words (gpu 3, xid, pcie …)",
        ),
        Binding("g", "gpus", "GPUs", id="gpus", tooltip="One row per GPU, as nvitop shows them"),
        Binding("a", "answer", "Answer", id="answer", tooltip="Answer the rulebook's questions"),
        Binding(
            "r",
            "open_runbook",
            "Runbook",
            id="runbook",
            show=False,
            tooltip="The steps that confirm or rule it out",
        ),
        Binding(
            "w",
            "explain",
            "Why",
            id="explain",
            show=False,
            tooltip="Why it fired, or why not, clause by clause",
        ),
        Binding(
            "v",
            "severity_floor",
            "Severity",
            id="severity-floor",
            show=False,
            tooltip="Cycle: all, warning and above, critical only",
        ),
        Binding(
            "s",
            "sort",
            "Sort",
            id="sort",
            show=False,
            tooltip="Cycle: most urgent, severity, stage, subject, rule",
        ),
        Binding("f", "facts", "Facts", id="facts", show=False, tooltip="Browse every fact"),
        Binding("h", "history", "History", id="history", show=False, tooltip="Findings over time"),
        Binding("n", "note", "Note", id="note", show=False, tooltip="Add a note to the record"),
        Binding(
            "p",
            "paste",
            "Paste",
            id="paste",
            show=False,
            tooltip="Paste an error or command output: read into the facts",
        ),
        Binding(
            "S",
            "symptom",
            "Symptom",
            id="symptom",
            show=False,
            tooltip="What are you seeing? Its causes rank first",
        ),
        Binding(
            "c",
            "compare",
            "Compare",
            id="compare",
            show=False,
            tooltip="Diff against a healthy node's snapshot",
        ),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            id="clear-filter",
            show=False,
            tooltip="Show every finding again",
        ),
        Binding("tab", "app.focus_next", "Pane", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.view = findings_view.View()
        self._keys: list[tuple[str, str] | None] = []
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="summary")
        with Horizontal(id="main"):
            yield FindingsList(id="findings", markup=False)
            with VerticalScroll(id="detail-pane"):
                yield Static(Text("Select a finding."), id="detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#findings", OptionList).border_title = "Findings"
        self.query_one("#detail-pane", VerticalScroll).border_title = "Detail"
        self.findings_changed()
        self.query_one("#findings", OptionList).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            box = self._filter_box()
            return self.view.narrowed or (box is not None and box.display)
        return True

    def current(self) -> Finding | None:
        ol = self.query_one("#findings", OptionList)
        i = ol.highlighted
        if i is None or i >= len(self._keys):
            return None
        key = self._keys[i]
        return self.triage.session.find(*key) if key else None

    def findings_changed(self) -> None:
        session = self.triage.session
        doc = session.doc
        summary = render.summary_text(
            doc, host=session.snapshot.hostname, source=self.triage.source_label
        )
        if session.symptom:
            summary.append(f"  seeing: {session.symptom} (S changes it)", style="bold")
        self.query_one("#summary", Static).update(summary)
        ol = self.query_one("#findings", OptionList)
        described = self.view.describe()
        ol.border_title = f"Findings: {described}" if described else "Findings"
        before = self.current() if ol.option_count else None
        keep = (before.rule_id, before.subject_key) if before else None
        ol.clear_options()
        self._keys = []
        if doc is None:
            ol.add_option(Option(Text("evaluating…"), disabled=True))
            self._keys.append(None)
            return
        sections = (
            ("FIRED, most urgent first", doc.findings, ""),
            ("NEEDS CONFIRMATION", doc.needs_confirmation, "a question waits: press a"),
            ("CANNOT EVALUATE", doc.cannot_evaluate, "facts missing: never healthy"),
        )
        for label, items, note in sections:
            shown = findings_view.apply(items, self.view)
            count = f"{len(shown)} of {len(items)}" if len(shown) != len(items) else len(items)
            ol.add_option(Option(render.section_header(label, count, note), disabled=True))
            self._keys.append(None)
            if not shown:
                word = "   none" if not items else "   none match the filter"
                ol.add_option(Option(Text(word, style="dim"), disabled=True))
                self._keys.append(None)
            for f in shown:
                marks = self._marks(f)
                line = render.finding_line(f, marks)
                if label != sections[0][0]:
                    line.append(f" ({f.subject})", style="dim")
                ol.add_option(Option(line))
                self._keys.append((f.rule_id, f.subject_key))
        target = next((i for i, k in enumerate(self._keys) if k and k == keep), None)
        if target is None:
            target = next((i for i, k in enumerate(self._keys) if k), None)
        if target is not None:
            ol.highlighted = target
        self._show_detail()

    def _marks(self, f: Finding) -> str:
        labels = [
            self.triage.session.steps[k].label
            for i in range(len(f.runbook))
            if (k := step_key(f, i)) in self.triage.session.steps
        ]
        return ", ".join(x for x in labels if x != "not run")

    @on(OptionList.OptionHighlighted, "#findings")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(OptionList.OptionSelected, "#findings")
    def _selected(self) -> None:
        self.action_open_detail()

    def _show_detail(self) -> None:
        f = self.current()
        detail = self.query_one("#detail", Static)
        if f is None:
            detail.update(Text("No finding selected."))
            return
        detail.update(detail_of(self.triage, f))
        self.query_one("#detail-pane", VerticalScroll).scroll_home(animate=False)

    # ------------------------------------------------------------------ narrowing
    def _filter_box(self) -> Input | None:
        """The filter's line; None until / is first pressed, which mounts it (a widget
        less to build before the first frame)."""
        found = self.query("#filter")
        return found.first(Input) if found else None

    async def action_filter(self) -> None:
        box = self._filter_box()
        if box is None:
            box = Input(placeholder=FILTER_PLACEHOLDER, id="filter")
            await self.mount(box, before="#main")
        box.remove_class("hidden")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # Debounced: a typed word refills the list once, not once per key.
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        self._timer = self.set_timer(SEARCH_DEBOUNCE_S, lambda: self._set_query(value))

    def _set_query(self, query: str) -> None:
        self.view = replace(self.view, query=query)
        self.findings_changed()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self._set_query(self.query_one("#filter", Input).value)
        self.query_one("#findings", OptionList).focus()

    def action_clear_filter(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        box = self._filter_box()
        if box is not None:
            box.value = ""
            box.add_class("hidden")
        self.view = replace(self.view, query="", floor="all")
        self.findings_changed()
        self.query_one("#findings", OptionList).focus()

    def action_severity_floor(self) -> None:
        floor = findings_view.next_key(findings_view.FLOORS, self.view.floor)
        self.view = replace(self.view, floor=floor)
        self.findings_changed()
        self.notify(f"Showing {'every severity' if floor == 'all' else floor + ' and above'}.")

    def action_sort(self) -> None:
        order = findings_view.next_key(findings_view.SORTS, self.view.sort)
        self.view = replace(self.view, sort=order)
        self.findings_changed()
        self.notify(f"Sorted by {findings_view.SORTS[order]}.")

    # ------------------------------------------------------------------ other screens
    def action_open_detail(self) -> None:
        f = self.current()
        if f is not None:
            self.app.push_screen(DetailScreen(f))

    # The app opens these: their modules build on this one (no import cycle).
    def action_gpus(self) -> None:
        self.triage.open_gpus()

    def action_paste(self) -> None:
        self.triage.open_paste()

    def action_symptom(self) -> None:
        self.triage.open_symptom()

    def action_compare(self) -> None:
        self.triage.ask_compare()

    def action_open_runbook(self) -> None:
        f = self.current()
        if f is None:
            return
        if not f.runbook:
            self.notify("This rule has no runbook steps.", severity="warning")
            return
        self.triage.open_runbook(f)

    def action_explain(self) -> None:
        f = self.current()
        if f is not None:
            self.app.push_screen(ExplainScreen(f))

    def action_answer(self) -> None:
        self.triage.ask_questions(self.current())

    def action_facts(self) -> None:
        self.triage.open_facts()

    def action_history(self) -> None:
        self.app.push_screen(HistoryScreen())

    def action_note(self) -> None:
        self.triage.add_note(self.current())


# --------------------------------------------------------------------------- detail


class DetailScreen(TriageScreen):
    """One finding in full, the whole terminal for it (enter on the list opens it)."""

    BINDINGS = [
        Binding("escape", "dismiss_screen", "Back", id="detail-back"),
        Binding(
            "r,enter",
            "open_runbook",
            "Runbook",
            id="detail-runbook",
            tooltip="The steps that confirm or rule it out",
        ),
        Binding(
            "w",
            "explain",
            "Why",
            id="detail-explain",
            tooltip="Why it fired, or why not, clause by clause",
        ),
        Binding("a", "answer", "Answer", id="detail-answer", tooltip="Answer its questions"),
        Binding("n", "note", "Note", id="detail-note", show=False, tooltip="Add a note"),
    ]

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-full"):
            yield Static(id="detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.findings_changed()
        self.query_one("#detail-full").focus()

    def findings_changed(self) -> None:
        # The finding as it is now (an answer or a step may have changed it).
        f = self.finding
        self.finding = self.triage.session.find(f.rule_id, f.subject_key) or f
        self.query_one("#detail", Static).update(detail_of(self.triage, self.finding))

    def action_dismiss_screen(self) -> None:
        self.dismiss()

    def action_open_runbook(self) -> None:
        if not self.finding.runbook:
            self.notify("This rule has no runbook steps.", severity="warning")
            return
        self.triage.open_runbook(self.finding)

    def action_explain(self) -> None:
        self.app.push_screen(ExplainScreen(self.finding))

    def action_answer(self) -> None:
        self.triage.ask_questions(self.finding)

    def action_note(self) -> None:
        self.triage.add_note(self.finding)


# --------------------------------------------------------------------------- explanation


class ExplainScreen(TriageScreen):
    BINDINGS = [Binding("escape,q", "dismiss_screen", "Back", id="explain-back")]

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="explain-pane"):
            yield Static(id="explain")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.findings_changed()
        self.query_one("#explain-pane").focus()

    def findings_changed(self) -> None:
        f = self.finding
        t = Text(f"Why / why not: {f.title} ({f.subject})\n\n", style="bold")
        t.append(self.triage.explain(f.rule_id, f.subject))
        self.query_one("#explain", Static).update(t)

    def action_dismiss_screen(self) -> None:
        self.dismiss()


# --------------------------------------------------------------------------- history


class HistoryScreen(TriageScreen):
    BINDINGS = [Binding("escape,q", "dismiss_screen", "Back", id="history-back")]

    def compose(self) -> ComposeResult:
        yield Static(Text("Findings over time (+ new, - gone)", style="bold"))
        with VerticalScroll(id="history-pane"):
            yield Static(id="history")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.findings_changed()
        self.query_one("#history-pane").focus()

    def findings_changed(self) -> None:
        self.query_one("#history", Static).update(render.history_text(self.triage.session.history))

    def action_dismiss_screen(self) -> None:
        self.dismiss()


# --------------------------------------------------------------------------- collection


class CollectScreen(Screen[None]):
    """Per-collector progress while a live collection runs."""

    BINDINGS = [Binding("q", "app.quit", "Quit", id="collect-quit")]

    def __init__(self, names: list[str], note: str = "") -> None:
        super().__init__()
        self.names = names
        self.note = note
        self.states: dict[str, str] = dict.fromkeys(names, "waiting")

    def compose(self) -> ComposeResult:
        yield Static(Text(self.note or "Collecting facts from this node…", style="bold"))
        yield Static(id="progress")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._redraw()

    def update_state(self, name: str, state: str) -> None:
        self.states[name] = state
        self._redraw()

    def _redraw(self) -> None:
        t = Text()
        for name, state in self.states.items():
            style = {"ok": "green", "running": "bold", "waiting": "dim"}.get(state, "yellow")
            t.append(f"  {name:<22}")
            t.append(f"{state}\n", style=style)
        self.query_one("#progress", Static).update(t)
