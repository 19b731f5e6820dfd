"""Snapshots from saved or pasted command output (``gpu-triage collect --from-text``).

Each input is a file (or stdin, or a paste in the TUI). With a kind (``KIND:FILE``)
the whole text goes to that parser. Without one the text is cleaned (colour codes,
CRLF), cut at shell prompts into the blocks each command printed
(:mod:`~gpu_triage.collectors.paste`), and each block into segments that one parser
reads (:mod:`~gpu_triage.collectors.recognise`). Every piece becomes a collector
status of its own: parsed, parsed to nothing, failed (with the parser's error), or
not recognised, always with its file and line range. Parts of one kind merge
(:func:`~gpu_triage.collectors.merge.combine_facts`): kernel logs interleave by
time, GPUs match by bus id.

:func:`intake_texts` / :func:`intake_paste` are the API (the TUI calls them);
:func:`snapshot_from_texts` wraps the result as a snapshot.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpu_triage.collectors.merge import combine_facts
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.registry import PARSERS, get_parser
from gpu_triage.collectors.paste import clean_lines, split_blocks, strip_grep_prefixes
from gpu_triage.collectors.recognise import keeps_grep_prefix, kind_for_command, recognise
from gpu_triage.collectors.runner import tie_to_gpus
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import CollectorState, CollectorStatus, RawOutput, Snapshot

PARSED, EMPTY, FAILED, UNRECOGNISED = "parsed", "empty", "failed", "unrecognised"


@dataclass(frozen=True)
class TextInput:
    """One text to read: its content, where it came from, and a kind when forced."""

    text: str
    source: str
    kind: str | None = None


@dataclass
class Piece:
    """What happened to lines ``first..last`` (1-based) of one input."""

    source: str
    first: int
    last: int
    parser: str | None
    state: str
    message: str = ""
    command: str | None = None
    kinds: list[str] = field(default_factory=list)  # kinds the read proves (may be empty)
    produced: list[str] = field(default_factory=list)  # kinds it gave values for
    duration_s: float = 0.0
    whole: bool = False  # the piece is the whole input

    @property
    def where(self) -> str:
        if self.whole:
            return self.source
        lines = f"{self.first}" if self.first == self.last else f"{self.first}-{self.last}"
        return f"{self.source}:{lines}"

    @property
    def name(self) -> str:
        label = Path(self.source).name or self.source
        span = "" if self.whole else f":{self.first}-{self.last}"
        return f"text:{self.parser or 'unrecognised'}:{label}{span}"

    def status(self) -> CollectorStatus:
        ok = self.state == PARSED
        return CollectorStatus(
            name=self.name,
            state=CollectorState.OK if ok else CollectorState.FAILED,
            duration_s=round(self.duration_s, 4),
            error="" if ok else self.message,
            kinds=self.kinds if ok else [],
        )

    def describe(self) -> str:
        """One line for a person: where, what read it, and what came of it."""
        after = f" (after `{_printable(self.command)}`)" if self.command else ""
        if self.state == PARSED:
            what = f"read as {self.parser}" + (
                f": {', '.join(self.produced)}" if self.produced else ""
            )
        elif self.state == UNRECOGNISED:
            what = f"not recognised: {self.message}"
        else:
            what = f"{self.parser}: {self.message}"
        return f"{self.where}{after}: {what}"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


@dataclass
class Intake:
    facts: Facts
    pieces: list[Piece]
    raw: list[RawOutput]

    def statuses(self) -> list[CollectorStatus]:
        return [p.status() for p in self.pieces]

    @property
    def problems(self) -> list[Piece]:
        return [p for p in self.pieces if p.state != PARSED]

    @property
    def anything_read(self) -> bool:
        return any(p.state == PARSED for p in self.pieces)


def intake_paste(text: str, source: str = "paste", kind: str | None = None) -> Intake:
    """One pasted text (a terminal session, one command's output ...) read as a file is."""
    return intake_texts([TextInput(text, source, kind)])


def intake_texts(inputs: Sequence[TextInput]) -> Intake:
    parts: list[Facts] = []
    pieces: list[Piece] = []
    raw: list[RawOutput] = []
    for item in inputs:
        if item.kind is not None and item.kind not in PARSERS:
            raise KeyError(f"unknown kind '{item.kind}' (known: {', '.join(sorted(PARSERS))})")
        lines = clean_lines(item.text)
        if item.kind is not None:
            jobs = [Job(item.kind, lines, 0, len(lines), 0, None)]
            left: list[Piece] = []
        else:
            jobs, left = _recognise(item.source, lines)
        whole = item.kind is not None or (len(jobs) == 1 and not left and jobs[0].command is None)
        for job in jobs:
            piece, facts, text = _parse(item.source, job)
            piece.whole = whole
            pieces.append(piece)
            if facts is not None:
                parts.append(facts)
                raw.append(RawOutput(collector=piece.name, source=_label(piece), text=text))
        pieces.extend(left)
    facts = combine_facts(parts)
    tie_to_gpus(facts)
    order = {item.source: n for n, item in enumerate(inputs)}
    pieces.sort(key=lambda p: (order.get(p.source, 0), p.first))
    return Intake(facts=facts, pieces=pieces, raw=raw)


def _label(piece: Piece) -> str:
    return f"{piece.where} ({piece.command})" if piece.command else piece.where


@dataclass(frozen=True)
class Job:
    """Lines ``[a, b)`` of ``lines`` for one parser; ``offset`` maps them to the file."""

    parser: str
    lines: list[str]
    a: int
    b: int
    offset: int
    command: str | None


def _recognise(source: str, lines: list[str]) -> tuple[list[Job], list[Piece]]:
    """Blocks at prompts, segments inside blocks; unrecognised ranges become pieces."""
    jobs: list[Job] = []
    left: list[Piece] = []
    for block in split_blocks(lines):
        original = lines[block.first : block.end]
        view, _ = strip_grep_prefixes(original)
        hint = kind_for_command(block.command)
        found = recognise(view, 0, len(view), hint)
        for seg in found.segments:
            use = original if keeps_grep_prefix(seg.parser) else view
            jobs.append(Job(seg.parser, use, seg.first, seg.end, block.first, block.command))
        for a, b in found.unrecognised:
            first_line = view[a].strip()
            shown = first_line if len(first_line) <= 60 else first_line[:57] + "..."
            left.append(
                Piece(
                    source=source,
                    first=block.first + a + 1,
                    last=block.first + b,
                    parser=None,
                    state=UNRECOGNISED,
                    command=block.command,
                    message=f"no known output format (starts {shown!r}); "
                    "if it is one, name it: --from-text KIND:FILE",
                )
            )
    return jobs, left


def _parse(source: str, job: Job) -> tuple[Piece, Facts | None, str]:
    text = "\n".join(job.lines[job.a : job.b])
    shift = job.offset + job.a  # parser line 1 is file line shift + 1
    piece = Piece(
        source=source,
        first=shift + 1,
        last=max(shift + 1, job.offset + job.b),
        parser=job.parser,
        state=PARSED,
        command=job.command,
    )
    start = time.monotonic()
    try:
        facts = get_parser(job.parser)(text, _label(piece))
    except ParseError as exc:
        piece.duration_s = time.monotonic() - start
        piece.state = FAILED
        line = f":{exc.line + shift}" if exc.line is not None else ""
        piece.message = f"{source}{line}: {exc.message}"
        return piece, None, text
    piece.duration_s = time.monotonic() - start
    _shift_lines(facts, shift)
    piece.produced = [k for k, info in kinds().items() if getattr(facts, info.attr)]
    piece.kinds = _observed(job.parser, piece.produced, text)
    if not piece.kinds:
        piece.state = EMPTY
        piece.message = f"the {job.parser} parser found nothing to report in these lines"
        return piece, None, text
    return piece, facts, text


LOGS_OF_ONE_KIND = frozenset({"fabricmanager-log"})


def _observed(parser: str, produced: list[str], text: str) -> list[str]:
    """Kinds the read proves, including empty ones: a kernel log with no Xid shows
    there were none; an nvidia-smi Processes table with no rows shows no processes."""
    out = set(produced)
    # The Fabric Manager log repeats NVSwitch errors: it proves nothing of Xids or AER.
    if parser == "kernel-log" or (
        parser not in LOGS_OF_ONE_KIND and any(kinds()[k].event for k in produced)
    ):
        out |= {k for k, info in kinds().items() if info.event}
    if parser == "nvidia-smi" and "Processes" in text:
        out.add("process")
    return sorted(out)


def _shift_lines(facts: Facts, offset: int) -> None:
    """Line numbers parsers give are within the segment; make them the file's."""
    if not offset:
        return
    for _name, info in kinds().items():
        if info.singleton:
            continue
        for ev in getattr(facts, info.attr):  # events, error texts: whatever has a line
            if getattr(ev, "line", None) is not None:
                ev.line += offset


def snapshot_from_texts(
    items: Sequence[TextInput | tuple[str, Path]], description: str = ""
) -> Snapshot:
    """A snapshot from saved outputs; ``(parser, path)`` pairs (the old form) still work."""
    inputs = [
        i
        if isinstance(i, TextInput)
        else TextInput(i[1].read_bytes().decode("utf-8", errors="replace"), str(i[1]), i[0])
        for i in items
    ]
    intake = intake_texts(inputs)
    return snapshot_from_intake(intake, description)


def snapshot_from_intake(intake: Intake, description: str = "") -> Snapshot:
    facts = intake.facts
    host = facts.host.hostname if facts.host and facts.host.hostname else ""
    return Snapshot(
        hostname=host or "",
        facts=facts,
        collectors=intake.statuses(),
        raw=intake.raw,
        description=description or "built from saved command output",
    )


def read_text_file(path: str, stdin_bytes: bytes | None = None) -> TextInput:
    """``FILE``, ``-`` (stdin) or ``KIND:FILE``; raises KeyError / OSError with the name."""
    kind: str | None = None
    if path != "-" and not Path(path).exists():
        head, sep, rest = path.partition(":")
        if sep and head in PARSERS:
            kind, path = head, rest
        elif sep and head and head.replace("-", "").isalnum() and "/" not in head:
            raise KeyError(
                f"unknown kind '{head}' in '{head}:{rest}' (known: {', '.join(sorted(PARSERS))})"
            )
    if path == "-":
        data = stdin_bytes if stdin_bytes is not None else b""
        return TextInput(data.decode("utf-8", errors="replace"), "<stdin>", kind)
    return TextInput(Path(path).read_bytes().decode("utf-8", errors="replace"), path, kind)


def from_text_arguments(groups: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The values of repeated ``--from-text`` options as ``[KIND:]FILE`` specs, and notes.

    ``--from-text PARSER FILE`` (the old form) is still read, with a note saying the
    new spelling."""
    specs: list[str] = []
    notes: list[str] = []
    for group in groups:
        i = 0
        while i < len(group):
            value = group[i]
            if value in PARSERS and not Path(value).exists() and i + 1 < len(group):
                specs.append(f"{value}:{group[i + 1]}")
                notes.append(
                    f"--from-text {value} {group[i + 1]} is the old form; "
                    f"write --from-text {value}:{group[i + 1]} (or leave the kind out)"
                )
                i += 2
                continue
            if (
                i + 1 < len(group)
                and not Path(value).exists()
                and re.fullmatch(r"[a-z][a-z0-9-]{0,63}", value)
                and Path(group[i + 1]).exists()
            ):  # the old form with a name that is no parser
                known = ", ".join(sorted(PARSERS))
                raise KeyError(f"unknown parser '{value}' (known: {known})")
            specs.append(value)
            i += 1
    return specs, notes
