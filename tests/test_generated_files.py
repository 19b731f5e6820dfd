"""Committed generated files must match what the code generates now (CI fails when stale)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.engine.docs import rules_markdown
from gpu_triage.engine.schema import findings_schema_text, rule_schema_text
from gpu_triage.model.catalog import catalog_markdown

ROOT = Path(__file__).resolve().parents[1]
REFRESH = "python -m gpu_triage {}"


@pytest.mark.parametrize(
    ("path", "make", "how"),
    [
        (
            "rulebook/schema.json",
            lambda book: rule_schema_text(),
            "rules schema --out rulebook/schema.json",
        ),
        ("docs/rules.md", rules_markdown, "rules docs --out docs/rules.md"),
        (
            "docs/facts.md",
            lambda book: catalog_markdown(book.readers()) + "\n",
            "facts docs --out docs/facts.md",
        ),
        (
            "docs/findings.schema.json",
            lambda book: findings_schema_text(),
            "rules schema --kind findings --out docs/findings.schema.json",
        ),
    ],
)
def test_generated_file_is_fresh(builtin_book, path: str, make, how: str) -> None:
    committed = (ROOT / path).read_text()
    assert committed == make(builtin_book), (
        f"{path} is stale: regenerate with `{REFRESH.format(how)}`"
    )


def test_rule_schema_validates_the_builtin_rules() -> None:
    import json

    import jsonschema
    import yaml

    schema = json.loads((ROOT / "rulebook/schema.json").read_text())
    for f in sorted((ROOT / "rulebook").rglob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc is not None:
                jsonschema.validate(doc, schema)


def test_unattended_path_never_imports_textual(tmp_path: Path) -> None:
    out_file = tmp_path / "findings.json"
    code = (
        "import sys; from gpu_triage.cli import main; "
        f"rc = main(['run', '--demo', '--out', {str(out_file)!r}]); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
        "print(rc, bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2 []", out.stdout + out.stderr


def test_rulebook_loads_through_importlib_resources() -> None:
    from gpu_triage.engine.loader import builtin_texts

    names = [n for n, _ in builtin_texts()]
    assert "rulebook/hardware.yaml" in names and all(n.endswith(".yaml") for n in names)
