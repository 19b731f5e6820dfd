"""The built wheel holds the whole product: the rulebook, its schema, the Xid catalogue,
the knowledge map and the demos, loaded through importlib.resources (no source tree)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contents_and_use_without_the_source_tree(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("gpu_triage-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "gpu_triage/rulebook/xid/catalog.yaml",
        "gpu_triage/rulebook/schema.json",
        "gpu_triage/data/knowledge_map.yaml",
        "gpu_triage/data/demo-incident.json",
        "gpu_triage/engine/durable_worker.py",
        "gpu_triage/tui/app.py",
        "gpu_triage/model/facts.py",
        "gpu_triage/io/commands.py",
        "gpu_triage/ops/session.py",
        "gpu_triage/cli/__init__.py",
    ):
        assert needed in names
    assert not [
        n for n in names if n.split("/")[0] in ("engine", "tui", "collectors", "rulebook", "tests")
    ]
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    # -S: no site hooks, so the editable install of the source tree is out of the way.
    # The dependencies' directories only (a venv with system site-packages has two).
    deps = [sysconfig.get_paths()["purelib"]]
    deps += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    code = (
        f"import sys; sys.path[:0] = [{str(target)!r}, *{deps!r}]; "
        "import gpu_triage; from gpu_triage.cli import main; "
        "assert gpu_triage.__file__.startswith(sys.path[0]), gpu_triage.__file__; "
        "raise SystemExit(main(['rules', 'coverage']))"
    )
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    # 0: every item faithful, 1: some partial; the data files (map, decisions, producers)
    # were found and read either way (a missing one would be a traceback, not a summary).
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert "knowledge-map items faithful" in r.stdout and "operational" in r.stdout
