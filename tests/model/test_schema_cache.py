"""The models' schema cache: a model built from it validates, serializes and refuses
exactly as one pydantic built; anything wrong with the cache is a miss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Reads every scenario snapshot, a few bad ones and the findings of one, and prints what
# the models made of them, with how many models came from the cache.
PROBE = r"""
import json, sys
from pathlib import Path
from pydantic import ValidationError
from gpu_triage.model import schema_cache
from gpu_triage.model.snapshot import Snapshot
from gpu_triage.model.facts import GpuFacts, NvlinkFacts
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
out = []
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    snap = Snapshot.model_validate_json(path.read_bytes())
    out.append(snap.model_dump_json())
bad = [
    {"gpus": [{"index": "zero"}]},
    {"gpus": [{"index": 0, "no_such_field": 1}]},
    {"host": {"hostname": 5}},
    {"gpus": [{"index": 0, "unavailable": {"x": {"reason": "nope"}}}]},
]
for facts in bad:
    try:
        Snapshot.model_validate({"facts": facts})
    except ValidationError as exc:
        out.append(json.dumps(exc.errors(include_url=False), default=str))
link = NvlinkFacts(gpu_index=0, link=1)
try:
    link.active = "maybe"
except ValidationError as exc:
    out.append(str(exc.error_count()))
out.append(GpuFacts(index=0, memory_used_mib=1, memory_total_mib=4).model_dump_json())
snap = Snapshot.model_validate_json(Path(sys.argv[2]).read_bytes())
doc = evaluate(snap, load_rulebook(), engine="reference")
doc.generated_at = snap.taken_at
doc.engine.duration_ms = 0
out.append(doc.model_dump_json())
print(json.dumps({"from_cache": len(schema_cache._from_cache), "out": out}))
"""

SCENARIOS = ROOT / "tests" / "scenarios"
STORM = SCENARIOS / "xid-storm-contained-ecc.json"


def _probe(cache: str) -> dict[str, object]:
    env = {**os.environ, "GPU_TRIAGE_CACHE_DIR": cache}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, str(SCENARIOS), str(STORM)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    result: dict[str, object] = json.loads(res.stdout)
    return result


def _files(d: Path) -> list[Path]:
    return sorted(d.glob("model-schemas-*.pickle"))


def test_a_model_from_the_cache_behaves_as_one_pydantic_built(tmp_path: Path) -> None:
    built = _probe("off")
    first = _probe(str(tmp_path))  # fills the cache
    assert len(_files(tmp_path)) == 1
    again = _probe(str(tmp_path))
    assert built["from_cache"] == first["from_cache"] == 0
    assert isinstance(again["from_cache"], int) and again["from_cache"] >= 8
    assert again["out"] == first["out"] == built["out"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_cache_is_a_miss_and_is_rewritten(tmp_path: Path, damage: str) -> None:
    expected = _probe(str(tmp_path))["out"]
    (path,) = _files(tmp_path)
    data = path.read_bytes()
    path.write_bytes(
        {
            "truncate": data[: len(data) // 2],
            "flip": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
            "garbage": b"\x80\x04junk" * 100,
        }[damage]
    )
    result = _probe(str(tmp_path))
    assert result["from_cache"] == 0 and result["out"] == expected
    assert _probe(str(tmp_path))["from_cache"] != 0  # rewritten by the miss


def test_a_cache_file_others_could_write_is_not_read(tmp_path: Path) -> None:
    _probe(str(tmp_path))
    (path,) = _files(tmp_path)
    os.chmod(path, 0o666)
    assert _probe(str(tmp_path))["from_cache"] == 0


def test_an_entry_whose_code_changed_is_a_miss(tmp_path: Path) -> None:
    import pickle

    from gpu_triage.io import private_cache
    from gpu_triage.model import schema_cache

    _probe(str(tmp_path))
    (path,) = _files(tmp_path)
    old = os.environ.get(private_cache.ENV)
    os.environ[private_cache.ENV] = str(tmp_path)
    try:
        payload = private_cache.read(path.name, schema_cache.FORMAT, schema_cache._key())
        assert payload is not None
        table = pickle.loads(payload)
        for name, blob in list(table.items()):
            dirs, stamp, schema = pickle.loads(blob)
            stale = tuple((n, size + 1, t) for n, size, t in stamp)  # as if edited
            table[name] = pickle.dumps((dirs, stale, schema))
        private_cache.write(
            path.name, schema_cache.FORMAT, schema_cache._key(), pickle.dumps(table), keep=None
        )
    finally:
        if old is None:
            os.environ.pop(private_cache.ENV)
        else:
            os.environ[private_cache.ENV] = old
    assert _probe(str(tmp_path))["from_cache"] == 0


def test_the_cached_schema_is_the_one_pydantic_builds() -> None:
    """In this process: every cached model's installed schema equals pydantic's own (less
    the JSON Schema hooks, which the cache leaves out)."""
    from gpu_triage.engine.findings import FindingsDocument
    from gpu_triage.model import schema_cache
    from gpu_triage.model.snapshot import Snapshot

    Snapshot.model_rebuild()
    FindingsDocument.model_rebuild()
    for cls in schema_cache._all_cached_classes():
        cls.model_rebuild()
    installed = {
        schema_cache._name(c): schema_cache._portable(c.__pydantic_core_schema__, set())
        for c in schema_cache._all_cached_classes()
        if c.__pydantic_complete__
    }
    schema_cache.disable("test")
    try:
        for cls in schema_cache._all_cached_classes():
            cls.model_rebuild()
        fresh = {
            schema_cache._name(c): schema_cache._portable(c.__pydantic_core_schema__, set())
            for c in schema_cache._all_cached_classes()
            if c.__pydantic_complete__
        }
    finally:
        schema_cache._disabled.clear()
    assert installed.keys() == fresh.keys() and len(fresh) >= 20
    for name, schema in fresh.items():
        assert _without_refs(installed[name]) == _without_refs(schema), name


def _without_refs(schema: object) -> object:
    """A schema with every definition inlined and the refs gone: pydantic's refs carry the
    id() of the class (another in each process), and whether a model is inlined or kept
    as a definition depends on what was built before it."""
    defs: dict[str, object] = {}

    def gather(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("ref"), str):
                defs[node["ref"]] = node
            for v in node.values():
                gather(v)
        elif isinstance(node, list):
            for v in node:
                gather(v)

    def inline(node: object, seen: tuple[str, ...]) -> object:
        if isinstance(node, dict):
            if node.get("type") == "definitions":
                return inline(node["schema"], seen)
            if node.get("type") == "definition-ref":
                ref = node["schema_ref"]
                return "<recursive>" if ref in seen else inline(defs[ref], (*seen, ref))
            return {k: inline(v, seen) for k, v in node.items() if k != "ref"}
        if isinstance(node, list):
            return [inline(v, seen) for v in node]
        return node

    gather(schema)
    return inline(schema, ())
