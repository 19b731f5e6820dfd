"""The one JSON adapter: input refused when a number is not finite, output always valid.

Input: Python's ``json`` reads ``NaN``, ``Infinity`` and ``1e999`` as floats no comparison
holds for, so a threshold or a fact silently stops a rule; :func:`loads` refuses them with
the line and column. :func:`first_non_finite` finds one in data already validated (pydantic
turns the *string* ``"nan"`` into a float too).

Output: :func:`dumps` replaces lone surrogates (a snapshot string can hold one: strict
UTF-8 cannot encode it and pydantic's serializer crashes), writes non-finite numbers as
``null``, and escapes C1 controls, U+2028/U+2029 and bidirectional overrides inside
strings (C0 controls are escaped by ``json`` itself), so the text is valid UTF-8 JSON that
a terminal shows inertly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Raw in json.dumps(ensure_ascii=False) output; only ever inside strings (the rest is ASCII).
_UNSAFE_IN_STRINGS = re.compile(r"[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A JSON string, or a token json reads as a non-finite float.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?\d+(?:\.\d+)?[eE][+-]?\d+)')


class NonFiniteNumber(ValueError):
    """``NaN``/``Infinity`` or an overflowing number in JSON input, at ``line``:``col``."""

    def __init__(self, line: int, col: int, token: str) -> None:
        self.line, self.col, self.token = line, col, token
        super().__init__(f"{line}:{col}: {token} is not a finite number (refused)")


class _Found(Exception):
    pass


def _refuse(_token: str) -> float:
    raise _Found


def _float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Found
    return value


def loads(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and numbers overflowing a float:
    :class:`NonFiniteNumber` says where; :class:`json.JSONDecodeError` as usual."""
    try:
        return json.loads(text, parse_constant=_refuse, parse_float=_float)
    except _Found:
        pass
    for m in _TOKENS.finditer(text):
        token = m.group(1)
        if token and (token[-1] in "yN" or not math.isfinite(float(token))):
            line = text.count("\n", 0, m.start(1)) + 1
            col = m.start(1) - (text.rfind("\n", 0, m.start(1)) + 1) + 1
            raise NonFiniteNumber(line, col, token)
    raise NonFiniteNumber(1, 1, "a number")  # not reached: the scan finds what json found


def first_non_finite(value: Any, path: str = "") -> str | None:
    """The dotted path of the first non-finite float in ``value`` (dicts, lists, pydantic
    models' dumps), or None."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return where or "value"
        elif isinstance(v, Mapping):
            stack.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif isinstance(v, list | tuple):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


def scrub(text: str) -> str:
    """Lone surrogates replaced by U+FFFD: the string is valid Unicode again."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def clean(value: Any) -> Any:
    """``value`` with strings scrubbed and non-finite floats as None (for JSON output)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {(scrub(k) if isinstance(k, str) else k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def dumps(
    value: Any,
    *,
    indent: int | None = None,
    compact: bool = False,
    sort_keys: bool = False,
    default: Any = None,
) -> str:
    """JSON text of ``value`` that always encodes and parses back (see the module doc)."""
    text = json.dumps(
        clean(value),
        ensure_ascii=False,
        allow_nan=False,
        indent=indent,
        separators=(",", ":") if compact else None,
        sort_keys=sort_keys,
        default=default,
    )
    return _UNSAFE_IN_STRINGS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dump_model(model: Any, *, indent: int | None = 2, **kw: Any) -> str:
    """A pydantic model as JSON by :func:`dumps` (its own serializer fails on a lone
    surrogate and writes NaN as null only where configured)."""
    return dumps(model.model_dump(mode="json", **kw), indent=indent)
