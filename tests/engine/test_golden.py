"""Golden files of compilation: for a few representative rules, the compiled intermediate
form (subject, what it reads, the expression tree) and the durable_rules ruleset it becomes.
A change in either shows as a readable diff of tests/engine/golden/RULE.json.

After an intended change, regenerate and review the diff:

    GPU_TRIAGE_REGEN_GOLDEN=1 python -m pytest tests/engine/test_golden.py
    git diff tests/engine/golden/
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpu_triage.engine import expr as E
from gpu_triage.engine.compiler import CompiledRule, Rulebook
from gpu_triage.engine.durable_backend import compile_ruleset

GOLDEN = Path(__file__).resolve().parent / "golden"
REGEN = os.environ.get("GPU_TRIAGE_REGEN_GOLDEN") == "1"

RULES = [
    "pcie-link-downgraded",  # one field against another
    "gpu-temperature-outlier",  # an aggregate over every GPU, arithmetic, a conclusion
    "scaling-worse-with-more-nodes",  # answers, availability, node-wide
    "pcie-aer-uncorrected-gpu",  # an event kind, a list literal
    "host-oom-kill",  # an event with an aggregate over its kind
]


def tree(e: Any) -> Any:
    """An expression tree as plain JSON: each node a dict named by its type (no columns)."""
    if isinstance(e, E.Node):
        out: dict[str, Any] = {"node": type(e).__name__}
        for f in dataclasses.fields(e):
            if f.name != "col":
                out[f.name] = tree(getattr(e, f.name))
        return out
    if isinstance(e, tuple | list):
        return [tree(x) for x in e]
    return e


def intermediate(r: CompiledRule) -> dict[str, Any]:
    return {
        "when": E.render(r.expr),
        "subject": list(r.iter_kinds),
        "join_gpu": r.join_gpu,
        "stratum": r.stratum,
        "used_kinds": sorted(r.used_kinds),
        "concl_deps": sorted(r.concl_deps),
        "reads": list(r.reads),
        "evidence": [x.path for x in r.evidence],
        "confirms": {str(i): E.render(c) for i, c in r.confirms.items()},
        "expr": tree(r.expr),
    }


def durable(book: Rulebook, r: CompiledRule) -> dict[str, Any]:
    alone = dataclasses.replace(book, rules=[r])
    ruleset, programs = compile_ruleset(alone)
    prog = programs[r.id]
    return {
        "columns": {name: E.render(e) for name, e in prog.group.columns.items()},
        "rules": {k: v for k, v in ruleset.items() if not k.startswith("__")},
    }


@pytest.mark.parametrize("rule_id", RULES)
def test_compiled_forms_match_golden(builtin_book: Rulebook, rule_id: str) -> None:
    r = builtin_book.by_id(rule_id)
    assert r is not None, f"{rule_id} is not in the builtin rulebook"
    text = json.dumps(
        {
            "rule": rule_id,
            "intermediate": intermediate(r),
            "durable_rules": durable(builtin_book, r),
        },
        indent=1,
        sort_keys=True,
    )
    path = GOLDEN / f"{rule_id}.json"
    if REGEN:
        path.write_text(text + "\n", encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with GPU_TRIAGE_REGEN_GOLDEN=1"
    assert path.read_text(encoding="utf-8") == text + "\n", (
        f"{rule_id} compiles differently: regenerate with GPU_TRIAGE_REGEN_GOLDEN=1 "
        "and review `git diff tests/engine/golden/`"
    )
