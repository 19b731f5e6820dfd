"""Reading rulebook YAML: every problem located as FILE:LINE:COL.

Each YAML document is one rule (it has ``id``), one overlay (it has ``overlay``)
or an Xid catalogue (it has ``xid_catalog``). Anchors and aliases are refused (they
are how YAML bombs work and they hide what a rule says from its reviewer); files and
documents are bounded.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gpu_triage.engine.model import Overlay, Rule, XidCatalog

if TYPE_CHECKING:
    from gpu_triage.io.yamlio import Located

MAX_FILE_BYTES = 1_000_000
MAX_DOCS_PER_FILE = 500
BUILTIN = "builtin"


@dataclass(frozen=True, order=True)
class Diagnostic:
    file: str
    line: int
    col: int
    message: str
    level: str = "error"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.level}: {self.message}"


class RulebookError(Exception):
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


@dataclass
class LoadedRule:
    rule: Rule
    loc: Located
    rulebook: str
    order: int


@dataclass
class LoadedOverlay:
    overlay: Overlay
    loc: Located
    rulebook: str


@dataclass
class LoadedCatalog:
    catalog: XidCatalog
    loc: Located
    rulebook: str


@dataclass
class RawRulebook:
    rules: list[LoadedRule] = field(default_factory=list)
    overlays: list[LoadedOverlay] = field(default_factory=list)
    catalogs: list[LoadedCatalog] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def load_text(text: str, file: str, rulebook: str, out: RawRulebook, order_start: int = 0) -> None:
    """Parse one file's text into rules and overlays, appending to ``out``."""
    # Imported here: a run whose compiled rulebook comes from the cache never parses YAML.
    from gpu_triage.io.yamlio import MAX_NODES_PER_DOC, YamlError, documents

    out.sources.append(file)
    order = order_start
    try:
        for doc in documents(text, file, max_docs=MAX_DOCS_PER_FILE, max_nodes=MAX_NODES_PER_DOC):
            if doc.problem is not None:
                out.diagnostics.append(
                    Diagnostic(file, doc.problem.line, doc.problem.col, doc.problem.message)
                )
                continue
            if not isinstance(doc.data, dict):
                out.diagnostics.append(
                    Diagnostic(
                        file, doc.loc.line, 1, "a document must be a mapping (a rule or an overlay)"
                    )
                )
                continue
            _add_document(doc.data, doc.loc, rulebook, out, order)
            order += 1
    except YamlError as exc:
        out.diagnostics.append(Diagnostic(file, exc.line, exc.col, exc.message))


def _add_document(
    data: dict[str, Any], loc: Located, rulebook: str, out: RawRulebook, order: int
) -> None:
    kind: type[Rule] | type[Overlay] | type[XidCatalog] = Rule
    if "id" not in data and "overlay" in data:
        kind = Overlay
    elif "id" not in data and "xid_catalog" in data:
        kind = XidCatalog
    try:
        model = kind.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            line, col = loc.where(tuple(err["loc"]))
            where = ".".join(str(x) for x in err["loc"]) or "document"
            out.diagnostics.append(Diagnostic(loc.file, line, col, f"{where}: {err['msg']}"))
        return
    if isinstance(model, Rule):
        out.rules.append(LoadedRule(model, loc, rulebook, order))
    elif isinstance(model, XidCatalog):
        out.catalogs.append(LoadedCatalog(model, loc, rulebook))
    else:
        out.overlays.append(LoadedOverlay(model, loc, rulebook))


def _check_trusted(path: Path, allow_untrusted: bool) -> str | None:
    """Running as root, refuse a rule file anybody but root could change: a rulebook is
    code in effect (see :func:`trust_problem`)."""
    if allow_untrusted or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    try:
        problem = trust_problem(path)
    except OSError as exc:
        problem = f"cannot check it: {exc.strerror or exc}"
    if problem is None:
        return None
    return (
        f"refusing {path}: writable by users other than root ({problem}; "
        "fix the owner/mode, or pass --allow-untrusted-rules)"
    )


def trust_problem(path: Path) -> str | None:
    """Why root must not trust the rule file ``path`` (None: it may). Nobody but root may
    be able to change what it says: the file is root's regular file, writable by root
    alone; its directory and every parent up to ``/`` are root's and not writable by
    group or others unless sticky (nobody can rename root's entries in a sticky
    directory); every symbolic link on the way is root's and is resolved and its target
    checked the same way."""
    todo = list(Path(os.path.abspath(path)).parts[1:])
    current = "/"
    problem = _dir_problem(current, os.lstat(current))
    hops = 0
    while todo and problem is None:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > 40:
                return f"{step}: too many symbolic links"
            if st.st_uid != 0:
                return f"{step}: a symbolic link owned by uid {st.st_uid}"
            target = Path(os.readlink(step))
            if target.is_absolute():
                current = "/"
                todo = list(target.parts[1:]) + todo
            else:
                todo = list(target.parts) + todo
            continue
        problem = _dir_problem(step, st) if todo else _file_problem(step, st)
        current = step
    return problem


def _dir_problem(where: str, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{where}: not a directory"
    if st.st_uid != 0:
        return f"directory {where} is owned by uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return f"directory {where} is writable by group or others (and not sticky)"
    return None


def _file_problem(where: str, st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return f"{where}: not a regular file"
    if st.st_uid != 0:
        return f"{where} is owned by uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{where} is writable by group or others"
    return None


def rule_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*")
        if p.suffix in (".yaml", ".yml") and p.is_file() and not p.name.startswith(".")
    )


@dataclass(frozen=True)
class Source:
    """One rule file's text, as read (its name locates diagnostics)."""

    name: str
    text: str
    rulebook: str


def read_sources(
    paths: list[Path], *, include_builtin: bool = True, allow_untrusted: bool = False
) -> tuple[list[Source], list[Diagnostic]]:
    """The texts of the packaged rulebook (unless told not to) and of each named file or
    directory, and what stopped a file from being read."""
    sources: list[Source] = []
    diagnostics: list[Diagnostic] = []
    if include_builtin:
        sources.extend(Source(name, text, BUILTIN) for name, text in builtin_texts())
    for base in paths:
        if not base.exists():
            diagnostics.append(Diagnostic(str(base), 1, 1, "no such file or directory"))
            continue
        book = base.stem if base.is_file() else base.name
        for p in rule_files(base):
            problem = _check_trusted(p, allow_untrusted)
            if problem:
                diagnostics.append(Diagnostic(str(p), 1, 1, problem))
                continue
            if p.stat().st_size > MAX_FILE_BYTES:
                diagnostics.append(
                    Diagnostic(str(p), 1, 1, f"file larger than {MAX_FILE_BYTES} bytes")
                )
                continue
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(Diagnostic(str(p), 1, 1, f"cannot read: {exc}"))
                continue
            sources.append(Source(str(p), text, book))
    return sources, diagnostics


def parse_sources(
    sources: list[Source], diagnostics: list[Diagnostic] | None = None
) -> RawRulebook:
    out = RawRulebook()
    out.diagnostics.extend(diagnostics or [])
    order = 0
    for src in sources:
        load_text(src.text, src.name, src.rulebook, out, order)
        order = len(out.rules) + len(out.overlays)
    return out


def load_paths(
    paths: list[Path], *, include_builtin: bool = True, allow_untrusted: bool = False
) -> RawRulebook:
    """Load the packaged rulebook (unless told not to) and then each named file or directory."""
    sources, diagnostics = read_sources(
        paths, include_builtin=include_builtin, allow_untrusted=allow_untrusted
    )
    return parse_sources(sources, diagnostics)


def builtin_texts() -> list[tuple[str, str]]:
    """The packaged rulebook's files, read through importlib.resources (works from a wheel)."""
    root = resources.files("gpu_triage.rulebook")
    found: list[tuple[str, str]] = []

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                if not child.name.startswith(("_", ".")):
                    walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith((".yaml", ".yml")) and not child.name.startswith("."):
                found.append((f"rulebook/{prefix}{child.name}", child.read_text(encoding="utf-8")))

    walk(root, "")
    return found
