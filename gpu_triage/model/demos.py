"""The bundled demo incidents (snapshots shipped as package data), by name."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def demo_names() -> list[str]:
    demos = resources.files("gpu_triage") / "data" / "demos"
    extra = (
        sorted(p.name.removesuffix(".json") for p in demos.iterdir() if p.name.endswith(".json"))
        if demos.is_dir()
        else []
    )
    return ["incident", *extra]


def demo_snapshot_path(name: str = "incident") -> Path:
    """A bundled demo snapshot: the default incident, or one under data/demos/."""
    data = resources.files("gpu_triage") / "data"
    if name == "incident":
        return Path(str(data / "demo-incident.json"))
    if name not in demo_names():
        raise ValueError(f"no demo '{name}' (demos: {', '.join(demo_names())})")
    return Path(str(data / "demos" / f"{name}.json"))
