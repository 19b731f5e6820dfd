"""The cyclic garbage collector held while a gpu-triage process starts.

A process allocates most of what it keeps for its whole life in its first half second:
the modules, pydantic's validators, the rulebook (some 30,000 objects). Python's collector
makes a full pass each time the long-lived objects grow by a quarter, and each pass walks
all of them: on a 2-core node that was a tenth of a second of the TUI's first paint, for
nothing, since none of it is garbage. So the process entry (``gpu_triage.cli.main``)
holds the collector, and a command settles it once its long-lived state is loaded: what
exists then is frozen (``gc.freeze``: never scanned again, still freed by reference
counting) and the collector runs as usual on everything allocated afterwards.

Only a process entry holds it: a library caller (a test calling ``main([...])``) never
has its collector touched. ``settle`` is idempotent, and the CLI settles before any
command that does not settle itself, so the collector is never left off.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Hold the collector until :func:`settle` (the process entry only)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def settle() -> None:
    """What the process holds now is kept for its life: freeze it and collect as usual
    from here on. Nothing unless :func:`hold` held the collector."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
