"""Running one runbook step: its argument list under its timeout, output streamed line by
line (on io/commands), and the one-line summary a front end shows when it ends.

Confirming with the responder first is the front end's job (the TUI asks twice for steps
that change the system or need root); this module only runs what it is given."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gpu_triage.engine.model import RunbookStep
from gpu_triage.io.commands import CommandResult, run_streaming


async def run_step(
    step: RunbookStep, on_line: Callable[[str], None], *, cancel: asyncio.Event | None = None
) -> CommandResult:
    """Run ``step.command``; ``on_line`` gets each output line as it arrives."""
    if step.command is None:
        raise ValueError(f"step '{step.title}' has no command to run")
    return await run_streaming(list(step.command), step.timeout_s, on_line, cancel=cancel)


def result_summary(result: CommandResult) -> str:
    """How the command ended, for the output pane: ``[ok, 1.2 s, 40 lines]``."""
    tail = f"[{result.status}, {result.duration_s:.1f} s, {result.lines} lines]"
    return f"{result.error} {tail}" if result.error else tail
