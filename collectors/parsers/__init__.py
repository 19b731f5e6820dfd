"""Parsers that turn tool output (nvidia-smi, dmesg, lspci, mpstat, ...) into typed facts.

Parsers are pure functions of text. They skip what they do not recognise (pastes
arrive with wrapped lines, collapsed columns and redactions) and raise
:class:`ParseError` only when the input is not the format at all.
"""

from __future__ import annotations


class ParseError(ValueError):
    """Output that could not be parsed; names the source and position."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "<text>",
        line: int | None = None,
        col: int | None = None,
    ) -> None:
        self.source, self.line, self.col, self.message = source, line, col, message
        where = source
        if line is not None:
            where += f":{line}"
            if col is not None:
                where += f":{col}"
        super().__init__(f"{where}: {message}")
