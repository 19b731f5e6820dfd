"""Run every collector at once, each under its own deadline, and merge what they found.

Each collector runs in its own daemon thread, into its own fresh :class:`Facts`, with its
own copy of the context (so its raw outputs stay its own). The supervisor (this
function) decides each collector's status once: from the result the thread hands in,
or ``timed_out`` when its deadline passes first. A timed-out collector is abandoned: its
context is cancelled (the command it runs is killed at once, with everything it
started), and whatever it hands in later is discarded, never merged or counted as ok.
Total wall time is the window plus the largest budget, at most; ``cancel`` (a stopping
loop) ends it sooner.
"""

from __future__ import annotations

import dataclasses
import importlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gpu_triage.collectors.base import CollectContext, Collector, CollectorUnavailable
from gpu_triage.collectors.merge import merge_fields
from gpu_triage.collectors.nvml import NvmlCollector, normalize_bus_id
from gpu_triage.collectors.process_placement import place_processes
from gpu_triage.io.node_identity import local_identity
from gpu_triage.model.catalog import kinds as catalog_kinds
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import CollectorState, CollectorStatus, RawOutput, Snapshot

# Time a collector gets beyond the sampling window when neither the caller nor the
# collector (attribute ``budget_s``) says otherwise: one command timeout plus slack.
DEFAULT_BUDGET_S = 15.0
CANCEL_POLL_S = 0.05  # how often the supervisor looks at ``cancel``
ABANDON_JOIN_S = 1.0  # the longest wait for abandoned collectors to clean up
# collector name -> its abandoned thread that has not ended (one per collector at most)
_STUCK: dict[str, threading.Thread] = {}

# Kinds a collector that stops as unavailable may still deliver: the record of why.
FAILURE_EVIDENCE = ("driver", "error")

ProgressFn = Callable[[str, CollectorState | None], None]


def default_collectors() -> list[Collector]:
    """Every collector of a live node, in merge order (first non-None value wins)."""
    out: list[Collector] = [NvmlCollector()]
    # Imported here so this module works whichever collectors are installed.
    for module, names in (
        ("kernel_log", ("KernelLogCollector",)),
        ("host", ("HostCollector",)),
        ("fabric", ("FabricManagerCollector",)),
        ("scheduler", ("KubernetesCollector", "ContainerRuntimeCollector", "SlurmCollector")),
    ):
        for cls_name in names:
            try:
                mod = importlib.import_module(f"gpu_triage.collectors.{module}")
                out.append(getattr(mod, cls_name)())
            except (ImportError, AttributeError) as exc:
                out.append(_MissingCollector(_snake(cls_name.removesuffix("Collector")), exc))
    return out


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class _MissingCollector:
    """Stands in for a collector whose module cannot be imported: recorded as failed."""

    kinds: tuple[str, ...] = ()

    def __init__(self, name: str, exc: Exception) -> None:
        self.name = name
        self._exc = exc

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        raise RuntimeError(f"collector not installed: {type(self._exc).__name__}: {self._exc}")


@dataclasses.dataclass
class _Run:
    collector: Collector
    name: str
    ctx: CollectContext
    facts: Facts
    started: float
    deadline: float
    state: CollectorState | None = None  # written by the supervisor alone
    error: str = ""
    duration_s: float = 0.0
    raw: list[RawOutput] = dataclasses.field(default_factory=list)
    thread: threading.Thread | None = None
    abandoned: bool = False


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What a collector thread hands to the supervisor; it writes nothing shared."""

    run: _Run
    state: CollectorState
    error: str
    duration_s: float


def collect_snapshot(
    collectors: Sequence[Collector] | None = None,
    ctx: CollectContext | None = None,
    *,
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
    description: str = "",
    cancel: threading.Event | None = None,
) -> Snapshot:
    """Run ``collectors`` concurrently and return one merged :class:`Snapshot`.

    ``timeout_s`` is each collector's budget beyond ``ctx.window_s`` (default: the
    collector's ``budget_s`` attribute, else :data:`DEFAULT_BUDGET_S`). ``progress`` is
    called with ``(name, None)`` when a collector starts and ``(name, state)`` when it
    ends or times out, always from the calling thread.
    """
    collectors = list(default_collectors() if collectors is None else collectors)
    ctx = ctx or CollectContext()
    taken_at = datetime.now(UTC)
    done: queue.Queue[_Outcome] = queue.Queue()
    runs: list[_Run] = []
    for col in collectors:
        budget = timeout_s if timeout_s is not None else getattr(col, "budget_s", None)
        budget = DEFAULT_BUDGET_S if budget is None else float(budget)
        name = str(getattr(col, "name", type(col).__name__))
        now = time.monotonic()
        deadline = now + max(ctx.window_s, 0.0) + max(budget, 0.0)
        run = _Run(
            collector=col,
            name=name,
            # its own raw list (no interleaving), its own cancel event and deadline
            ctx=dataclasses.replace(
                ctx, raw=[], unanswered=[], cancel=threading.Event(), deadline=deadline
            ),
            facts=Facts(),
            started=now,
            deadline=deadline,
        )
        runs.append(run)
        stuck = _STUCK.get(name)
        if stuck is not None and stuck.is_alive():
            # Its thread from an earlier collection is still stuck (in C: NVML): do not
            # start another beside it, or a loop would gain a thread every run.
            run.state = CollectorState.TIMED_OUT
            run.error = "still stuck in an earlier collection; not started again"
            continue
        _STUCK.pop(name, None)
        if progress:
            progress(name, None)
        run.thread = threading.Thread(
            target=_run_one, args=(run, done), name=f"collector-{name}", daemon=True
        )
        run.thread.start()

    pending = {id(r): r for r in runs if r.state is None}
    while pending:
        now = time.monotonic()
        next_deadline = min(r.deadline for r in pending.values())
        wait = max(next_deadline - now, 0.0)
        if cancel is not None:
            wait = min(wait, CANCEL_POLL_S)
        try:
            outcome: _Outcome | None = done.get(timeout=wait)
        except queue.Empty:
            outcome = None
        if outcome is not None and id(outcome.run) in pending:
            r = outcome.run
            del pending[id(r)]
            r.state, r.error, r.duration_s = outcome.state, outcome.error, outcome.duration_s
            r.raw = list(r.ctx.raw)
            if progress:
                progress(r.name, r.state)
        # (an outcome of a run no longer pending came too late: it is dropped)
        now = time.monotonic()
        stopping = cancel is not None and cancel.is_set()
        for key, r in list(pending.items()):
            if stopping or now >= r.deadline:
                r.ctx.cancel.set()  # kill what it runs now; its thread is abandoned
                r.state = CollectorState.TIMED_OUT
                r.duration_s = now - r.started
                r.error = (
                    "stopped before it finished"
                    if stopping and now < r.deadline
                    else f"did not finish within {r.deadline - r.started:.1f}s"
                )
                r.raw = list(r.ctx.raw)  # what it had kept so far, as evidence
                r.abandoned = True
                del pending[key]
                if progress:
                    progress(r.name, r.state)

    # A cancelled collector's command dies at once: give a thread that was running one a
    # moment to finish killing what it started (bounded), so nothing outlives a stopping
    # process. One stuck elsewhere (in C: NVML) is left behind, and not started again.
    join_until = time.monotonic() + ABANDON_JOIN_S
    for r in runs:
        if r.abandoned and r.thread is not None:
            if r.ctx.in_command:
                r.thread.join(max(join_until - time.monotonic(), 0.0))
            if r.thread.is_alive():
                _STUCK[r.name] = r.thread

    facts = Facts()
    statuses: list[CollectorStatus] = []
    raw: list[RawOutput] = list(ctx.raw)
    for r in runs:
        produced: list[str] = []
        if r.state is CollectorState.OK:
            produced = _merge(facts, r.facts, tuple(getattr(r.collector, "kinds", ())))
        elif r.state in (CollectorState.UNAVAILABLE, CollectorState.FAILED):
            # How a collector failed can be evidence (NVML's init error names a broken
            # driver): keep those facts, nothing else it may have half filled.
            declared = tuple(getattr(r.collector, "kinds", ()))
            produced = _merge(facts, r.facts, tuple(k for k in FAILURE_EVIDENCE if k in declared))
        raw.extend(r.raw)  # as the supervisor decided it: nothing added late
        statuses.append(
            CollectorStatus(
                name=r.name,
                state=r.state or CollectorState.TIMED_OUT,
                duration_s=round(r.duration_s, 3),
                error=r.error,
                kinds=produced,
                truncated=any(o.truncated for o in r.raw) or None,
            )
        )
    tie_to_gpus(facts)
    # Where the GPU processes may run (their CPU/NUMA binding and cgroup quota): read
    # once the GPUs' NUMA nodes are known.
    place_processes(facts, ctx.root)
    hostname = (facts.host.hostname if facts.host else None) or socket.gethostname()
    ctx.raw[:] = raw
    identity = local_identity(ctx.root)
    return Snapshot(
        taken_at=taken_at,
        hostname=hostname,
        node_id=identity.node_id,
        boot_id=identity.boot_id,
        window_s=ctx.window_s,
        description=description,
        facts=facts,
        collectors=statuses,
        raw=raw,
    )


def _run_one(run: _Run, done: queue.Queue[_Outcome]) -> None:
    """The collector's thread: it hands its outcome in; the supervisor decides."""
    try:
        run.collector.collect(run.ctx, run.facts)
        state, error = CollectorState.OK, ""
    except CollectorUnavailable as exc:
        state, error = CollectorState.UNAVAILABLE, str(exc)
    except Exception as exc:  # noqa: BLE001 - one collector's crash must not end the rest
        state, error = CollectorState.FAILED, f"{type(exc).__name__}: {exc}"
    done.put(_Outcome(run, state, error, time.monotonic() - run.started))


def _merge(into: Facts, part: Facts, declared: tuple[str, ...]) -> list[str]:
    """Merge the declared kinds of ``part`` into ``into``; return the kinds it produced."""
    produced: list[str] = []
    catalog = catalog_kinds()
    for kind in declared:
        info = catalog.get(kind)
        if info is None:
            continue  # a kind the catalogue does not know: nothing rules could use
        value: Any = getattr(part, info.attr)
        if info.singleton:
            if value is None:
                continue
            produced.append(kind)
            current = getattr(into, info.attr)
            if current is None:
                setattr(into, info.attr, value)
            else:
                merge_fields(current, value)
        elif value:
            produced.append(kind)
            getattr(into, info.attr).extend(value)
    return produced


def _bus_key(text: str | None) -> str | None:
    return normalize_bus_id(text) if text else None


def tie_to_gpus(facts: Facts) -> None:
    """Set ``gpu_index`` on events, processes and links from the GPU with the same PCI id."""
    by_bus: dict[str, int] = {}
    for gpu in facts.gpus:
        key = _bus_key(gpu.pci_bus_id)
        if key is not None and gpu.index is not None:
            by_bus.setdefault(key, gpu.index)
    if not by_bus:
        return
    # The other way too: a pasted `nvidia-smi nvlink -s` names GPUs by index only; with
    # the GPU table beside it, the index gives the bus id (indexes must be unique).
    by_index: dict[int, str] = {}
    for gpu in facts.gpus:
        if gpu.index is not None and gpu.pci_bus_id:
            by_index[gpu.index] = gpu.pci_bus_id if gpu.index not in by_index else ""
    for info in catalog_kinds().values():
        if info.gpu_key is None or info.singleton:
            continue
        for item in getattr(facts, info.attr):
            if getattr(item, "gpu_index", None) is not None:
                if getattr(item, info.gpu_key, None) is None and by_index.get(item.gpu_index):
                    setattr(item, info.gpu_key, by_index[item.gpu_index])
                continue
            key = _bus_key(getattr(item, info.gpu_key, None))
            if key is not None and key in by_bus:
                item.gpu_index = by_bus[key]
