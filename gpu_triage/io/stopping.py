"""SIGTERM and SIGINT held from the first line of `main`, before anything slow.

An unattended loop must never die of a SIGTERM that arrives while it is still
importing or loading the rulebook (the default action kills with -15, mid-write).
:func:`hold` installs handlers that only record the signal in an event; a loop waits
on that event. A one-shot command :meth:`Held.release` s them once it knows it is not
a loop, and a signal that arrived meanwhile is delivered again with the default
action, as if nothing had held it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopFlag(threading.Event):
    """An Event that a signal handler may set. ``threading.Event.set`` takes a lock the
    interrupted main thread may be holding (inside ``wait``): a handler calling it can
    deadlock. This one sets a plain flag and writes a byte to a pipe; ``wait`` selects
    on the pipe. Safe to set from a handler and to wait on from any thread."""

    def __init__(self) -> None:
        super().__init__()
        self._flag = False
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        with contextlib.suppress(OSError):  # a full pipe is already readable
            os.write(self._w, b"x")

    def clear(self) -> None:
        raise NotImplementedError("a stop is final")

    def wait(self, timeout: float | None = None) -> bool:
        if not self._flag:
            select.select([self._r], [], [], timeout)
        return self._flag


class Held:
    def __init__(self) -> None:
        self.stop: threading.Event = StopFlag()
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signum
        self.stop.set()

    def install(self) -> Held:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                with contextlib.suppress(ValueError, OSError):
                    self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def release(self, *, redeliver: bool = True) -> None:
        """Give the signals back; deliver again one that came while they were held
        (not when a loop has already acted on it: ``redeliver=False``)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self.received is not None and redeliver:
            sig, self.received = self.received, None
            os.kill(os.getpid(), sig)


def hold() -> Held:
    return Held().install()
