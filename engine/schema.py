"""JSON Schemas generated from the models: rule files and findings documents.

The committed copies (``rulebook/schema.json``, ``docs/findings.schema.json``) let
editors validate rules as people type; a test fails when they go stale.
"""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.engine.model import Overlay, Rule, XidCatalog


def rule_schema() -> dict[str, object]:
    schema = TypeAdapter(Rule | Overlay | XidCatalog).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpu-triage rule, overlay or Xid catalogue (one YAML document)"
    return schema


def rule_schema_text() -> str:
    return json.dumps(rule_schema(), indent=2, sort_keys=True) + "\n"


def findings_schema_text() -> str:
    schema = FindingsDocument.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
