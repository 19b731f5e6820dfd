"""A durable_rules worker that segfaults inside durable_rules on its first evaluation.

It triggers the verified crash (``delete_state`` on a session in which no action ever
ran: durable-rules-notes §3.13), so the test exercises a real C-level crash, not a
simulated exit."""

from durable import engine

from gpu_triage.engine.durable_worker import serve


def _crash(self, ruleset, facts):  # type: ignore[no-untyped-def]
    self.update_state(ruleset, {"sid": "boom"})
    self.delete_state(ruleset, "boom")


engine.Host.assert_facts = _crash

if __name__ == "__main__":
    raise SystemExit(serve())
