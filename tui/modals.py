"""Modal questions: confirm a command (twice for risky ones), answer a question, add a note."""

from __future__ import annotations

import getpass
import os
import socket
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from gpu_triage.engine.model import Question, QuestionType, RunbookStep
from gpu_triage.engine.placeholders import placeholders, supply
from gpu_triage.ops.session import parse_answer
from gpu_triage.tui.render import argv_text, question_kind

MODAL_CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical {
    width: 90%; max-width: 100; height: auto; max-height: 90%;
    border: thick $accent; background: $surface; padding: 0 1;
}
ModalScreen .hint { color: $text-muted; margin-top: 1; }
ModalScreen .danger { color: $error; text-style: bold; }
ModalScreen Input { margin-top: 1; }
ModalScreen OptionList { height: auto; max-height: 10; margin-top: 1; }
"""


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


class ConfirmRunModal(ModalScreen[bool]):
    """Shows the exact argument list before anything runs. y / enter runs, n / escape not."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [
        Binding("y", "answer(True)", "Run it", id="confirm-run"),
        Binding("n,escape", "answer(False)", "Do not run", id="cancel-run"),
    ]

    def __init__(self, step: RunbookStep, subject: str, where: str = "") -> None:
        super().__init__()
        self.step = step
        self.subject = subject
        self.where = where  # the incident's node, as the session checked it

    def compose(self) -> ComposeResult:
        s = self.step
        argv = s.command or []
        t = Text()
        t.append("Run this command?\n", style="bold")
        t.append(f"{s.title} ({self.subject})\n")
        if self.where:
            t.append(f"{self.where}\n", style="bold")
        t.append("\n")
        t.append("  " + argv_text(argv) + "\n", style="bold")
        t.append("  argv: ", style="dim")
        t.append(repr(argv) + "\n", style="dim")
        t.append(
            f"\nas {_who()}, no shell, timeout {s.timeout_s:g} s, "
            "output parsed" + (f" as {s.parser}" if s.parser else ": no") + "\n"
        )
        with Vertical():
            yield Static(t, id="confirm-text")
            if s.changes_system or s.needs_root:
                flags = []
                if s.changes_system:
                    flags.append("this step CHANGES THE SYSTEM")
                if s.needs_root:
                    root = os.geteuid() == 0
                    flags.append("it needs root" + ("" if root else " (you are not root)"))
                yield Static(
                    Text("; ".join(flags) + ": a second confirmation follows."), classes="danger"
                )
            yield Static("y run · n / escape do not run", classes="hint")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class SecondConfirmModal(ModalScreen[bool]):
    """For steps that change the system or need root: type ``run`` and press enter."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Do not run", id="cancel-risky")]

    def __init__(self, step: RunbookStep) -> None:
        super().__init__()
        self.step = step

    def compose(self) -> ComposeResult:
        s = self.step
        why = []
        if s.changes_system:
            why.append("changes the system")
        if s.needs_root:
            why.append("needs root")
        with Vertical():
            yield Static(
                Text(f"Second confirmation: this step {' and '.join(why)}.", style="bold"),
                classes="danger",
            )
            yield Static(Text("  " + argv_text(s.command)))
            yield Static("Type run and press enter to run it; escape does not.", classes="hint")
            yield Input(placeholder="run", id="second-confirm")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip().lower() == "run":
            self.dismiss(True)
        else:
            self.notify("Not run: type run to confirm.", severity="warning")
            self.dismiss(False)

    def action_cancel(self) -> None:
        self.dismiss(False)


class QuestionModal(ModalScreen[Any]):
    """Asks one rulebook question; dismisses with the typed answer, or None."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "skip", "Not now", id="skip-question")]

    def __init__(self, question: Question) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical():
            yield Static(Text(q.text, style="bold"))
            if q.help:
                yield Static(Text(q.help), classes="hint")
            yield Static(Text(f"Answer: {question_kind(q)}"), classes="hint")
            if q.type is QuestionType.CHOICE:
                unit = f" {q.unit}" if q.unit else ""
                yield OptionList(
                    *[Option(Text(c + unit), id=f"choice-{i}") for i, c in enumerate(q.choices)],
                    id="choices",
                )
            elif q.type is QuestionType.YES_NO:
                yield Static("y yes · n no · escape not now", classes="hint")
            else:
                yield Input(placeholder=q.unit or "number", id="answer", type="number")
                yield Static("enter to answer · escape not now", classes="hint")

    def unsaved(self) -> str:
        typed = [w.value for w in self.query(Input) if w.value.strip()]
        return f"an answer to '{self.question.text}' is typed but not given" if typed else ""

    def on_key(self, event: Any) -> None:
        if self.question.type is QuestionType.YES_NO and event.key in ("y", "n"):
            event.stop()
            self.dismiss(event.key == "y")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            self.dismiss(parse_answer(self.question, event.value))
        except ValueError as exc:
            self.notify(str(exc), severity="warning")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.question.choices[event.option_index])

    def action_skip(self) -> None:
        self.dismiss(None)


class NoteModal(ModalScreen[str | None]):
    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel-note")]

    def __init__(self, about: str) -> None:
        super().__init__()
        self.about = about

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Note on {self.about}", style="bold"))
            yield Input(placeholder="what you saw or did", id="note")
            yield Static("enter saves it in the incident record · escape cancels", classes="hint")

    def unsaved(self) -> str:
        typed = self.query_one("#note", Input).value.strip()
        return f"a note on {self.about} is typed but not saved" if typed else ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ParametersModal(ModalScreen[list[str] | None]):
    """Asks for the parameters a step's command still lacks (``{job.command}``,
    ``{input.peer_host}``, a GPU the finding could not name). The step cannot run until each
    has a value; dismisses with the filled argument list, or None."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Do not run", id="cancel-params")]

    def __init__(self, step: RunbookStep, argv: list[str]) -> None:
        super().__init__()
        self.step = step
        self.argv = argv
        self.names = placeholders(argv)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"{self.step.title}: fill in before it can run", style="bold"))
            yield Static(Text("  " + argv_text(self.argv)))
            for i, name in enumerate(self.names):
                yield Static(Text(f"{name}:"), classes="hint")
                yield Input(placeholder=name, id=f"param-{i}")
            yield Static(
                "enter moves on, the last enter goes to the confirmation · escape does not run",
                classes="hint",
            )

    def unsaved(self) -> str:
        typed = any(w.value.strip() for w in self.query(Input))
        return (
            f"parameters of '{self.step.title}' are typed but the step was not run" if typed else ""
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        inputs = list(self.query(Input))
        empty = [w for w in inputs if not w.value.strip()]
        if empty:
            empty[0].focus()
            return
        values = {name: w.value for name, w in zip(self.names, inputs, strict=True)}
        try:
            self.dismiss(supply(self.argv, values))
        except ValueError as exc:
            self.notify(str(exc), severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmQuitModal(ModalScreen[bool]):
    """Quitting would lose something (a step running, an answer typed): say what, ask."""

    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [
        Binding("y", "answer(True)", "Quit anyway", id="quit-yes"),
        Binding("n,escape", "answer(False)", "Stay", id="quit-no"),
    ]

    def __init__(self, reasons: list[str]) -> None:
        super().__init__()
        self.reasons = reasons

    def compose(self) -> ComposeResult:
        t = Text("Quit now?\n", style="bold")
        for r in self.reasons:
            t.append(f"  • {r}\n")
        with Vertical():
            yield Static(t, id="quit-reasons")
            yield Static(
                "y quit (a running step is cancelled, its process group stopped) · n / escape stay",
                classes="hint",
            )

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
