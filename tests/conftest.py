from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SNAPSHOTS = DATA / "snapshots"


@pytest.fixture(scope="session", autouse=True)
def _rulebook_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Tests never write the real cache (as root: /var/cache/gpu-triage); subprocesses
    inherit the variable."""
    import os

    old = os.environ.get("GPU_TRIAGE_CACHE_DIR")
    os.environ["GPU_TRIAGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache") / "gpu-triage")
    yield
    if old is None:
        os.environ.pop("GPU_TRIAGE_CACHE_DIR", None)
    else:
        os.environ["GPU_TRIAGE_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def builtin_book():
    from gpu_triage.engine.compiler import load_rulebook

    return load_rulebook()


@pytest.fixture
def collector():
    """The test process's garbage collector as it was, whatever the test held, froze or
    turned off (gpu_triage.io.startup_gc)."""
    import gc

    from gpu_triage.io import startup_gc

    was = gc.isenabled()
    yield
    startup_gc._held = False
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()
