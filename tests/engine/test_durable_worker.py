"""The durable_rules worker runs every action of an evaluation in that evaluation, and says
so when it could not: a lost action must never read as a rule that did not fire."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

pytest.importorskip("durable")

from gpu_triage.engine.durable_worker import serve

ROW_RULES: dict[str, Any] = {
    "__mark__": {"all": [{"m": {"t": "__session__"}}], "run": "__mark__"},
    "r0": {"all": [{"m": {"$and": [{"t": "row"}, {"v": 1}]}}], "run": "r0"},
}


def _talk(ruleset: dict[str, Any], *batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = [json.dumps({"op": "load", "ruleset": ruleset})]
    lines += [json.dumps({"op": "eval", "rows": rows}) for rows in batches]
    out = io.StringIO()
    serve(io.StringIO("\n".join(lines) + "\n"), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _rows(n: int, g: int = 0) -> list[dict[str, Any]]:
    return [{"t": "row", "id": f"{g}-{b}", "g": g, "b": b, "v": b % 2} for b in range(n)]


def test_every_action_runs_in_its_evaluation_without_timer_threads() -> None:
    before = threading.active_count()
    sink = {"__sink__": {"all": [{"m": {"t": "row"}}], "run": "__sink__"}}
    replies = _talk({**ROW_RULES, **sink}, _rows(3000), _rows(10), [])
    assert [r["ok"] for r in replies] == [True, True, True, True]
    # hits of each evaluation, all of them, none carried into the next
    assert sorted(b for _, _, b in replies[1]["hits"]) == list(range(1, 3000, 2))
    assert sorted(b for _, _, b in replies[2]["hits"]) == [1, 3, 5, 7, 9]
    assert replies[3]["hits"] == []
    # durable_rules' Host would have started two re-arming timer threads
    assert threading.active_count() == before


def test_rows_whose_actions_did_not_run_are_an_error() -> None:
    # a catch-all that misses rows of group 1 stands for actions that did not run here
    partial = {
        "__sink__": {"all": [{"m": {"$and": [{"t": "row"}, {"g": 0}]}}], "run": "__sink__"},
        "other": {"all": [{"m": {"$and": [{"t": "row"}, {"g": 1}]}}], "run": "r0"},
    }
    (_, reply) = _talk({**ROW_RULES, **partial}, _rows(4) + _rows(3, g=1))
    assert reply["ok"] is False
    assert "4 of 7 rows" in reply["error"]
