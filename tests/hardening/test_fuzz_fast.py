"""A fast, seeded subset of benchmarks/fuzz.py in the suite: every target, a few hundred
mutated inputs each, no uncaught exception and no slow input."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fuzz", ROOT / "benchmarks" / "fuzz.py")
assert spec and spec.loader
fuzz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz)


@pytest.mark.parametrize("target", fuzz.targets())
def test_target_survives_mutated_inputs(target: str) -> None:
    count = 40 if target == "rule-yaml" else 250
    _name, tried, failures, slow, _secs, notes = fuzz.fuzz_target((target, count, 7))
    assert tried == count
    assert (failures, slow) == (0, 0), notes
