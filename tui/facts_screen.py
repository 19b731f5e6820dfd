"""The facts screen: every fact of the snapshot, searchable.

Its own module, imported when the facts are first browsed: the table widget is not
loaded before the TUI's first frame."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from gpu_triage.tui import render
from gpu_triage.tui.screens import SEARCH_DEBOUNCE_S, TriageScreen, framed


class FactsScreen(TriageScreen):
    CSS = (
        framed("facts-table")
        + """
#search { height: 3; }
#facts-table { height: 1fr; }
#facts-count { height: 1; padding: 0 1; }
"""
    )
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
