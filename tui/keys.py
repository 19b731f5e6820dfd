"""Every key of the screen in front, from its bindings (never a hand-kept list): the F1
overlay and the command palette both read :func:`screen_actions`, so an action added to a
screen is in both at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

# Moving between panes and copying text: Textual's own, said once at the foot of F1.
_MOVEMENT = frozenset(
    {"focus_next", "focus_previous", "app.focus_next", "app.focus_previous",
     "screen.copy_text", "copy_text", "app.copy_text", "screen.maximize", "screen.minimize"}
)  # fmt: skip


@dataclass(frozen=True)
class ScreenAction:
    key: str  # as the footer shows it
    title: str  # the binding's description
    help: str  # its tooltip, or the description again
    action: str
    node: Any  # the screen or the app the action runs on
    where: str  # "screen" or "app"


def screen_actions(app: App[Any], screen: Screen[Any]) -> list[ScreenAction]:
    """The actions of ``screen`` (even those whose key a focused list also uses, such as
    enter) and of the app, each once, in binding order. Widget bindings (the cursor keys
    of a list) are left to the widget."""
    out: list[ScreenAction] = []
    seen: set[str] = set()

    def add(node: Any, binding: Binding, key: str, where: str) -> None:
        ident = f"{where}:{binding.action}"
        if not binding.description or ident in seen or binding.action in _MOVEMENT:
            return
        if app._check_action_state(binding.action, node) is False:
            return  # hidden by the screen's check_action (re-collect on a snapshot)
        seen.add(ident)
        out.append(
            ScreenAction(
                key=app.get_key_display(binding) or key,
                title=binding.description,
                help=binding.tooltip or binding.description,
                action=binding.action,
                node=node,
                where=where,
            )
        )

    for key, bindings in screen._bindings.key_to_bindings.items():
        for binding in bindings:
            add(screen, binding, key, "screen")
    for key, active in screen.active_bindings.items():
        if isinstance(active.node, App):
            add(active.node, active.binding, key, "app")
    return out


class KeysScreen(ModalScreen[None]):
    """F1: the keys of the screen behind, full width (the main view is never squeezed)."""

    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > Vertical {
        width: 90%; max-width: 90; height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    KeysScreen VerticalScroll { height: 1fr; }
    """
    BINDINGS = [Binding("escape,f1,q", "close", "Close", id="keys-close")]

    def __init__(self, behind: Screen[Any]) -> None:
        super().__init__()
        self.behind = behind

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text("Keys (escape closes; ctrl+p finds any action by name)", style="bold")
            )
            with VerticalScroll(id="keys-pane"):
                yield Static(self._text(), id="keys-text")

    def _text(self) -> Table:
        acts = screen_actions(self.app, self.behind)
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", style="bold", no_wrap=True)
        table.add_column()
        for heading, where in (("This screen", "screen"), ("Everywhere", "app")):
            mine = [a for a in acts if a.where == where]
            if not mine:
                continue
            table.add_row("", Text(heading, style="bold underline"))
            for a in mine:
                line = Text(a.title)
                if a.help != a.title:
                    line.append(f": {a.help}", style="dim")
                table.add_row(a.key, line)
            table.add_row("", "")
        table.add_row("", Text("In lists and tables", style="bold underline"))
        table.add_row("↑ ↓ pgup pgdn", "move; home / end: first / last")
        table.add_row("tab shift+tab", "next / previous pane")
        return table

    def on_mount(self) -> None:
        self.query_one("#keys-pane").focus()

    def action_close(self) -> None:
        self.dismiss()
