"""Aggregates from indexes equal aggregates item by item (value and missing facts), for
every shape of condition: gates, keys, filters, residual conditions, unknown values."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_triage.engine import expr as E
from gpu_triage.engine.compiler import compile_rulebook
from gpu_triage.engine.evaluate import binding_classes, read_fields
from gpu_triage.engine.inputs import EvalInput, bindings
from gpu_triage.engine.loader import RawRulebook, load_text
from gpu_triage.engine.reference import Conclusions, Evaluator
from gpu_triage.model.facts import Facts, GpuFacts, Unavailable, UnavailableReason, XidEvent

BUSES = [None, "0000:01:00.0", "0000:02:00.0"]
ITEM = [
    "code == 79",
    "code in [48, 63, 64]",
    "code != 79",
    "available(pci_bus_id)",
    "unavailable(pid)",
    "pid > 100",
]
OUTER = ["xid.code == 79", "available(xid.pci_bus_id)", "unavailable(xid.pid)", "xid.pid > 50"]
JOIN = [
    "pci_bus_id == xid.pci_bus_id",
    "xid.pci_bus_id == pci_bus_id",
    "code == xid.code",
    "code != xid.code",
    "pid < xid.pid",
    "(unavailable(xid.pci_bus_id) or pci_bus_id == xid.pci_bus_id)",
    "(code == 79 or pid == xid.pid)",
]


def where() -> st.SearchStrategy[str]:
    part = st.sampled_from(ITEM + OUTER + JOIN)
    return st.lists(part, min_size=0, max_size=4).map(lambda ps: " and ".join(ps))


def aggregate() -> st.SearchStrategy[str]:
    func = st.sampled_from(["count", "exists", "distinct pid", "max pid", "min pid", "sum pid"])
    return st.tuples(func, where()).map(_agg)


def _agg(t: tuple[str, str]) -> str:
    func, cond = t
    name, _, fld = func.partition(" ")
    args = ["xid"] + ([fld] if fld else []) + ([cond] if cond else [])
    return f"{name}({', '.join(args)})"


xids = st.lists(
    st.builds(
        XidEvent,
        code=st.one_of(st.none(), st.sampled_from([48, 63, 79])),
        pci_bus_id=st.sampled_from(BUSES),
        pid=st.one_of(st.none(), st.sampled_from([7, 99, 120])),
        line=st.integers(1, 50),
    ),
    max_size=12,
)


def _reason(x: XidEvent) -> XidEvent:
    # Reasons differ between items with equal values: the first item's must be reported.
    if x.pid is None:
        x.unavailable["pid"] = Unavailable(
            reason=UnavailableReason.NOT_SUPPORTED, detail=f"line {x.line}"
        )
    return x


def _book(agg: str):
    cond = agg if agg.startswith("exists(") else f"{agg} >= 0"
    text = (
        "id: gen-agg\ntitle: generated\nversion: 1\nseverity: info\nstage: FD1\n"
        f"symptom: s\ncause: c\nfix: f\nwhen: '{cond} or xid.code == 1'\n"
        "references: [guide/FD1]\n"
    )
    raw = RawRulebook()
    load_text(text, "generated.yaml", "generated", raw)
    book, diags = compile_rulebook(raw)
    return book, [d for d in raw.diagnostics + diags if d.level == "error"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(agg=aggregate(), items=xids, grouped=st.booleans())
def test_index_equals_scan(agg: str, items: list[XidEvent], grouped: bool) -> None:
    book, errors = _book(agg)
    assert not errors, (agg, errors)
    (rule,) = book.rules
    node = E.aggregates(rule.expr)[0]
    items = [_reason(x) for x in items]
    inp = EvalInput(Facts(gpus=[GpuFacts(index=0, pci_bus_id=BUSES[1])], xids=items))
    if grouped:
        inp.kind_fields = book.kind_fields
    concl = Conclusions()
    for b in bindings(inp, ("xid",), False):
        ev = Evaluator(inp, b, concl)
        fast, slow = ev.aggregate(node), ev.aggregate_by_scan(node)
        assert (fast.value, fast.missing) == (slow.value, slow.missing), (agg, b)


def test_bindings_with_equal_values_share_a_class() -> None:
    book, _ = _book("count(xid, pci_bus_id == xid.pci_bus_id)")
    same = [XidEvent(code=79, pci_bus_id=BUSES[1], line=i) for i in range(1, 6)]
    other = XidEvent(code=79, pci_bus_id=BUSES[2], line=9)
    inp = EvalInput(Facts(xids=[*same[:3], other, *same[3:]]))
    binds = bindings(inp, ("xid",), False)
    classes = binding_classes(binds, read_fields(book.rules))
    assert classes == [[0, 1, 2, 4, 5], [3]]
