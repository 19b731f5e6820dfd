from __future__ import annotations

import pytest

from gpu_triage.engine.expr import (
    Aggregate,
    Availability,
    BoolOp,
    Compare,
    ExprError,
    parse_expr,
    refs,
    render,
)


@pytest.mark.parametrize(
    "text",
    [
        "gpu.utilization_gpu_pct < params.low_util_pct and host.cpu_iowait_pct > 20",
        "count(xid, code == 79) >= 1",
        "count(xid, code in [48, 63, 64] and pci_bus_id == gpu.pci_bus_id) >= 2",
        "unavailable(gpu.power_draw_w) or gpu.power_draw_pct < 30",
        "distinct(xid, pci_bus_id, code == 13) > 1",
        "not (gpu.mig_mode or gpu.persistence_mode)",
        "gpu.power_draw_w >= gpu.power_limit_w * 0.95",
        "max(gpu, temperature_gpu_c) - min(gpu, temperature_gpu_c) > 15",
        "host.mem_available_pct < 5 and -1 < host.load_1m",
    ],
)
def test_round_trip(text: str) -> None:
    tree = parse_expr(text)
    assert parse_expr(render(tree)) == tree


def test_structure() -> None:
    tree = parse_expr(
        "count(xid, code == 79 and pci_bus_id == gpu.pci_bus_id) >= 1 or unavailable(gpu.index)"
    )
    assert isinstance(tree, BoolOp) and tree.op == "or"
    cmp, avail = tree.operands
    assert isinstance(cmp, Compare) and isinstance(cmp.left, Aggregate)
    assert cmp.left.kind == "xid" and cmp.left.func == "count"
    assert isinstance(avail, Availability) and not avail.negate
    # outer references inside the aggregate are the rule's, locals are the item's
    assert [r.path for r in refs(tree)] == ["gpu.pci_bus_id", "gpu.index"]


def test_chained_comparison_expands() -> None:
    tree = parse_expr("1 < gpu.temperature_gpu_c <= 90")
    assert isinstance(tree, BoolOp) and len(tree.operands) == 2


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("__import__('os').system('id')", "functions"),
        ("gpu.__class__", "not allowed"),
        ("gpu.__class__.__mro__", "deeper"),
        ("gpu.pci_bus_id.lower()", "functions"),
        ("[x for x in gpu]", "not part"),
        ("lambda: 1", "not part"),
        ("gpu.index[0]", "not part"),
        ("gpu.x if true else 1", "not part"),
        ("open('/etc/passwd')", "unknown function"),
        ("count(count(xid))", "kind first"),
        ("count(xid, count(xid) > 1)", "nested"),
        ("gpu.index ** 2 > 1", "not part"),
        ("utilization > 3", "kind.field"),
        ("gpu.index in gpu.name", "list of constants"),
        ("gpu.index == ", "syntax"),
        ("x" * 5000, "longer"),
        ("count(xid, code == 1, code == 2) > 0", "at most one"),
        ("gpu.temperature_gpu_c > 1e999", "NaN"),
        ("\uff47pu.index > 1", "non-ASCII"),
    ],
)
def test_rejected(text: str, needle: str) -> None:
    with pytest.raises(ExprError) as exc:
        parse_expr(text)
    assert needle in str(exc.value)


def test_error_column_points_into_expression() -> None:
    with pytest.raises(ExprError) as exc:
        parse_expr("gpu.index > 1 and gpu.__dict__")
    assert exc.value.col == 19


def test_deep_nesting_is_bounded() -> None:
    text = "not " * 60 + "gpu.mig_mode"
    with pytest.raises(ExprError):
        parse_expr(text)
    huge = " and ".join(f"gpu.index > {i}" for i in range(300))
    with pytest.raises(ExprError):
        parse_expr(huge)
