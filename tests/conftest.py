from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SNAPSHOTS = DATA / "snapshots"


@pytest.fixture(scope="session")
def builtin_book():
    from gpu_triage.engine.compiler import load_rulebook

    return load_rulebook()
