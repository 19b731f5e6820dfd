"""Subject keys: which item(s) a finding is about, as a typed value.

A key is a ``str`` (``gpu:0000:18:00.0,xid:0000:18:00.0@12``, stable across runs: history,
dedup and fleet mode compare it), and it also carries its parts: each bound kind, the
item's identifier, and the PCI bus id of the GPU the item is or belongs to. Keys made by
the engine take their parts from the bound facts; a key read back from a findings
document is parsed once, here, so no consumer splits the string itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import FactModel

NODE = "node"  # the key of a rule about the whole node


class SubjectPart(NamedTuple):
    kind: str
    ident: str  # "-" when the kind was unavailable
    gpu: str | None = None  # PCI bus id of the GPU this item is or belongs to


def _ident(kind: str, item: FactModel) -> str:
    k = kinds().get(kind)
    get = item.__dict__.get
    fields = k.key_fields if k else ()
    ident = next((str(v) for v in (get(f) for f in fields) if v), "")
    if k is not None and k.event:
        ident = f"{ident}@{get('line') or get('time_text') or ''}"
    if k is not None and k.key_suffix:
        ident = f"{ident}/{get(k.key_suffix)}"
    return ident


def _parsed_gpu(kind: str, ident: str) -> str | None:
    """The GPU of a part read back from text: known when the identifier is its bus id."""
    k = kinds().get(kind)
    if k is None or ident == "-":
        return None
    gpu_field = "pci_bus_id" if kind == "gpu" else k.gpu_key
    if gpu_field is None or not k.key_fields or k.key_fields[0] != gpu_field:
        return None
    bus = ident.split("@")[0].split("/")[0]
    return bus or None


class SubjectKey(str):
    """A subject key: the string, with ``parts`` (see the module docstring)."""

    parts: tuple[SubjectPart, ...]

    def __new__(cls, text: str, parts: tuple[SubjectPart, ...] | None = None) -> SubjectKey:
        key = super().__new__(cls, text)
        key.parts = parts if parts is not None else cls._parse(text)
        return key

    @classmethod
    def of(cls, binding: Mapping[str, FactModel | None]) -> SubjectKey:
        """The key of a binding (kind -> bound item, None when unavailable)."""
        parts: list[SubjectPart] = []
        for kind, item in binding.items():
            if item is None:
                parts.append(SubjectPart(kind, "-"))
                continue
            k = kinds().get(kind)
            parts.append(SubjectPart(kind, _ident(kind, item), k.gpu_of(item) if k else None))
        text = ",".join(f"{p.kind}:{p.ident}" for p in parts) or NODE
        return cls(text, tuple(parts))

    @staticmethod
    def _parse(text: str) -> tuple[SubjectPart, ...]:
        if text in ("", NODE):
            return ()
        out: list[SubjectPart] = []
        for piece in text.split(","):
            kind, _, ident = piece.partition(":")
            out.append(SubjectPart(kind, ident, _parsed_gpu(kind, ident)))
        return tuple(out)

    @property
    def gpu(self) -> str | None:
        """The GPU the subject is about: the first part that is or belongs to a GPU."""
        return next((p.gpu for p in self.parts if p.gpu), None)

    def __reduce__(self) -> tuple[Any, ...]:  # pickling and deep copies keep the parts
        return (SubjectKey, (str(self), self.parts))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.to_string_ser_schema()
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string"}

    @classmethod
    def _validate(cls, value: Any) -> SubjectKey:
        if isinstance(value, SubjectKey):
            return value
        if isinstance(value, str):
            return cls(value)
        raise ValueError("a subject key is a string")
