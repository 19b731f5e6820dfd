"""The TUI's screens: findings (main), runbook, explanation, facts, history, collection."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Log, OptionList, Static
from textual.widgets.option_list import Option

from gpu_triage.engine.findings import Finding
from gpu_triage.engine.placeholders import placeholders
from gpu_triage.io.commands import CommandResult
from gpu_triage.ops import findings_view, runbook
from gpu_triage.ops.session import MARKS, step_key
from gpu_triage.tui import render
from gpu_triage.tui.modals import ConfirmRunModal, ParametersModal, SecondConfirmModal

if TYPE_CHECKING:
    from gpu_triage.tui.app import TriageApp

LOG_MAX_LINES = 5000
FLUSH_S = 0.05
SEARCH_DEBOUNCE_S = 0.15
FILTER_PLACEHOLDER = "filter: words all must match (gpu 3, xid, critical …)"


class TriageScreen(Screen[None]):
    """Base: typed access to the app and its session."""

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
        self.app.push_screen(RunbookScreen(f))

    def action_explain(self) -> None:
        f = self.current()
        if f is not None:
            self.app.push_screen(ExplainScreen(f))

    def action_answer(self) -> None:
        self.triage.ask_questions(self.current())

    def action_facts(self) -> None:
        self.app.push_screen(FactsScreen())

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
        self.app.push_screen(RunbookScreen(self.finding))

    def action_explain(self) -> None:
        self.app.push_screen(ExplainScreen(self.finding))

    def action_answer(self) -> None:
        self.triage.ask_questions(self.finding)

    def action_note(self) -> None:
        self.triage.add_note(self.finding)


# --------------------------------------------------------------------------- runbook


class RunbookScreen(TriageScreen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("enter", "run", "Run", id="run-step-enter", show=False),
        Binding("r", "run", "Run", id="run-step", tooltip="Run the step (asks first)"),
        Binding("c", "cancel", "Cancel", id="cancel-step", tooltip="Stop the running command"),
        Binding(
            "p", "copy", "Copy", id="copy-step", show=False, tooltip="Copy the command to run it"
        ),
        Binding("d", "mark('done')", "Done", id="mark-done"),
        Binding("y", "mark('confirmed')", "Confirmed", id="mark-confirmed"),
        Binding("x", "mark('ruled out')", "Ruled out", id="mark-ruled-out"),
        Binding("s", "mark('skipped')", "Skip", id="mark-skipped"),
        Binding("n", "note", "Note", id="step-note", show=False),
        Binding("w", "explain", "Why", id="step-explain", show=False),
    ]

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding
        self.running: int | None = None
        self._cancel: asyncio.Event | None = None
        self._pending: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="rb-title")
        with Horizontal(id="rb-main"):
            with Vertical(id="rb-left"):
                yield OptionList(id="steps", markup=False)
                with VerticalScroll(id="step-pane"):
                    yield Static(id="step-info")
            yield Log(id="output", max_lines=LOG_MAX_LINES, auto_scroll=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#steps", OptionList).border_title = "Steps"
        self.query_one("#output", Log).border_title = "Output"
        self._fill_steps()
        self.query_one("#steps", OptionList).focus()
        self.query_one("#output", Log).write_line(
            "Output of a step appears here. r runs it, after you confirm."
        )
        self.set_interval(FLUSH_S, self._flush)

    def _title(self) -> Text:
        f = self.finding
        t = Text()
        sev = f.severity.value
        t.append(render.SEVERITY_WORD[sev], style=render.SEVERITY_STYLE[sev])
        t.append(f" {f.title}", style="bold")
        t.append(f"  {f.subject}", style="dim")
        now = self.triage.session.find(f.rule_id, f.subject_key)
        if self.triage.session.doc is not None:
            t.append("\nnow: ")
            if now is None:
                t.append("no longer fires for this subject", style="green")
            else:
                t.append(render.STATUS_WORD[now.status], style="bold")
        return t

    def _fill_steps(self) -> None:
        ol = self.query_one("#steps", OptionList)
        keep = ol.highlighted or 0
        ol.clear_options()
        for i, step in enumerate(self.finding.runbook):
            st = self.triage.session.steps.get(step_key(self.finding, i))
            label = "running" if self.running == i else (st.label if st else "not run")
            t = Text(f"{i + 1}. ")
            t.append(f"[{label}] ", style=render.OUTCOME_STYLE.get(label, "dim"))
            t.append(step.title)
            ol.add_option(Option(t))
        ol.highlighted = min(keep, max(ol.option_count - 1, 0))
        self.refresh_bindings()
        self.query_one("#rb-title", Static).update(self._title())
        self._show_step()

    def findings_changed(self) -> None:
        self._fill_steps()

    @on(OptionList.OptionHighlighted, "#steps")
    def _show_step(self) -> None:
        i = self.index()
        if i is None:
            return
        st = self.triage.session.steps.get(step_key(self.finding, i))
        label = "running" if self.running == i else (st.label if st else "not run")
        detail = st.detail if st else ""
        if st and st.mark and st.outcome:
            detail = f"command said: {st.outcome}; {detail}"
        self.query_one("#step-info", Static).update(
            render.step_text(self.finding.runbook[i], i, label, detail, st.notes if st else [])
        )

    @on(OptionList.OptionSelected, "#steps")
    def _selected(self) -> None:
        self.action_run()

    def index(self) -> int | None:
        return self.query_one("#steps", OptionList).highlighted

    def action_back(self) -> None:
        if self.running is not None:
            self.notify("A step is running: press c to cancel it first.", severity="warning")
            return
        self.dismiss()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The footer offers what can happen now: cancel while a step runs, run otherwise.
        if action == "cancel":
            return self.running is not None
        if action == "run":
            return self.running is None
        return True

    def running_step(self) -> str:
        """For the app's quit: what would be interrupted (empty: nothing)."""
        if self.running is None:
            return ""
        title = self.finding.runbook[self.running].title
        return f"step {self.running + 1} ({title}) of {self.finding.rule_id} is running"

    async def stop_step(self, timeout_s: float = 10.0) -> None:
        """Cancel the running step and wait until its process group is gone."""
        if self._cancel is None or self.running is None:
            return
        self._cancel.set()
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        while self.running is not None and loop.time() < until:
            await asyncio.sleep(0.05)

    def action_run(self) -> None:
        i = self.index()
        if i is None:
            return
        if self.running is not None:
            self.notify("A step is already running (c cancels it).", severity="warning")
            return
        if not self.finding.runbook[i].command:
            self.notify("A manual step: do it, then mark it (d, y, x or s).")
            return
        here, why = self.triage.session.steps_run_here()
        if not here:
            self.notify(f"Not run: {why}. p copies the command.", severity="warning")
            return
        self.run_step(i)

    def action_copy(self) -> None:
        i = self.index()
        if i is None or not self.finding.runbook[i].command:
            self.notify("This step has no command to copy.")
            return
        text = render.argv_text(self.finding.runbook[i].command or [])
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied: {text}")

    def action_cancel(self) -> None:
        if self._cancel is not None and self.running is not None:
            self._cancel.set()
            self.notify("Cancelling: the command's process group is being stopped.")
        else:
            self.notify("Nothing is running.")

    def action_mark(self, mark: str) -> None:
        i = self.index()
        if i is None or mark not in MARKS:
            return
        self.triage.session.mark(self.finding, i, mark)
        self._fill_steps()
        self.triage.refresh_screens()

    def action_note(self) -> None:
        i = self.index()
        self.triage.add_note(self.finding, i)

    def action_explain(self) -> None:
        self.app.push_screen(ExplainScreen(self.finding))

    def _on_line(self, line: str) -> None:
        self._pending.append(render.clean_line(line))

    def _flush(self) -> None:
        if self._pending:
            lines, self._pending = self._pending, []
            self.query_one("#output", Log).write_lines(lines)

    @work(exclusive=True, group="runbook-step", exit_on_error=False)
    async def run_step(self, index: int) -> CommandResult | None:
        step = self.finding.runbook[index]
        assert step.command is not None
        if placeholders(step.command):
            argv = await self.app.push_screen_wait(ParametersModal(step, list(step.command)))
            if argv is None:
                self.notify("Not run: its parameters were not given.")
                return None
            step = step.model_copy(update={"command": argv})
        _, where = self.triage.session.steps_run_here()
        if not await self.app.push_screen_wait(ConfirmRunModal(step, self.finding.subject, where)):
            self.notify("Not run.")
            return None
        if (step.changes_system or step.needs_root) and not await self.app.push_screen_wait(
            SecondConfirmModal(step)
        ):
            self.notify("Not run.")
            return None
        assert step.command is not None
        log = self.query_one("#output", Log)
        log.clear()
        log.write_line(f"$ {render.argv_text(step.command)}")
        self._cancel = asyncio.Event()
        self.running = index
        self._fill_steps()
        try:
            result = await runbook.run_step(step, self._on_line, cancel=self._cancel)
        finally:
            self.running = None
            self._cancel = None
        self._flush()
        log.write_line(runbook.result_summary(result))
        applied = self.triage.session.apply_output(self.finding, index, result, step)
        log.write_line(f"outcome: {applied.outcome}: {applied.detail}")
        if applied.changed_kinds:
            log.write_line(f"facts updated: {', '.join(applied.changed_kinds)}; re-evaluating")
        self._fill_steps()
        self.triage.reevaluate(f"step {index + 1} of {self.finding.rule_id}: {applied.outcome}")
        return result


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


# --------------------------------------------------------------------------- facts


class FactsScreen(TriageScreen):
    BINDINGS = [
        Binding("escape", "dismiss_screen", "Back", id="facts-back"),
        Binding("slash", "search", "Search", id="facts-search"),
    ]

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search facts (gpu 3, temperature, unavailable, xid …)", id="search"
        )
        yield DataTable(id="facts-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="facts-count")
        yield Footer(compact=True)

    _timer: Timer | None = None

    def on_mount(self) -> None:
        table = self.query_one("#facts-table", DataTable)
        table.add_columns("item", "fact", "value", "unit", "source / why missing")
        table.border_title = "Facts"
        self.findings_changed()
        # The box looks like it takes typing, so it does: letters typed go into the search
        # (never to a key of the screen); enter or tab moves to the table.
        self.query_one("#search", Input).focus()

    def findings_changed(self) -> None:
        from gpu_triage.engine.inputs import kind_availability

        snap = self.triage.session.snapshot
        self._rows = render.fact_rows(snap, kind_availability(snap))
        self._fill(self.query_one("#search", Input).value)

    def _fill(self, query: str) -> None:
        table = self.query_one("#facts-table", DataTable)
        table.clear()
        shown = 0
        for row in self._rows:
            if render.row_matches(row, query):
                missing = row[3] == "unavailable"
                cells = [
                    Text(c, style="yellow" if missing and j in (3, 5) else "")
                    for j, c in enumerate(row)
                    if j != 0  # the section is for searching; the item column names it
                ]
                table.add_row(*cells)
                shown += 1
        self.query_one("#facts-count", Static).update(
            Text(f"{shown} of {len(self._rows)} facts · / search · escape back", style="dim")
        )

    @on(Input.Changed, "#search")
    def _search(self, event: Input.Changed) -> None:
        # Debounced: typing a word refills the table once, not once per key.
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(SEARCH_DEBOUNCE_S, lambda: self._fill(event.value))

    @on(Input.Submitted, "#search")
    def _done(self) -> None:
        self.query_one("#facts-table", DataTable).focus()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_dismiss_screen(self) -> None:
        if self.query_one("#search", Input).has_focus and self.query_one("#search", Input).value:
            self.query_one("#search", Input).value = ""
            return
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
