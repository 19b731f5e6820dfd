"""Build the installed import layout of the source tree as symlinks, for the static tools.

pyproject maps `gpu_triage.engine` to `engine/`, `gpu_triage.collectors` to `collectors/`
and so on; the editable install resolves that with an import hook, which mypy and
import-linter do not run. This makes DIR/gpu_triage/ with every subpackage linked where
it would be installed, so they see the package as Python does:

    python tools/layout.py build/layout   # then mypy / lint-imports with build/layout on the path
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(dest: Path) -> Path:
    """Make ``dest/gpu_triage``; returns ``dest``."""
    mapping: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]["package-dir"]
    top = dest / "gpu_triage"
    if top.exists() or top.is_symlink():
        shutil.rmtree(top) if top.is_dir() and not top.is_symlink() else top.unlink()
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["gpu_triage"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    # Subpackages mapped outside gpu_triage/ (engine/, collectors/, tui/, rulebook/); those
    # nested in a mapped parent are reached through its link.
    for name, src in sorted(mapping.items()):
        parts = name.split(".")
        if len(parts) != 2 or (ROOT / src).resolve().parent == (ROOT / mapping["gpu_triage"]):
            continue
        link = top / parts[1]
        if not link.exists():
            link.symlink_to(ROOT / src)
    return dest


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "layout")))
