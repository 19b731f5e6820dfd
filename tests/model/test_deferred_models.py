"""The models are built on first use (``defer_build``, for cold starts): what is read
from them before that (the fact catalogue's types, which the compiler type-checks rules
against) must be what the built models say."""

from __future__ import annotations

import json
import subprocess
import sys

from gpu_triage.model.catalog import kinds

PROBE = (
    "import json; from pydantic import BaseModel; from gpu_triage.model import facts; "
    "from gpu_triage.model.catalog import kinds; "
    "built = [m for m in vars(facts).values() if isinstance(m, type) "
    "and issubclass(m, BaseModel) and m.__pydantic_complete__]; "
    "print(json.dumps({'built': len(built), 'types': {k + '.' + n: f.type "
    "for k, i in kinds().items() for n, f in i.fields.items()}}))"
)


def test_catalogue_read_before_any_model_is_built_matches_the_built_models() -> None:
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    fresh = json.loads(res.stdout)
    assert fresh["built"] <= 1  # pydantic's own BaseModel at most: nothing built at import
    built = {k + "." + n: f.type for k, i in kinds().items() for n, f in i.fields.items()}
    assert fresh["types"] == built
    # the computed fields, whose return annotations pydantic reads only when building
    assert fresh["types"]["topo.a_gpu_index"] == "integer"
    assert fresh["types"]["topo.b_is_nic"] == "boolean"
    assert fresh["types"]["gpu.memory_used_pct"] == "number"
