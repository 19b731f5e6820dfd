"""`explain --format json` carries the same explanation as the text, with the tree."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", "explain", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def deciding_leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    if "operands" not in node:
        return [node]
    return [x for k in node["operands"] if k["deciding"] for x in deciding_leaves(k)]


def test_json_tree_names_the_same_deciding_clause_as_the_text() -> None:
    args = ("gpu-waiting-off-node", "--demo", "cm1-input-bound-storage")
    text = explain(*args)
    data = explain(*args, "--format", "json")
    assert text.returncode == data.returncode == 0
    doc = json.loads(data.stdout)
    assert doc["rule_id"] == "gpu-waiting-off-node" and doc["bindings"]
    b = doc["bindings"][0]
    assert b["outcome"] == "not fired"
    leaves = deciding_leaves(b["tree"])
    # The true `or` is not blamed: the deciding clause is the conclusion that holds.
    assert [leaf["clause"] for leaf in leaves] == ["not concl.input_bound"]
    assert leaves[0]["result"] is False
    assert f"decided by: {b['decided_by']}" in text.stdout
    ors = [k for k in b["tree"]["operands"] if k.get("op") == "or"]
    assert ors and ors[0]["result"] is True and ors[0]["deciding"] is False


def test_fired_binding_tree_in_json() -> None:
    data = explain("input-bound-pipeline", "--demo", "cm1-input-bound-storage", "--format", "json")
    doc = json.loads(data.stdout)
    fired = [b for b in doc["bindings"] if b["outcome"] == "fired"]
    assert len(fired) == 8
    tree = fired[0]["tree"]
    assert tree["op"] == "and" and tree["result"] is True
    assert all(k["deciding"] for k in tree["operands"])  # a true and: every operand decides
    assert "gpu.utilization_gpu_pct" in json.dumps(tree)


def test_unknown_demo_is_a_usage_error() -> None:
    r = explain("gpu-compute-bound", "--demo", "no-such-demo")
    assert r.returncode == 64 and "no demo 'no-such-demo'" in r.stderr
