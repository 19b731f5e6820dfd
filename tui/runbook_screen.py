"""The runbook screen: a finding's confirmation steps, run on request, their output.

Its own module, imported when a runbook is first opened: the log widget and the
confirmation dialogs it needs are not loaded before the TUI's first frame."""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Log, OptionList, Static
from textual.widgets.option_list import Option

from gpu_triage.engine.findings import Finding
from gpu_triage.engine.placeholders import placeholders
from gpu_triage.io.commands import CommandResult
from gpu_triage.ops import runbook
from gpu_triage.ops.session import MARKS, step_key
from gpu_triage.tui import render
from gpu_triage.tui.modals import ConfirmRunModal, ParametersModal, SecondConfirmModal
from gpu_triage.tui.screens import ExplainScreen, TriageScreen, framed

LOG_MAX_LINES = 5000
FLUSH_S = 0.05


class RunbookScreen(TriageScreen):
    CSS = (
        framed("steps", "output")
        + """
#rb-title { height: auto; max-height: 3; padding: 0 1; background: $boost; }
#rb-main { height: 1fr; }
#rb-left { width: 45%; height: 1fr; }
#steps { height: auto; max-height: 8; }
#step-pane { height: 1fr; padding: 0 1; }
#output { width: 1fr; height: 1fr; }
Screen.-narrow #rb-main { layout: vertical; }
Screen.-narrow #rb-left { width: 1fr; height: 55%; }
Screen.-narrow #steps { max-height: 5; }
Screen.-narrow #output { width: 1fr; }
"""
    )
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
