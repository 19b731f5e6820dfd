"""The one YAML adapter: safe loading with the line and column of every key.

Rule files, the knowledge map and the files people supply (``--site``, ``--job``,
``--answers``) are all read here. Duplicate keys are refused (the first is what a reviewer
reads, the last what a plain loader keeps), and so are NaN and infinities (no threshold
compares true against them). Anchors and aliases are refused (they are how YAML
bombs work and they hide what a document says from its reviewer); nesting depth,
document count and node count are bounded. Every problem is a :class:`YamlError` with
the line and column it was found at.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_DEPTH = 64
MAX_NODES_PER_DOC = 20_000

# The C parser when PyYAML has it (about ten times faster on the packaged rulebook).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlError(ValueError):
    """A problem at ``line``:``col`` (1-based)."""

    def __init__(self, line: int, col: int, message: str) -> None:
        self.line, self.col, self.message = line, col, message
        super().__init__(message)


@dataclass
class Located:
    """A loaded document and where each of its keys sits in the file."""

    file: str
    line: int
    positions: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)

    def where(self, loc: tuple[Any, ...]) -> tuple[int, int]:
        # The deepest known prefix of a pydantic error location.
        for n in range(len(loc), -1, -1):
            if loc[:n] in self.positions:
                return self.positions[loc[:n]]
        return (self.line, 1)


@dataclass
class Document:
    """One YAML document; ``problem`` when it was refused (the next ones are still read)."""

    data: Any
    loc: Located
    problem: YamlError | None = None


def _check_depth(text: str) -> None:
    """Refuse nesting deeper than any document needs before composing: libyaml's composer
    recurses in C, and ``[[[[...`` a few thousand deep overflows the stack (a segfault,
    found by fuzzing). Events are produced iteratively, so this check cannot recurse."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.MarkedYAMLError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    event.start_mark,  # type: ignore[arg-type]  # the C parser's Mark
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Refused(ValueError):
    """A node the document is refused for, at ``line``:``col``."""

    def __init__(self, node: yaml.Node, message: str) -> None:
        self.line, self.col = node.start_mark.line + 1, node.start_mark.column + 1
        super().__init__(message)


_FLOAT_TAG = "tag:yaml.org,2002:float"


def _non_finite(node: yaml.ScalarNode) -> bool:
    """``.nan``, ``.inf`` and numbers too large for a float (``1.0e999``): each would
    read as a number no comparison holds for, silently stopping a rule."""
    if node.tag != _FLOAT_TAG:
        return False
    text = node.value.replace("_", "").lower()
    if text.lstrip("+-") in (".nan", ".inf"):
        return True
    try:
        return not math.isfinite(float(text))
    except ValueError:  # YAML 1.1 sexagesimal (1:30.5): finite
        return False


def _positions(
    node: yaml.Node,
    path: tuple[Any, ...],
    out: dict[tuple[Any, ...], tuple[int, int]],
    budget: list[int],
    seen: set[int],
) -> None:
    """Record where every key sits; refuse aliases (a node reached twice is an alias: that
    is how YAML bombs multiply), duplicate keys (a reviewer reads the first, the loader
    keeps the last), NaN and infinities, and bound the size of a document."""
    if id(node) in seen:
        raise _Refused(
            node, "anchors and aliases are not allowed in rule files (this value is reused)"
        )
    seen.add(id(node))
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("too many YAML nodes")
    out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.ScalarNode) and _non_finite(node):
        raise _Refused(
            node, f"'{node.value}' is not a finite number (NaN and infinities are refused)"
        )
    if isinstance(node, yaml.MappingNode):
        keys: dict[Any, int] = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark)
            if key in keys:
                raise _Refused(
                    k, f"duplicate key '{key}' (first at line {keys[key]}): the last would win"
                )
            keys[key] = k.start_mark.line + 1
            out[(*path, key)] = (k.start_mark.line + 1, k.start_mark.column + 1)
            _positions(v, (*path, key), out, budget, seen)
            # pydantic reports the value's location; keep the key's position for it too,
            # except for block scalars where the value position is more useful.
            out[(*path, key)] = (
                (v.start_mark.line + 1, v.start_mark.column + 1)
                if isinstance(v, yaml.ScalarNode)
                else (k.start_mark.line + 1, k.start_mark.column + 1)
            )
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _positions(v, (*path, i), out, budget, seen)


def documents(
    text: str, file: str, *, max_docs: int, max_nodes: int = MAX_NODES_PER_DOC
) -> Iterator[Document]:
    """Every non-empty document of ``text``, in order, with where its keys are.

    Raises :class:`YamlError` when the rest of the text cannot be read (bad YAML, more
    than ``max_docs`` documents); a document refused alone (an alias, too many nodes)
    comes back with ``problem`` set."""
    loader = None
    try:
        _check_depth(text)
        loader = _Loader(text)
        ndocs = 0
        while loader.check_node():
            ndocs += 1
            if ndocs > max_docs:
                raise YamlError(1, 1, f"more than {max_docs} documents in one file")
            node = loader.get_node()
            if node is None:
                continue
            loc = Located(file, node.start_mark.line + 1)
            try:
                _positions(node, (), loc.positions, [max_nodes], set())
            except _Refused as exc:
                yield Document(None, loc, YamlError(exc.line, exc.col, str(exc)))
                continue
            except ValueError:
                msg = f"document has more than {max_nodes} YAML nodes"
                yield Document(None, loc, YamlError(loc.line, 1, msg))
                continue
            data = loader.construct_document(node)
            if data is not None:
                yield Document(data, loc)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise YamlError(line, col, f"YAML: {exc.reason} (character {exc.character!r})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = exc.problem or exc.context or "invalid YAML"
        raise YamlError(line, col, f"YAML: {msg}") from None
    except yaml.YAMLError as exc:
        raise YamlError(1, 1, f"YAML: {exc}") from None
    except RecursionError:
        raise YamlError(1, 1, "YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_one(text: str, file: str) -> Any:
    """The single document of ``text`` (None when empty); YamlError on any problem."""
    docs = list(documents(text, file, max_docs=1))
    if not docs:
        return None
    if docs[0].problem is not None:
        raise docs[0].problem
    return docs[0].data
