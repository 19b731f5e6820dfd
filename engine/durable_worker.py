"""The durable_rules worker process: the only module that imports ``durable``.

It runs as ``python -m gpu_triage.engine.durable_worker`` and speaks JSON lines on
stdin/stdout, so a segfault, a leak or a hang inside durable_rules' C code takes
down this process only. Requests::

    {"op": "load", "ruleset": {...}}          -> {"ok": true}
    {"op": "eval", "rows": [{...}, ...]}      -> {"ok": true, "hits": [[rule, g, b], ...]}

Each evaluation runs in a fresh session (sid) that is deleted afterwards: a
ruleset holds at most 1,024 live sessions, and a session left behind leaks. A
``__session__`` marker is asserted first in every session because ``delete_state``
segfaults on a session in which no action ever ran.
"""

from __future__ import annotations

import json
import sys
from typing import Any

RULESET = "gpu_triage"


def serve(stdin: Any = None, stdout: Any = None) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    try:
        from durable import engine
    except ImportError as exc:  # not installed (e.g. Python 3.13): say so and stop
        stdout.write(
            json.dumps({"ok": False, "error": f"durable_rules not importable: {exc}"}) + "\n"
        )
        stdout.flush()
        return 1

    hits: list[list[Any]] = []

    class Host(engine.Host):  # type: ignore[misc]
        def get_action(self, name: str) -> Any:
            if name in ("__mark__", "__sink__"):
                return _noop

            # One-argument actions only: durable treats two-argument ones as async.
            def act(c: Any) -> None:
                hits.append([name, c.m.g, c.m.b])

            return act

    host: Any = None
    sid = 0
    for line in stdin:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "load":
                host = Host()
                host.register_rulesets({RULESET: req["ruleset"]})
                reply: dict[str, Any] = {"ok": True}
            elif op == "eval":
                if host is None:
                    raise RuntimeError("no ruleset loaded")
                sid += 1
                name = f"s{sid}"
                hits.clear()
                host.assert_fact(RULESET, {"sid": name, "t": "__session__"})
                rows = req["rows"]
                for row in rows:
                    row["sid"] = name
                if rows:
                    host.assert_facts(RULESET, rows)
                host.delete_state(RULESET, name)
                reply = {"ok": True, "hits": list(hits)}
            elif op == "ping":
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
    return 0


def _noop(c: Any) -> None:
    return None


if __name__ == "__main__":
    raise SystemExit(serve())
