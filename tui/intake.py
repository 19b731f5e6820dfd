"""What the responder brings: the first screen "what are you seeing?" (the symptom's
differential first, as ``run --symptom``) and a paste of terminal output or an error
(read as ``collect --from-text`` reads a file)."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from gpu_triage.engine.symptoms import symptom_choices
from gpu_triage.tui import render
from gpu_triage.tui.screens import TriageScreen

NOTHING = "none"  # the option for "nothing specific"
PASTE = "paste"  # the option that opens the paste screen


class SymptomScreen(TriageScreen):
    """Shown first: the symptom ranks its differential first and asks its questions first."""

    CSS = """
#symptom-box { padding: 0 1; height: 1fr; }
#symptoms { height: 1fr; }
"""

    BINDINGS = [
        Binding("escape", "skip", "Skip", id="symptom-skip", tooltip="Every finding, no symptom"),
        Binding("p", "paste", "Paste", id="symptom-paste",
                tooltip="Paste an error or command output"),
    ]  # fmt: skip

    def compose(self) -> ComposeResult:
        with Vertical(id="symptom-box"):
            yield Static(Text("What are you seeing?", style="bold"), id="symptom-title")
            yield Static(
                Text(
                    "The rules that explain it come first, and their questions are asked "
                    "first. Nothing is hidden: every finding stays in the list.",
                    style="dim",
                )
            )
            yield OptionList(id="symptoms", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        ol = self.query_one("#symptoms", OptionList)
        current = self.triage.session.symptom
        for value, label, help_text in symptom_choices():
            t = Text(label, style="bold")
            t.append(f"\n  {help_text}", style="dim")
            if value == current:
                t.append("  (chosen)", style="bold")
            ol.add_option(Option(t, id=value))
        ol.add_option(
            Option(Text("Nothing specific: show every finding", style="bold"), id=NOTHING)
        )
        ol.add_option(
            Option(
                Text("Paste what I see (an error, a terminal session) …", style="bold"), id=PASTE
            )
        )
        ol.border_title = "Symptom"
        values = [v for v, _, _ in symptom_choices()]
        ol.highlighted = values.index(current) if current in values else 0
        ol.focus()

    @on(OptionList.OptionSelected, "#symptoms")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        choice = event.option.id or NOTHING
        if choice == PASTE:
            self.action_paste()
            return
        self.choose(None if choice == NOTHING else choice)

    def choose(self, symptom: str | None) -> None:
        session = self.triage.session
        if symptom != session.symptom:
            session.set_symptom(symptom)
            self.triage.reevaluate(f"symptom: {symptom or 'nothing specific'}")
        self.dismiss()

    def action_skip(self) -> None:
        self.dismiss()

    def action_paste(self) -> None:
        self.app.switch_screen(PasteScreen())


class PasteScreen(TriageScreen):
    """A text area for a paste; ctrl+s reads it and says what each part was read as."""

    CSS = """
#paste-title { height: auto; padding: 0 1; }
#paste-area { height: 2fr; }
#paste-result-pane { height: 1fr; padding: 0 1; }
"""

    BINDINGS = [
        Binding("ctrl+s", "read", "Read it", id="paste-read", tooltip="Read the pasted text"),
        Binding("escape", "back", "Back", id="paste-back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.read_text: str | None = None  # the text last read (unsaved: typed since)

    def compose(self) -> ComposeResult:
        yield Static(
            Text(
                "Paste what you see: an error, command output, a whole terminal session "
                "with its prompts. ctrl+s reads it; each part is recognised by its content.",
                style="bold",
            ),
            id="paste-title",
        )
        yield TextArea(id="paste-area", soft_wrap=False, show_line_numbers=True)
        with VerticalScroll(id="paste-result-pane"):
            yield Static(id="paste-result")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        area = self.query_one("#paste-area", TextArea)
        area.border_title = "Paste"
        area.focus()

    def unsaved(self) -> str:
        text = self.query_one("#paste-area", TextArea).text
        return "pasted text is not read yet" if text.strip() and text != self.read_text else ""

    def action_back(self) -> None:
        self.dismiss()

    def action_read(self) -> None:
        text = self.query_one("#paste-area", TextArea).text
        if not text.strip():
            self.notify("Nothing pasted yet.", severity="warning")
            return
        self._read(text)

    @work(thread=True, exclusive=True, group="paste", exit_on_error=False)
    def _read(self, text: str) -> None:
        intake = self.triage.session.add_paste(text)
        self.app.call_from_thread(self._shown, text, intake)

    def _shown(self, text: str, intake: object) -> None:
        from gpu_triage.collectors.from_text import PARSED, Intake

        assert isinstance(intake, Intake)
        self.read_text = text
        t = render.SafeText()
        if intake.anything_read:
            t.append("Read and added to the facts; the findings are re-evaluated.\n", style="bold")
        else:
            t.append("Nothing recognised: no fact was added.\n", style="bold yellow")
        for piece in intake.pieces:
            style = "green" if piece.state == PARSED else "yellow"
            t.append(f"  {piece.describe()}\n", style=style)
        self.query_one("#paste-result", Static).update(t)
        if intake.anything_read:
            self.triage.reevaluate("pasted text read")
