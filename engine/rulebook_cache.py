"""The compiled rulebook, cached: in memory for the process, on disk for cold starts.

The key is a hash of every rule file's name and text, the package version, the Python
version and the size and time of the compiler's and the models' source files: a changed
rule file, an upgrade, an edited checkout or another interpreter is a miss, never a
stale hit. Whatever goes wrong with the disk cache (missing, corrupt, truncated, owned
by someone else, unwritable, a symlink) is a miss and the rulebook is compiled as if
there were no cache; the cache never decides a result. Where it lives and whose files
it reads: :mod:`gpu_triage.io.private_cache`.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_triage import __version__
from gpu_triage.engine.loader import Source
from gpu_triage.io import private_cache
from gpu_triage.io.private_cache import ENV, cache_dir

__all__ = ["ENV", "cache_dir", "clear_memory", "get", "key_of", "put"]

FORMAT = b"gpu-triage rulebook cache 2\n"
KEEP = 8  # cache files kept in the directory (the newest)

# What is cached is the compiler's Rulebook; the compiler checks the type of a hit (this
# module does not import the compiler, which imports it).
_MEMORY: dict[str, object] = {}

# What a backend compiles from a rulebook (name -> how), kept in ``book.derived`` and so
# in the cache with it: a backend registers here when it is imported.
DERIVED: dict[str, Callable[[Any], Any]] = {}


def key_of(sources: list[Source], flags: tuple[Any, ...] = ()) -> str:
    h = hashlib.sha256()
    h.update(FORMAT)
    h.update(repr((__version__, sys.version, flags, _code_stamp())).encode())
    for s in sources:
        for part in (s.name, s.rulebook, s.text):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
    return h.hexdigest()[:40]


_STAMP: list[tuple[tuple[str, int, int], ...]] = []


def _code_stamp() -> tuple[tuple[str, int, int], ...]:
    """The compiler's and the models' source files: an edited checkout is a miss too."""
    if not _STAMP:
        import gpu_triage.model

        model_dir = Path(gpu_triage.model.__file__).parent
        _STAMP.append(private_cache.source_stamp([Path(__file__).parent, model_dir]))
    return _STAMP[0]


def get(key: str) -> object | None:
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    book = _read(key)
    if book is not None:
        _MEMORY[key] = book
    return book


def put(key: str, book: Any) -> None:
    _MEMORY[key] = book
    _write(key, book)


def clear_memory() -> None:
    _MEMORY.clear()


def _name(key: str) -> str:
    return f"rulebook-{key}.pickle"


def _read(key: str) -> object | None:
    payload = private_cache.read(_name(key), FORMAT, key)
    if payload is None:
        return None
    try:
        book: object = pickle.loads(payload)  # noqa: S301 - our own file, see private_cache
    except Exception:  # noqa: BLE001 - any failure to read back is a miss
        private_cache.drop(_name(key))
        return None
    return book


def _write(key: str, book: Any) -> None:
    # Computed once here so a cold start reads them from the cache too (and, for those
    # that read every rule's source, need not read back the sources: CompiledRule).
    _ = book.fingerprint, book.kind_fields, book.read_paths, book.overlays
    for name, make in DERIVED.items():
        if name not in book.derived:
            try:
                book.derived[name] = make(book)
            except Exception:  # noqa: BLE001, S112 - computed when first needed instead
                continue
    try:
        payload = pickle.dumps(book, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something unpicklable: no disk cache for it
        return
    private_cache.write(_name(key), FORMAT, key, payload, keep=("rulebook-", KEEP))
