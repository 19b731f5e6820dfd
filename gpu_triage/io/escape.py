"""Node strings made inert at each output boundary.

GPU names, hostnames, process names (an Xid's ``process_name`` is the comm of any user's
process), kernel log lines and command output are attacker-controlled: whatever a
report shows, it must show as text. Each output format has one function here:

- :func:`visible` (terminals, the CLI and the TUI): every control character and escape
  sequence shown as a visible ``\\x1b``/``\\n``/``\\u2028``, never interpreted; newlines kept
  only where a text is meant to span lines; lone surrogates replaced.
- :func:`md_text`, :func:`md_code` (Markdown): :func:`visible` first (so no newline can end
  a table row or start a heading), then Markdown and HTML punctuation backslash-escaped:
  pipes, backticks, ``<``, ``&``, emphasis and link brackets, a leading ``#``/``>``/list
  marker.
- :func:`prom_label` (Prometheus label values): every control character but the newline
  (which the exposition format escapes itself) shown visibly.
- JSON and JSONL: :mod:`gpu_triage.io.jsonio` (lone surrogates replaced, non-finite
  numbers as null).
"""

from __future__ import annotations

import re

from gpu_triage.io.jsonio import scrub

# C0 and C1 controls, DEL, line/paragraph separators, bidirectional overrides, BOM.
_CONTROL = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]"
)
_CONTROL_BUT_NEWLINE = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _show(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape, never interpreted
    (``multiline``: newlines kept as line breaks)."""
    s = scrub(text if isinstance(text, str) else str(text))
    pattern = _CONTROL_BUT_NEWLINE if multiline else _CONTROL
    return pattern.sub(_show, s)


# Inline Markdown/HTML punctuation; backslash-escaping any ASCII punctuation is valid
# CommonMark, and a table cell's pipe needs it (GFM).
_MD_INLINE = re.compile(r"[\\`*_\[\]<>|~&!]")
_MD_BLOCK_START = re.compile(r"^(\s*)([#>+=-])")
_MD_LIST_NUMBER = re.compile(r"^(\s*\d+)([.)])")


def md_text(text: object) -> str:
    """Text for any place in a Markdown line (a paragraph, a list item, a heading, a table
    cell): one line, nothing in it read as Markdown or HTML."""
    s = _MD_INLINE.sub(lambda m: "\\" + m.group(), visible(text))
    s = _MD_BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), s, count=1)
    return _MD_LIST_NUMBER.sub(lambda m: m.group(1) + "\\" + m.group(2), s, count=1)


def md_code(text: object, *, in_table: bool = False) -> str:
    """A Markdown code span that holds ``text`` exactly (a fence longer than any run of
    backticks in it); in a table, pipes are escaped as GFM requires."""
    s = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    if in_table:
        s = s.replace("|", "\\|")
    return f"{fence}{pad}{s}{pad}{fence}"


def prom_label(value: object) -> str:
    """A Prometheus label value: prometheus_client escapes backslash, quote and newline;
    every other control character (``\\r`` first: a text-mode reader ends the line there)
    is shown visibly."""
    return _CONTROL_BUT_NEWLINE.sub(_show, scrub(value if isinstance(value, str) else str(value)))
