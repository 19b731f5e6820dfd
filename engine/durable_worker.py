"""The durable_rules worker process: the only module that imports ``durable``.

It runs as ``python -m gpu_triage.engine.durable_worker`` and speaks JSON lines on
stdin/stdout, so a segfault, a leak or a hang inside durable_rules' C code takes
down this process only. Requests::

    {"op": "load", "fingerprint": F}          -> {"ok": true, "preloaded": true}
                                                 or {"ok": false, "need": "ruleset"}
    {"op": "load", "fingerprint": F, "ruleset": {...}}  -> {"ok": true}
    {"op": "eval", "rows": [{...}, ...]}      -> {"ok": true, "hits": [[rule, g, b], ...]}

Each evaluation runs in a fresh session (sid) that is deleted afterwards: a
ruleset holds at most 1,024 live sessions, and a session left behind leaks. A
``__session__`` marker is asserted first in every session because ``delete_state``
segfaults on a session in which no action ever ran.

A worker starts loading the ruleset its parent last sent (kept in the private cache,
:mod:`gpu_triage.io.private_cache`, with the rulebook's fingerprint), and runs it once
through a throwaway session, before it reads its first request: ``gpu-triage run`` and
``tui`` start their worker as the CLI loads, so the ruleset is ready while the parent
imports, and the parent's load request names the fingerprint only. Another rulebook
is loaded when it is sent (the preloaded one stays in memory: durable_rules cannot
unload a ruleset; once per worker, bounded).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
from typing import Any

RULESET = "gpu_triage"

# The ruleset last sent to a worker: the next worker preloads it.
LAST_NAME = "durable-ruleset-last.json"
LAST_FORMAT = b"gpu-triage durable ruleset 1\n"
LAST_KEY = "last"


def remember_last(fingerprint: str, ruleset_text: str) -> None:
    """Keep the ruleset just sent for the next worker to preload (no error if it cannot)."""
    from gpu_triage.io import private_cache

    payload = f"{fingerprint}\n{ruleset_text}".encode()
    private_cache.write(LAST_NAME, LAST_FORMAT, LAST_KEY, payload, keep=None)


def _read_last() -> tuple[str, Any] | None:
    from gpu_triage.io import private_cache

    payload = private_cache.read(LAST_NAME, LAST_FORMAT, LAST_KEY)
    if payload is None:
        return None
    fingerprint, _, text = payload.decode("utf-8").partition("\n")
    return fingerprint, json.loads(text)


# ---------------------------------------------------------------- started by the parent


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "gpu_triage.engine.durable_worker"]


def spawn(argv: list[str] | None = None) -> subprocess.Popen[str]:
    """A worker process, waiting for its ruleset (it imports durable_rules meanwhile)."""
    # the cache's location too: the worker preloads the ruleset kept there
    keep = ("PATH", "PYTHONPATH", "HOME", "GPU_TRIAGE_CACHE_DIR", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return subprocess.Popen(
        argv or worker_argv(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        bufsize=1,
    )


_SPARE: list[subprocess.Popen[str]] = []


def prespawn() -> None:
    """Start a worker now, so that its interpreter start and durable_rules import run
    beside the parent's own start-up instead of after it (a cold ``gpu-triage run``).
    One that is never taken is ended at exit; it also ends by itself when its stdin
    closes."""
    if not _SPARE:
        try:
            _SPARE.append(spawn())
        except OSError:
            return
        atexit.register(discard_spare)


def take_spare() -> subprocess.Popen[str] | None:
    while _SPARE:
        proc = _SPARE.pop()
        if proc.poll() is None:
            return proc
    return None


def discard_spare() -> None:
    while _SPARE:
        proc = _SPARE.pop()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=5)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# ---------------------------------------------------------------- the worker itself


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
    sunk = [0]  # rows whose catch-all action ran, this evaluation

    def sink(c: Any) -> None:
        sunk[0] += 1

    class Host(engine.Host):  # type: ignore[misc]
        def _run(self) -> None:
            # No background dispatch: durable_rules' Host starts timer threads that run
            # pending actions every 0.2 s, and an action taken by one of them is missing
            # from this evaluation's hits (seen under load: a storm's findings lost) or
            # lands in the next one. Every action runs in the call that asserts its row.
            return None

        def get_action(self, name: str) -> Any:
            if name == "__mark__":
                return _noop
            if name == "__sink__":
                return sink

            # One-argument actions only: durable treats two-argument ones as async.
            def act(c: Any) -> None:
                hits.append([name, c.m.g, c.m.b])

            return act

    host: Any = None
    preloaded: tuple[str, Any] | None = None
    try:
        last = _read_last()
        if last is not None:
            ready = Host()
            ready.register_rulesets({RULESET: last[1]})
            _warm(ready)
            preloaded = last[0], ready
    except Exception:  # noqa: BLE001 - no preload: the parent sends the ruleset
        preloaded = None
    sid = 0
    for line in stdin:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "load":
                reply: dict[str, Any] = {"ok": True}
                if preloaded is not None and preloaded[0] == req.get("fingerprint"):
                    host = preloaded[1]
                    reply["preloaded"] = True
                elif "ruleset" not in req:
                    reply = {"ok": False, "need": "ruleset"}
                else:
                    host = Host()
                    host.register_rulesets({RULESET: req["ruleset"]})
            elif op == "eval":
                if host is None:
                    raise RuntimeError("no ruleset loaded")
                sid += 1
                name = f"s{sid}"
                hits.clear()
                sunk[0] = 0
                host.assert_fact(RULESET, {"sid": name, "t": "__session__"})
                rows = req["rows"]
                for row in rows:
                    row["sid"] = name
                if rows:
                    host.assert_facts(RULESET, rows)
                host.delete_state(RULESET, name)
                # Every row matches the catch-all rule once: fewer means actions did not
                # run here, and verdicts would be missing (the parent falls back).
                if sunk[0] != len(rows):
                    raise RuntimeError(
                        f"durable_rules ran the actions of {sunk[0]} of {len(rows)} rows"
                    )
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


def _warm(host: Any) -> None:
    """One throwaway evaluation of a preloaded ruleset, while the parent still imports:
    durable_rules builds much of a ruleset's matching state on its first session, a few
    milliseconds the first real evaluation would otherwise wait for. The row matches no
    rule (no group -1); its session is deleted as every session is."""
    host.assert_fact(RULESET, {"sid": "warm", "t": "__session__"})
    host.assert_facts(RULESET, [{"sid": "warm", "t": "row", "id": "warm", "g": -1, "b": 0}])
    host.delete_state(RULESET, "warm")


if __name__ == "__main__":
    raise SystemExit(serve())
