"""The GPU overview (``g``): one row per GPU, in the spirit of nvitop. Enter opens the
worst finding about the GPU under the cursor."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from gpu_triage.ops.overview import NA, GpuRow, gpu_rows
from gpu_triage.tui import render
from gpu_triage.tui.screens import DetailScreen, TriageScreen, framed

COLUMNS = ("GPU", "util", "memory", "power", "temp", "link", "Xid", "worst finding")
WIDE = 110  # columns from which each value is shown in full


def worst_text(row: GpuRow, *, wide: bool = True) -> Text:
    """The worst finding; at 80 columns its severity and how many fired (the line under
    the table names it in full)."""
    if row.worst is None:
        return render.SafeText("none fired" if not wide else "no finding fired", style="dim")
    t = render.severity_label(row.worst)
    if not wide:
        t.rstrip()
        t.append(f" ({row.other_findings + 1})" if row.other_findings else "", style="dim")
        return t
    t.append(" ")
    t.append(row.worst.title)
    if row.other_findings:
        t.append(f" (+{row.other_findings} more)", style="dim")
    return t


def _compact(value: str) -> str:
    """For 80 columns: "68.4/80G 86%" -> "86%", "640/700W" -> "640W", "62°C/90" -> "62°C",
    "gen5 x16 NVL 18/18" -> "gen5 x16" (the wide table and the facts browser keep the rest)."""
    if value == NA:
        return value
    if value.endswith("%") and " " in value:
        return value.rsplit(" ", 1)[1]
    if value.endswith("W") and "/" in value:
        return value.split("/", 1)[0] + "W"
    if "°C/" in value:
        return value.split("/", 1)[0]
    if " NVL " in value:
        return value.split(" NVL ", 1)[0]
    return value


def row_cells(row: GpuRow, *, wide: bool = True) -> list[Text]:
    """The cells of one row; values not read read "n/a", dimmed, never 0."""

    def cell(value: str, style: str = "") -> Text:
        shown = value if wide else _compact(value)
        return render.SafeText(shown, style="dim" if value == NA else style)

    label = row.label + (" LOST" if row.lost else "")
    return [
        cell(label, "bold red" if row.lost else "bold"),
        cell(row.util),
        cell(row.memory),
        cell(row.power),
        cell(row.temperature),
        cell(row.link),
        cell(row.xids, "bold red" if row.xids != "-" else "dim"),
        worst_text(row, wide=wide),
    ]


class GpuScreen(TriageScreen):
    CSS = (
        framed("gpu-table")
        + """
#gpu-title { height: 1; padding: 0 1; }
#gpu-table { height: auto; max-height: 1fr; }
#gpu-note { height: auto; padding: 0 1; }
"""
    )
    BINDINGS = [
        Binding("escape", "dismiss_screen", "Back", id="gpus-back"),
        Binding(
            "enter",
            "open_worst",
            "Worst finding",
            id="gpus-open",
            key_display="⏎",
            tooltip="The worst finding about this GPU, in full",
        ),
    ]

    def compose(self) -> ComposeResult:
        yield Static(id="gpu-title")
        yield DataTable(id="gpu-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="gpu-note")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#gpu-table", DataTable)
        table.border_title = "GPUs"
        table.add_columns(*COLUMNS)
        self.findings_changed()
        table.focus()

    def findings_changed(self) -> None:
        session = self.triage.session
        self.rows = gpu_rows(session.snapshot.facts, session.doc)
        table = self.query_one("#gpu-table", DataTable)
        keep = table.cursor_row
        table.clear()
        wide = self.app.size.width >= WIDE
        for row in self.rows:
            table.add_row(*row_cells(row, wide=wide))
        if self.rows:
            table.move_cursor(row=min(keep, len(self.rows) - 1))
        title = render.SafeText(session.snapshot.hostname or "unknown host", style="bold")
        title.append(f"  {len(self.rows)} GPUs", style="dim")
        self.query_one("#gpu-title", Static).update(title)
        self._show_row()

    @on(DataTable.RowHighlighted, "#gpu-table")
    def _show_row(self) -> None:
        """Under the table, the GPU under the cursor in full: its worst finding, what was
        not read and why (n/a in the table is never a zero)."""
        if not self.rows:
            self.query_one("#gpu-note", Static).update(Text("No GPU in the facts.", style="dim"))
            return
        row = self.rows[min(self.query_one("#gpu-table", DataTable).cursor_row, len(self.rows) - 1)]
        t = render.SafeText(f"{row.label} ", style="bold")
        t.append(f"{row.name}  {row.bus_id}\n", style="dim")
        t.append("worst: ")
        t.append_text(worst_text(row))
        if row.worst is not None:
            t.append("  (enter opens it)", style="dim")
        t.append(f"\nmemory {row.memory} · power {row.power} · temp {row.temperature} · ")
        t.append(f"link {row.link}")
        for why in row.unknown:
            t.append(f"\nn/a {why}", style="dim")
        self.query_one("#gpu-note", Static).update(t)

    def action_dismiss_screen(self) -> None:
        self.dismiss()

    @on(DataTable.RowSelected, "#gpu-table")
    def _selected(self) -> None:
        self.action_open_worst()

    def action_open_worst(self) -> None:
        table = self.query_one("#gpu-table", DataTable)
        if not self.rows:
            return
        row = self.rows[min(table.cursor_row, len(self.rows) - 1)]
        if row.worst is None:
            self.notify(f"No finding fired about {row.label}.")
            return
        self.app.push_screen(DetailScreen(row.worst))
