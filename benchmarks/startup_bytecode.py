"""The package's bytecode, compiled before a start-up is timed.

``pip install`` (the wheel, the container image in deploy/) writes every module's
``.pyc`` when it installs; an editable checkout gets them from its first run, unless
``PYTHONDONTWRITEBYTECODE`` is set, as it is on some build and CI machines. There every
start of gpu-triage compiles its ~150 modules from source again (about 50 ms on a
2-core machine), while Textual, pydantic and the standard library, installed as wheels,
load their ``.pyc``: a start-up benchmark would compare an uncompiled package with
compiled ones. So the start-up benchmarks compile the package first, as an install does.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
from pathlib import Path

# The package and its subpackages mapped outside it (pyproject's package-dir).
PACKAGES = (
    "gpu_triage",
    "gpu_triage.engine",
    "gpu_triage.collectors",
    "gpu_triage.tui",
    "gpu_triage.rulebook",
)


def package_dirs() -> list[Path]:
    """Where the modules of ``gpu_triage`` and of each subpackage mapped outside it
    (engine/, collectors/, tui/, rulebook/) are, as the import system finds them."""
    dirs: list[Path] = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            path = Path(location).resolve()
            if path not in dirs:
                dirs.append(path)
    return dirs


def compile_package() -> str:
    """Compile every module of the package (as ``pip install`` does); says what it did."""
    ok = all(compileall.compile_dir(str(d), quiet=1) for d in package_dirs())
    said = "package bytecode compiled first, as pip install does"
    if not ok:
        said += ", with errors"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        said += " (not written by Python here)"
    return said
