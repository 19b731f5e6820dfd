"""The floors hold: the import-linter contracts in pyproject.toml pass (layers, Textual only
under tui/, durable_rules only in the worker, pynvml only in the NVML collector, no cycles).

lint-imports reads the package as installed, so the test first links the source folders
into that layout (tools/layout.py) in a temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_import_contracts_are_kept(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "layout.py"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-c", LINT, str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout and "BROKEN" not in r.stdout
