"""Fact models build their validators on first use (from the schema cache or by
pydantic), and pydantic's own first-use build is not thread-safe ("validate_assignment is
not supported" in all threads but one): collectors start in threads, so CachedModel
builds a model under a lock, cache or no cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Sixteen threads, released together, assign to a fact model no one has used yet; the
# child prints how many failed.
CHILD = """
import threading
from gpu_triage.model import facts as F
{prepare}
errors = []
ready = threading.Barrier(16)
def work():
    ready.wait()  # all at once: the first uses overlap
    try:
        link = F.NvlinkFacts(gpu_index=0, link=0)
        link.active = True
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors))
"""


def _failures(prepare: str, env: dict[str, str]) -> int:
    res = subprocess.run(
        [sys.executable, "-c", CHILD.format(prepare=prepare)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    return int(res.stdout.strip())


@pytest.mark.parametrize("cache", ["off", "on"])
def test_first_use_in_threads_is_safe(cache: str, tmp_path: Path) -> None:
    # timing-dependent: without the lock one of a few tries was enough to see it fail
    env = {**os.environ, "GPU_TRIAGE_CACHE_DIR": "off" if cache == "off" else str(tmp_path)}
    assert all(_failures("", env) == 0 for _ in range(5))


def test_collect_snapshot_uses_fact_models_from_its_threads() -> None:
    prepare = (
        "from gpu_triage.collectors.runner import collect_snapshot\n"
        "from gpu_triage.collectors.base import CollectContext\n"
        "collect_snapshot([], CollectContext(window_s=0))"
    )
    assert _failures(prepare, dict(os.environ)) == 0
