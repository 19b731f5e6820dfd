"""Knowledge-map coverage: which rules encode each item of the knowledge map.

The map's IDs ship as data (``gpu_triage/data/knowledge_map.yaml``); every rule cites
the IDs it encodes in ``references:``. ``gpu-triage rules coverage`` lists every ID with
the rules (and their test counts) that cite it; an ID nobody cites is uncovered unless
the data file gives a reason it cannot be a node rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.io.yamlio import load_one

KNOWLEDGE_MAP = "knowledge_map.yaml"


@dataclass(frozen=True)
class KnowledgeItem:
    id: str
    title: str
    section: str = ""
    ask: bool = False
    fleet: bool = False

    @property
    def source(self) -> str:
        return self.id.partition("/")[0]


@dataclass(frozen=True)
class KnowledgeMap:
    items: tuple[KnowledgeItem, ...]
    uncovered: dict[str, str] = field(default_factory=dict)  # ID -> why no rule can encode it

    @property
    def ids(self) -> set[str]:
        return {i.id for i in self.items}


@cache
def load_knowledge_map() -> KnowledgeMap:
    text = (resources.files("gpu_triage") / "data" / KNOWLEDGE_MAP).read_text(encoding="utf-8")
    data: dict[str, Any] = load_one(text, KNOWLEDGE_MAP) or {}
    items = tuple(
        KnowledgeItem(
            id=str(d["id"]),
            title=str(d.get("title", "")),
            section=str(d.get("section", "")),
            ask=bool(d.get("ask", False)),
            fleet=bool(d.get("fleet", False)),
        )
        for d in data.get("items", [])
    )
    uncovered = {str(k): str(v) for k, v in (data.get("uncovered") or {}).items()}
    return KnowledgeMap(items, uncovered)


@dataclass
class ItemCoverage:
    item: KnowledgeItem
    rules: list[tuple[str, int]]  # (rule id, number of embedded tests)
    reason: str = ""  # why it is uncovered, from the data file

    @property
    def covered(self) -> bool:
        return any(tests > 0 for _, tests in self.rules)

    @property
    def accepted(self) -> bool:
        return self.covered or bool(self.reason)


@dataclass
class Coverage:
    items: list[ItemCoverage]
    unknown: dict[str, list[str]]  # reference not in the map -> rules citing it

    @property
    def ok(self) -> bool:
        return all(i.accepted for i in self.items)


def coverage(book: Rulebook, kmap: KnowledgeMap | None = None) -> Coverage:
    kmap = kmap or load_knowledge_map()
    cited: dict[str, list[tuple[str, int]]] = {}
    for r in book.rules:
        for ref in r.rule.references:
            if ref.startswith(("http://", "https://")):
                continue
            entry = (r.id, len(r.rule.tests))
            if entry not in cited.setdefault(ref, []):
                cited[ref].append(entry)
    items = [
        ItemCoverage(i, sorted(cited.get(i.id, [])), kmap.uncovered.get(i.id, ""))
        for i in kmap.items
    ]
    unknown = {
        ref: [rid for rid, _ in rules] for ref, rules in cited.items() if ref not in kmap.ids
    }
    return Coverage(items, dict(sorted(unknown.items())))


def coverage_json(cov: Coverage) -> dict[str, Any]:
    return {
        "ok": cov.ok,
        "items": [
            {
                "id": c.item.id,
                "title": c.item.title,
                "section": c.item.section,
                "ask": c.item.ask,
                "fleet": c.item.fleet,
                "covered": c.covered,
                "rules": [{"id": rid, "tests": n} for rid, n in c.rules],
                "uncovered_reason": c.reason or None,
            }
            for c in cov.items
        ],
        "summary": {
            "ids": len(cov.items),
            "covered": sum(c.covered for c in cov.items),
            "uncovered_with_reason": sum(not c.covered and bool(c.reason) for c in cov.items),
            "uncovered": sorted(c.item.id for c in cov.items if not c.accepted),
        },
        "unknown_references": cov.unknown,
    }


def coverage_text(cov: Coverage) -> str:
    lines: list[str] = []
    for c in cov.items:
        flags = "".join(f" ({f})" for f, on in (("ask", c.item.ask), ("fleet", c.item.fleet)) if on)
        if c.covered:
            rules = ", ".join(f"{rid} [{n} tests]" for rid, n in c.rules)
            lines.append(f"{c.item.id:<13} covered{flags}: {rules}")
        elif c.reason:
            lines.append(f"{c.item.id:<13} UNCOVERED (accepted){flags}: {c.reason}")
        else:
            untested = f" (cited only by untested rules: {', '.join(r for r, _ in c.rules)})"
            lines.append(f"{c.item.id:<13} UNCOVERED{flags}{untested if c.rules else ''}")
    for ref, citing in cov.unknown.items():
        lines.append(f"unknown reference {ref}: cited by {', '.join(citing)}")
    covered = sum(c.covered for c in cov.items)
    missing = [c.item.id for c in cov.items if not c.accepted]
    lines.append(
        f"{covered}/{len(cov.items)} knowledge-map IDs covered"
        + (f"; uncovered: {', '.join(missing)}" if missing else "")
    )
    return "\n".join(lines)


def coverage_command(book: Rulebook, fmt: str) -> int:
    """Print the coverage report; 0 when every ID is covered or has a stated reason."""
    cov = coverage(book)
    if fmt == "json":
        print(json.dumps(coverage_json(cov), indent=2))
    else:
        print(coverage_text(cov))
    return 0 if cov.ok else 1
