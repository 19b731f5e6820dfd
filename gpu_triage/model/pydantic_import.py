"""Import pydantic without importing asyncio.

pydantic-core and pydantic mark some of their functions
``@typing_extensions.deprecated``, and on Python < 3.13 that decorator imports
``asyncio.coroutines`` to ask whether each function is a coroutine function: the whole
of asyncio (with ssl, socket, logging and concurrent.futures) is loaded, about 30 ms of
a 2-core machine's cold start, by a command that never runs an event loop.

While pydantic is imported (the modules that decorate functions so: pydantic-core's
schema builders, pydantic's config and JSON Schema modules, which its BaseModel
imports), and only then, ``asyncio`` and ``asyncio.coroutines`` are stand-ins that
answer that one question exactly as asyncio would for the functions it is asked about
(plain functions: not coroutine functions). They are removed right after, so a later
``import asyncio`` (Textual's, a library caller's) loads the real one. When asyncio or
pydantic-core is already loaded nothing is done. The CLI calls this
first thing (a library caller that imports pydantic itself pays for asyncio as usual).
"""

from __future__ import annotations

import sys
import types
from typing import Any


def _iscoroutinefunction(func: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(func) or getattr(func, "_is_coroutine", None) is _MARK


_MARK = object()


def import_pydantic() -> None:
    if "pydantic_core" in sys.modules or "asyncio" in sys.modules:
        return
    package = types.ModuleType("asyncio")
    coroutines = types.ModuleType("asyncio.coroutines")
    coroutines.iscoroutinefunction = _iscoroutinefunction  # type: ignore[attr-defined]
    coroutines._is_coroutine = _MARK  # type: ignore[attr-defined]
    package.coroutines = coroutines  # type: ignore[attr-defined]
    sys.modules["asyncio"] = package
    sys.modules["asyncio.coroutines"] = coroutines
    try:
        import pydantic.main  # noqa: F401 - the import is the point
    finally:
        for name, stand_in in (("asyncio.coroutines", coroutines), ("asyncio", package)):
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
