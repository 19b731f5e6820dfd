"""The responder's terminal UI: ``gpu-triage tui``.

Keyboard first, usable at 80x24 over SSH, readable with NO_COLOR (severities are words
as well as colours). Snapshot mode opens at once; live mode shows each collector's
progress, then the findings. Everything a responder does is appended to the incident
record as it happens.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.findings import Finding
from gpu_triage.io import startup_gc
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.ops.record import IncidentRecord, default_path
from gpu_triage.ops.session import TriageSession, TuiOptions
from gpu_triage.tui.screens import CollectScreen, FindingsScreen, TriageScreen

CSS = """
$border-focus: $primary;
Screen { background: $background; }
#summary { height: auto; max-height: 3; padding: 0 1; background: $boost; }
#filter { height: 3; }
.hidden { display: none; }
#main { height: 1fr; }
/* Focus shows in the line itself (heavy, title reversed), not only in a colour:
   it reads the same with NO_COLOR and on a monochrome terminal. */
#findings, #detail-pane { border: round $panel; border-title-align: left; }
#findings:focus, #detail-pane:focus, #detail-pane:focus-within {
    border: heavy $border-focus; border-title-style: bold reverse;
}
#findings { width: 45%; height: 1fr; }
#detail-pane { width: 1fr; height: 1fr; padding: 0 1; }
#detail-full { height: 1fr; padding: 0 1; }
#explain-pane, #history-pane { padding: 0 1; }
#progress { padding: 1 2; }

/* Below 100 columns: panes stacked, list above detail. */
Screen.-narrow #main { layout: vertical; }
Screen.-narrow #findings { width: 1fr; height: 40%; }
Screen.-narrow #detail-pane { width: 1fr; }
"""
# The other screens bring their own rules (``CSS`` of each), read when one is first
# opened: the first frame parses only these (a stylesheet of every screen cost it 2 ms).

CollectFn = Callable[[Callable[[str, Any], None]], Snapshot]


class TriageApp(App[int]):
    """``session`` given: snapshot mode. ``collect`` given instead: live mode."""

    TITLE = "gpu-triage"
    CSS = CSS
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave (asks first if it would lose work)"),
        Binding(
            "e",
            "export",
            "Export",
            id="export",
            show=False,
            tooltip="Export the incident record as Markdown and JSON",
        ),
        Binding(
            "ctrl+r",
            "recollect",
            "Re-collect",
            id="recollect",
            show=False,
            tooltip="Collect this node again, keeping history",
        ),
        Binding("f1", "toggle_help", "Keys", id="help", tooltip="Every key of this screen"),
    ]

    def __init__(
        self,
        *,
        book: Rulebook,
        session: TriageSession | None = None,
        collect: CollectFn | None = None,
        collector_names: Sequence[str] = (),
        engine: str = "auto",
        record_path: Path | None = None,
        source_label: str = "",
        ask_symptom: bool = False,
        symptom: str | None = None,
    ) -> None:
        super().__init__()
        self.ask_symptom = ask_symptom  # the first screen asks "what are you seeing?"
        self.symptom = symptom  # live mode: given on the command line, set once collected
        if session is None and collect is None:
            raise ValueError("either a session (snapshot mode) or a collect function (live)")
        self.book = book
        self.session: TriageSession = session  # type: ignore[assignment]  # set in live mode later
        self.collect_fn = collect
        self.collector_names = list(collector_names)
        self.engine = engine
        self.record_path = record_path
        self.source_label = source_label or ("live" if collect else "")
        self.collecting = False
        self.last_export: tuple[Path, Path] | None = None
        self.animation_level = "none"

    # ------------------------------------------------------------------ start
    def get_default_screen(self) -> Screen[Any]:
        # A snapshot's findings are the first screen itself, not one pushed over an
        # empty default screen: one screen less to style and lay out before the first frame.
        return FindingsScreen() if self.session is not None else super().get_default_screen()

    def on_mount(self) -> None:
        if self.session is not None:
            self._say_replayed()
            self._first_question()
            if self.session.doc is None:
                self.reevaluate("opened")
        else:
            self.start_collection("first collection")
        if not self.is_headless:
            self.set_interval(5.0, self._watch_tty)

    def _watch_tty(self) -> None:
        """After an SSH drop, stdin is gone: leave instead of spinning (dolphie)."""
        try:
            alive = sys.stdin is not None and sys.stdin.isatty()
        except (ValueError, OSError):
            alive = False
        if not alive:
            self.exit(1)

    def _first_question(self) -> None:
        if self.ask_symptom and self.session.symptom is None:
            self.ask_symptom = False
            self.open_symptom()

    # ------------------------------------------------------------------ other screens
    # Each imported when first opened: its widgets and dialogs are not loaded before the
    # first frame (they cost it about 8 ms).
    def open_runbook(self, finding: Finding) -> None:
        from gpu_triage.tui.runbook_screen import RunbookScreen

        self.push_screen(RunbookScreen(finding))

    def open_facts(self) -> None:
        from gpu_triage.tui.facts_screen import FactsScreen

        self.push_screen(FactsScreen())

    def open_gpus(self) -> None:
        from gpu_triage.tui.gpus import GpuScreen

        self.push_screen(GpuScreen())

    def open_paste(self) -> None:
        from gpu_triage.tui.intake import PasteScreen

        self.push_screen(PasteScreen())

    def open_symptom(self) -> None:
        from gpu_triage.tui.intake import SymptomScreen

        self.push_screen(SymptomScreen())

    # ------------------------------------------------------------------ a healthy twin
    def ask_compare(self) -> None:
        self._ask_compare()

    @work(exclusive=True, group="compare-ask", exit_on_error=False)
    async def _ask_compare(self) -> None:
        from gpu_triage.tui.compare import SnapshotPathModal

        path = await self.push_screen_wait(SnapshotPathModal())
        if path is not None:
            self.compare_with(path)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compare_with(self, path: Path) -> None:
        from gpu_triage.model.snapshot import SnapshotError
        from gpu_triage.tui.compare import DiffScreen, compare

        try:
            report = compare(self, path)
        except (SnapshotError, OSError) as exc:
            self.call_from_thread(
                self.notify, str(exc), title="Cannot compare", severity="error", timeout=10
            )
            return
        self.call_from_thread(self.push_screen, DiffScreen(report))

    def _say_replayed(self) -> None:
        done = self.session.replayed
        if done is not None:
            self.notify(done.describe(), title="Record reopened", timeout=8)

    def start_collection(self, reason: str) -> None:
        if self.collect_fn is None:
            self.notify("This session opened a snapshot: there is nothing to re-collect.")
            return
        if self.collecting:
            self.notify("A collection is already running.")
            return
        self.collecting = True
        screen = CollectScreen(self.collector_names, f"Collecting facts from this node ({reason})…")
        self.push_screen(screen)
        self._collect(screen, reason)

    @work(thread=True, exclusive=True, group="collect", exit_on_error=False)
    def _collect(self, screen: CollectScreen, reason: str) -> None:
        assert self.collect_fn is not None

        def progress(name: str, state: Any) -> None:
            word = "running" if state is None else str(getattr(state, "value", state))
            self.call_from_thread(screen.update_state, name, word)

        snap = self.collect_fn(progress)
        self.call_from_thread(self._collected, screen, snap, reason)

    def _collected(self, screen: CollectScreen, snap: Snapshot, reason: str) -> None:
        self.collecting = False
        if self.session is None:
            record = IncidentRecord(self.record_path or default_path(snap.hostname))
            self.session = TriageSession(
                snap, self.book, engine=self.engine, source="live", record=record
            )
            if self.symptom:
                self.session.set_symptom(self.symptom)
            if self.screen is screen:
                self.switch_screen(FindingsScreen())
            self._say_replayed()
            self._first_question()
        else:
            self.session.replace_snapshot(snap, reason)
            if self.screen is screen:
                self.pop_screen()
        self.reevaluate(reason)

    # ------------------------------------------------------------------ evaluation
    def reevaluate(self, reason: str) -> None:
        self._evaluate(reason)

    @work(thread=True, exclusive=False, group="evaluate", exit_on_error=False)
    def _evaluate(self, reason: str) -> None:
        self.session.evaluate(reason)
        self.call_from_thread(self.refresh_screens)

    def refresh_screens(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, TriageScreen):
                screen.findings_changed()

    def explain(self, rule_id: str, subject: str = "") -> str:
        """Why the rule fired or not, clause by clause; ``subject``'s binding first."""
        from gpu_triage.engine.explain import explain, render_explanation
        from gpu_triage.engine.inputs import EvalInput

        snap = self.session.snapshot.model_copy(deep=True)
        try:
            x = explain(EvalInput.from_snapshot(snap), self.book, rule_id)
        except KeyError as exc:
            return str(exc.args[0])
        if subject:
            x.bindings.sort(key=lambda b: b.subject != subject)
        return render_explanation(x)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            if event.worker.group == "collect":
                self.collecting = False
            self.notify(
                f"{type(err).__name__}: {err}",
                title=f"{event.worker.name} failed",
                severity="error",
                timeout=10,
            )

    # ------------------------------------------------------------------ people
    def ask_questions(self, finding: Finding | None) -> None:
        questions = list(finding.questions) if finding and finding.questions else []
        answers = self.session.snapshot.facts.answers
        if not questions:
            questions = self.session.open_questions()
        elif all(q.id in answers for q in questions):
            pass  # the responder asked again on purpose: let them change the answer
        if not questions:
            self.notify("No open questions.")
            return
        self._ask(questions)

    @work(exclusive=True, group="questions", exit_on_error=False)
    async def _ask(self, questions: Iterable[Any]) -> None:
        from gpu_triage.tui.modals import QuestionModal

        answered = []
        for q in questions:
            value = await self.push_screen_wait(QuestionModal(q))
            if value is None:
                break
            self.session.answer(q, value)
            answered.append(q.id)
        if answered:
            self.reevaluate(f"answered {', '.join(answered)}")

    def add_note(self, finding: Finding | None, step: int | None = None) -> None:
        about = "the incident"
        if finding is not None:
            about = f"{finding.title} ({finding.subject})"
            if step is not None:
                about = f"step {step + 1} of {about}"

        from gpu_triage.tui.modals import NoteModal

        def save(text: str | None) -> None:
            if text:
                self.session.note(text, finding, step)
                self.notify("Note saved in the incident record.")
                self.refresh_screens()

        self.push_screen(NoteModal(about), save)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Snapshot mode: nothing to re-collect, so the key is hidden from the footer.
        return not (action == "recollect" and self.collect_fn is None)

    def action_export(self) -> None:
        if self.session is None or self.session.record is None:
            self.notify("No incident record yet.", severity="warning")
            return
        try:
            md, js = self.session.record.export()
        except OSError as exc:
            self.notify(f"Cannot export: {exc}", severity="error")
            return
        self.last_export = (md, js)
        self.notify(f"{md}\n{js}", title="Incident record exported", timeout=8)

    def action_recollect(self) -> None:
        self.start_collection("re-collected on request")

    def action_toggle_help(self) -> None:
        from gpu_triage.tui.keys import KeysScreen

        if isinstance(self.screen, KeysScreen):
            self.screen.dismiss()
        else:
            self.push_screen(KeysScreen(self.screen))

    def action_show_help_panel(self) -> None:
        # Textual's panel docks beside the main view and squeezes it: ours overlays it.
        from gpu_triage.tui.keys import KeysScreen

        if not isinstance(self.screen, KeysScreen):
            self.push_screen(KeysScreen(self.screen))

    # ------------------------------------------------------------------ leaving
    def unsaved_work(self) -> list[str]:
        """What quitting now would lose: steps running, answers or notes typed."""
        reasons: list[str] = []
        for screen in self.screen_stack:
            running = getattr(screen, "running_step", None)
            if callable(running) and (what := running()):
                reasons.append(what)
            unsaved = getattr(screen, "unsaved", None)
            if callable(unsaved) and (what := unsaved()):
                reasons.append(what)
        return reasons

    async def action_quit(self) -> None:
        reasons = self.unsaved_work()
        if not reasons:
            self.exit()
            return
        self._confirm_quit(reasons)

    @work(exclusive=True, group="quit", exit_on_error=False)
    async def _confirm_quit(self, reasons: list[str]) -> None:
        from gpu_triage.tui.modals import ConfirmQuitModal

        if not await self.push_screen_wait(ConfirmQuitModal(reasons)):
            return
        for screen in self.screen_stack:
            stop = getattr(screen, "stop_step", None)
            if callable(stop):
                await stop()
        self.exit()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every action of the screen in front and of the app, by its name (from the
        bindings, so nothing is left out), then Textual's own (theme, screenshot)."""
        from gpu_triage.tui.keys import screen_actions

        own = screen_actions(self, screen)
        names = {a.title.lower() for a in own}
        for a in own:
            key = f" (key {a.key})" if a.key else ""
            yield SystemCommand(
                a.title, f"{a.help}{key}", partial(self.run_action, a.action, a.node)
            )
        for cmd in super().get_system_commands(screen):
            if cmd.title.lower() not in names and cmd.title != "Keys":
                yield cmd


# --------------------------------------------------------------------------- entry point

# A snapshot of up to this many items (events, links, processes ...) is evaluated before
# the first frame, which then shows its findings (a tenth of a second at most: the costs
# are linear, benchmarks/bench_evaluate.py); a larger one behind a screen that says
# "evaluating…", as a live collection is.
EVALUATE_BEFORE_PAINT_ITEMS = 10_000


def build_app(opts: TuiOptions) -> TriageApp:
    """From ``gpu-triage tui`` options; raises RulebookError / SnapshotError."""
    if opts.engine in ("auto", "durable"):
        # The worker's process starts now, beside the rulebook's load (engine start-up).
        from gpu_triage.engine.durable_worker import prespawn

        prespawn()
    from gpu_triage.engine.compiler import load_rulebook

    book = load_rulebook(
        list(opts.rules),
        include_builtin=opts.include_builtin,
        allow_untrusted=opts.allow_untrusted_rules,
    )
    engine = opts.engine
    if engine in ("auto", "durable"):
        from gpu_triage.engine.durable_backend import warm_up

        warm_up(book)  # the worker compiles the rulebook while Textual starts
    record_arg = opts.record
    snapshot_path = opts.snapshot
    if opts.demo:
        from gpu_triage.model.demos import demo_snapshot_path

        snapshot_path = demo_snapshot_path(opts.demo)
    if snapshot_path is not None:
        from gpu_triage.model.limits import counts_of
        from gpu_triage.model.snapshot import load_snapshot

        snap = load_snapshot(snapshot_path)
        record = IncidentRecord(record_arg or default_path(snap.hostname))
        session = TriageSession(snap, book, engine=engine, source=str(snapshot_path), record=record)
        if opts.symptom:
            session.set_symptom(None if opts.symptom == "none" else opts.symptom)
        if sum(counts_of(snap.facts).values()) <= EVALUATE_BEFORE_PAINT_ITEMS:
            try:
                session.evaluate("opened")  # the first frame has the findings
            except Exception:  # noqa: BLE001 - the app evaluates again and shows why
                session.doc = None
                session.history.clear()
        label = "demo incident" if opts.demo else str(snapshot_path)
        return TriageApp(
            book=book,
            session=session,
            engine=engine,
            source_label=label,
            ask_symptom=opts.symptom is None,
        )

    from gpu_triage.collectors.base import CollectContext
    from gpu_triage.collectors.runner import collect_snapshot, default_collectors

    window = opts.window_s
    collectors = default_collectors()

    def collect(progress: Callable[[str, Any], None]) -> Snapshot:
        return collect_snapshot(collectors, CollectContext(window_s=window), progress=progress)

    return TriageApp(
        book=book,
        collect=collect,
        collector_names=[str(getattr(c, "name", type(c).__name__)) for c in collectors],
        engine=engine,
        record_path=record_arg,
        ask_symptom=opts.symptom is None,
        symptom=None if opts.symptom in (None, "none") else opts.symptom,
    )


def run_tui(opts: TuiOptions) -> int:
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError

    try:
        app = build_app(opts)
    except (RulebookError, SnapshotError, ValueError) as exc:
        print(f"gpu-triage: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        print(f"gpu-triage: cannot open the incident record: {exc}", file=sys.stderr)
        return 3
    startup_gc.settle()  # the modules, the rulebook and the snapshot are loaded: they stay
    result = app.run()
    if app.session is not None and app.session.record is not None:
        print(f"incident record: {app.session.record.path}", file=sys.stderr)
    return int(result or 0)
