"""``fact()`` builds its FieldInfo directly (Field() costs four times as much at every
start-up): it must be exactly what Field() would have made, so a pydantic upgrade that
changes either is caught here."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from gpu_triage.model.facts import fact


def _slots(info: FieldInfo) -> dict[str, Any]:
    names = {s for cls in type(info).__mro__ for s in getattr(cls, "__slots__", ())}
    out = {n: getattr(info, n, "<unset>") for n in sorted(names)}
    # the FieldInfo it was made from (pydantic keeps it): compared by its contents
    return {n: _slots(v) if isinstance(v, FieldInfo) else v for n, v in out.items()}


@pytest.mark.parametrize("default", [None, 0, "", False])
def test_fact_is_the_field_that_field_would_make(default: Any) -> None:
    made = fact("W", "power drawn", default)
    expected = Field(default=default, description="power drawn", json_schema_extra={"unit": "W"})
    assert type(made) is type(expected)
    assert _slots(made) == _slots(expected)


def test_a_model_of_facts_is_the_model_of_fields() -> None:
    class ByFact(BaseModel):
        model_config = ConfigDict(extra="forbid")
        watts: float | None = fact("W", "power drawn")
        name: str = fact("", "its name", "")

    class ByField(BaseModel):
        model_config = ConfigDict(extra="forbid")
        watts: float | None = Field(
            default=None, description="power drawn", json_schema_extra={"unit": "W"}
        )
        name: str = Field(default="", description="its name", json_schema_extra={"unit": ""})

    for name in ("watts", "name"):
        assert _slots(ByFact.model_fields[name]) == _slots(ByField.model_fields[name])
    schema = ByFact.model_json_schema()
    schema["title"] = "ByField"
    assert schema == ByField.model_json_schema()
    assert ByFact(watts=3).model_dump() == ByField(watts=3).model_dump()
