"""The models' validation schemas, cached on disk: a cold start does not rebuild them.

A pydantic model is turned into a core schema (plain data: dicts, lists, and references
to our classes and validator functions) and then into a validator and a serializer. The
first step runs in Python and costs more than anything else a one-shot ``gpu-triage
run`` does: about 80 ms for the snapshot, facts, findings and state models on a 2-core
machine. The second is a fraction of a millisecond. So the core schemas are pickled
once, and a later process builds its validators from them.

Models opt in by deriving from :class:`CachedModel` (which also defers their build to
first use). The cache is safe to lose and never decides a result:

* the file is keyed by the package, Python, pydantic and pydantic-core versions, and
  each entry carries the size and time of every source file in the directories of the
  modules its schema refers to (an edited checkout is a miss for what it touches);
* a schema that cannot be pickled is not cached; an entry that cannot be read back, or
  anything that fails while installing one, falls back to pydantic's own build;
* where the file lives and whose files are read: :mod:`gpu_triage.io.private_cache`.

What the cached schema leaves out is the JSON Schema hooks pydantic keeps beside the
validation schema (closures, which do not pickle). :meth:`CachedModel.model_json_schema`
therefore stops using the cache for the rest of the process and rebuilds from the
classes, so a generated JSON Schema is always pydantic's own.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict

from gpu_triage import __version__
from gpu_triage.io import private_cache

FORMAT = b"gpu-triage model schemas 1\n"
PREFIX = "model-schemas-"
KEEP = 2  # files of other versions kept (an upgrade and a downgrade)

_LOCK = threading.RLock()
_entries: dict[str, bytes] | None = None  # class name -> pickled (dirs, stamp, schema)
_from_cache: set[type[BaseModel]] = set()
_disabled: list[str] = []  # why the cache is off for this process, if it is
_stamps: dict[str, tuple[tuple[str, int, int], ...]] = {}
_first_miss: list[bool] = []
_batch: list[list[type[BaseModel]]] = []  # while the first miss builds the others


def _key() -> str:
    text = repr((__version__, sys.version, pydantic.VERSION, pydantic_core.__version__))
    return hashlib.sha256(FORMAT + text.encode()).hexdigest()[:40]


def _file() -> str:
    return f"{PREFIX}{_key()}.pickle"


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _dir_stamp(d: str) -> tuple[tuple[str, int, int], ...]:
    stamp = _stamps.get(d)
    if stamp is None:
        stamp = _stamps[d] = private_cache.source_stamp([Path(d)])
    return stamp


def _load() -> dict[str, bytes]:
    global _entries
    if _entries is None:
        _entries = {}
        payload = private_cache.read(_file(), FORMAT, _key())
        if payload is not None:
            try:
                table = pickle.loads(payload)  # noqa: S301 - our own file, see private_cache
            except Exception:  # noqa: BLE001 - unreadable: a miss, rewritten later
                table = None
            if isinstance(table, dict):
                _entries = {k: v for k, v in table.items() if isinstance(v, bytes)}
    return _entries


# --------------------------------------------------------------------------- reading


def install(cls: type[BaseModel]) -> bool:
    """Give ``cls`` its validator and serializer from the cached schema; False when
    there is no usable entry (the caller builds it as pydantic does)."""
    if _disabled or not cls.__pydantic_fields_complete__:
        return False
    blob = _load().get(_name(cls))
    if blob is None:
        return False
    try:
        dirs, stamp, schema = pickle.loads(blob)  # noqa: S301 - our own file
        if tuple(x for d in dirs for x in _dir_stamp(d)) != stamp:
            return False  # its code changed: rebuilt, and the entry rewritten
        _complete(cls, schema)
    except Exception:  # noqa: BLE001 - whatever fails, pydantic's own build takes over
        return False
    _from_cache.add(cls)
    return True


def _complete(cls: type[BaseModel], schema: Any) -> None:
    """What pydantic's ``complete_model_class`` does once it has a schema."""
    from pydantic._internal._config import ConfigWrapper
    from pydantic._internal._model_construction import set_deprecated_descriptors
    from pydantic._internal._signature import generate_pydantic_signature
    from pydantic._internal._utils import LazyClassAttribute

    config = ConfigWrapper(cls.model_config, check=False)
    core_config = config.core_config(title=cls.__name__)
    validator = _validator(cls, schema, core_config, config)
    serializer = pydantic_core.SchemaSerializer(schema, core_config)
    set_deprecated_descriptors(cls)
    cls.__pydantic_core_schema__ = schema
    cls.__pydantic_validator__ = validator
    cls.__pydantic_serializer__ = serializer
    cls.__signature__ = LazyClassAttribute(
        "__signature__",
        partial(
            generate_pydantic_signature,
            init=cls.__init__,
            fields=cls.__pydantic_fields__,
            validate_by_name=config.validate_by_name,
            extra=config.extra,
        ),
    )
    cls.__pydantic_complete__ = True
    cls.__pydantic_on_complete__()


def _validator(cls: type[BaseModel], schema: Any, core_config: Any, config: Any) -> Any:
    # With plugins disabled (the CLI disables them) pydantic would build exactly this;
    # asking its plugin loader first would import importlib.metadata (10 ms) for nothing.
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS", "").lower() in ("__all__", "1", "true"):
        return pydantic_core.SchemaValidator(schema, core_config)
    from pydantic.plugin._schema_validator import create_schema_validator

    return create_schema_validator(
        schema,
        cls,
        cls.__module__,
        cls.__qualname__,
        "BaseModel",
        core_config,
        config.plugin_settings,
    )


# --------------------------------------------------------------------------- writing


def learn(classes: list[type[BaseModel]]) -> None:
    """Cache the schemas pydantic just built for these classes, in one write."""
    entries = _load()
    changed = False
    for cls in classes:
        blob = _entry(cls)
        if blob is not None and entries.get(_name(cls)) != blob:
            entries[_name(cls)] = blob
            changed = True
    if changed:
        payload = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)
        private_cache.write(_file(), FORMAT, _key(), payload, keep=(PREFIX, KEEP))


def _entry(cls: type[BaseModel]) -> bytes | None:
    schema = cls.__dict__.get("__pydantic_core_schema__")
    if not isinstance(schema, dict):
        return None
    dirs: set[str] = set()
    try:
        clean = _portable(schema, dirs)
        _dir_of(cls, dirs)
        order = tuple(sorted(dirs))
        stamp = tuple(x for d in order for x in _dir_stamp(d))
        blob = pickle.dumps((order, stamp, clean), protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)  # noqa: S301 - what cannot be read back is not cached
    except Exception:  # noqa: BLE001 - a lambda, a closure ...: this class is not cached
        return None
    return blob


def _portable(node: Any, dirs: set[str]) -> Any:
    """A copy of a core schema without the JSON Schema hooks (closures), noting the
    directories of our modules it refers to."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if not mk.startswith("pydantic_js_")}
            out[k] = _portable(v, dirs)
        return out
    if isinstance(node, list):
        return [_portable(v, dirs) for v in node]
    if isinstance(node, tuple):
        return tuple(_portable(v, dirs) for v in node)
    if callable(node):
        _dir_of(node, dirs)
    return node


def _dir_of(obj: Any, dirs: set[str]) -> None:
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if path and module is not None and module.__name__.startswith("gpu_triage"):
        dirs.add(str(Path(path).parent))


# --------------------------------------------------------------------------- the base


def disable(why: str) -> None:
    """Stop using the cache in this process: every class installed from it goes back to
    pydantic's lazy build (a JSON Schema needs the hooks the cache leaves out)."""
    from pydantic._internal._mock_val_ser import set_model_mocks

    with _LOCK:
        if not _disabled:
            _disabled.append(why)
        # Every model, not only those read from the cache: one built since may hold a
        # cached schema of a model it contains.
        for cls in _all_cached_classes():
            if cls.__pydantic_complete__:
                cls.__pydantic_complete__ = False
                set_model_mocks(cls)
        _from_cache.clear()


def _all_cached_classes() -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [CachedModel]
    while todo:
        cls = todo.pop()
        sub = cls.__subclasses__()
        out.extend(sub)
        todo.extend(sub)
    return out


class CachedModel(BaseModel):
    """A model whose validation schema is cached on disk (see the module docstring)."""

    model_config = ConfigDict(defer_build=True)

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        with _LOCK:
            if cls.__pydantic_complete__ and not force:
                return None
            if not force and install(cls):
                return True
            depth = _parent_namespace_depth + 1 if _parent_namespace_depth > 0 else 0
            done = super().model_rebuild(
                force=force,
                raise_errors=raise_errors,
                _parent_namespace_depth=depth,
                _types_namespace=_types_namespace,
            )
            if done and not _disabled:
                _after_miss(cls)
            return done

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        disable("a JSON Schema was asked for")
        return super().model_json_schema(*args, **kwargs)


def _after_miss(cls: type[BaseModel]) -> None:
    """After a miss: the first one of a process builds every model imported so far and
    writes them all at once, so a cold cache is filled in one write, not one per model."""
    if _batch:
        _batch[0].append(cls)
        return
    if _first_miss:
        learn([cls])
        return
    _first_miss.append(True)
    _batch.append([cls])
    try:
        for other in _all_cached_classes():
            if not other.__pydantic_complete__:
                try:
                    other.model_rebuild(raise_errors=False)
                except Exception:  # noqa: BLE001, S112 - built later, when first used
                    continue
        built = _batch[0]
    finally:
        _batch.clear()
    learn(built)
