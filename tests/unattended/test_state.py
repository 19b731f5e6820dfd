"""The unattended state file: invalid ones are moved aside and reported once, the run goes
on and writes its findings; valid ones are held to their bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_triage.engine.findings import EngineInfo, FindingsDocument, RulebookInfo, Summary
from gpu_triage.ops import state as S
from gpu_triage.ops.history import History
from tests.conftest import SNAPSHOTS

NOW = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)

SEEN_OK = {
    "rule_id": "r",
    "title": "t",
    "severity": "warning",
    "subject_key": "gpu:0000:01:00.0",
    "first_seen": "2026-12-01T19:00:00+00:00",
    "last_seen": "2026-12-01T19:55:00+00:00",
}

# The shapes of the issue, and more: each crashed `History.load` or a later step before.
MALFORMED: dict[str, bytes] = {
    "seen-is-a-list": b'{"seen": []}',
    "top-is-a-list": b"[]",
    "null": b"null",
    "bad-ledger-key": b'{"xids": {"entries": {"0000:01:00.0|abc": {"before": 1}}}}',
    "huge-float": b'{"xids": {"resets": 1e400}}',
    "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep-object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "empty": b"",
    "truncated": b'{"seen": {"r|s": {"rule_id": "r", "tit',
    "not-utf8": b'{"seen": "\xff\xfe"}',
    "seen-entry-missing-fields": b'{"seen": {"r|s": {"rule_id": "r"}}}',
    "bad-severity": json.dumps({"seen": {"r|s": {**SEEN_OK, "severity": "fatal"}}}).encode(),
    "bad-time": json.dumps({"seen": {"r|s": {**SEEN_OK, "first_seen": "yesterday"}}}).encode(),
    "negative-count": b'{"xids": {"entries": {"0000:01:00.0|79": {"before": -3}}}}',
    "count-as-string": b'{"xids": {"resets": "7"}}',
    "since-not-a-list": b'{"xids": {"entries": {"0000:01:00.0|79": {"since": 5}}}}',
    "too-many-events": json.dumps(
        {"xids": {"entries": {"0000:01:00.0|79": {"since": [str(i) for i in range(501)]}}}}
    ).encode(),
    "unknown-key": b'{"seen": {}, "surprise": 1}',
    "future-version": b'{"version": 2}',
    "huge-int": b'{"xids": {"resets": ' + b"9" * 5000 + b"}}",
    "nan": b'{"xids": {"resets": NaN}}',
}


def test_at_least_sixteen_malformed_shapes() -> None:
    assert len(MALFORMED) >= 16


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_invalid_state_is_moved_aside_and_a_fresh_one_used(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(MALFORMED[name])
    h = History.load(path, NOW)
    assert h.seen == {} and h.xids.entries == {} and h.xids.resets == 0
    err = capsys.readouterr().err
    assert err.count("warning: invalid state file") == 1, err
    assert not path.exists()
    aside = list(tmp_path.glob("state.json.invalid-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == MALFORMED[name]
    assert "moved aside to state.json.invalid-20261201T200000" in h.xids.notice
    # a second load finds no state file: the notice is given once
    History.load(path, NOW)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", ["seen-is-a-list", "bad-ledger-key", "deep-nesting", "nan"])
def test_a_run_with_an_invalid_state_writes_its_findings(name: str, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    state = tmp_path / "state.json"
    state.write_bytes(MALFORMED[name])
    r = subprocess.run(
        [
            *(sys.executable, "-m", "gpu_triage", "run"),
            *("--snapshot", str(SNAPSHOTS / "xid79.json"), "--out", str(out)),
            *("--state", str(state)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr  # the snapshot's own verdict, unchanged
    assert r.stderr.count("warning: invalid state file") == 1
    doc = FindingsDocument.model_validate_json(out.read_text())
    assert doc.findings
    history = next(c for c in doc.collectors if c.name == "history")
    assert "moved aside" in history.error  # reported in the document too, once
    S.StateFile.model_validate_json(state.read_bytes())  # a fresh, valid state was saved


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(["seen", "xids", "entries", "resets", "boot", "r|s", "version"])
                | st.text(max_size=8),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_never_crashes_the_load(tmp_path: Path, data: object) -> None:
    path = tmp_path / "state.json"
    for p in tmp_path.glob("state.json*"):
        p.unlink()
    path.write_text(json.dumps(data))
    h = History.load(path, NOW)  # never raises
    assert isinstance(h.seen, dict)
    if path.exists():  # it was valid: it must save and load back the same
        h.save()
        again = History.load(path, NOW)
        assert again.seen.keys() == h.seen.keys()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=200))
def test_any_bytes_never_crash_the_load(tmp_path: Path, data: bytes) -> None:
    for p in tmp_path.glob("state.json*"):
        p.unlink()
    (tmp_path / "state.json").write_bytes(data)
    History.load(tmp_path / "state.json", NOW)


def test_an_oversized_state_is_moved_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(S, "MAX_STATE_BYTES", 1000)
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"seen": {}, "pad": "x" * 2000}))
    History.load(path, NOW)
    assert "larger than" in capsys.readouterr().err and not path.exists()


def test_stale_seen_entries_are_pruned_and_not_listed_as_cleared(tmp_path: Path) -> None:
    """300,000 stale entries once made a 94 MB findings document: entries older than
    SEEN_MAX_AGE are dropped at load, those older than CLEARED_KEEP are dropped without
    being listed, and at most MAX_CLEARED_PER_RUN are listed."""
    seen = {}
    for i in range(30_000):
        age = timedelta(days=30) if i % 3 == 0 else timedelta(days=3) if i % 3 == 1 else None
        last = NOW - (age or timedelta(minutes=5 + i % 500))
        seen[f"r{i}|s"] = {**SEEN_OK, "rule_id": f"r{i}", "last_seen": last.isoformat()}
        seen[f"r{i}|s"]["first_seen"] = (last - timedelta(hours=1)).isoformat()
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"seen": seen}))
    h = History.load(path, NOW)
    assert len(h.seen) == 20_000  # 30 days old: gone (> SEEN_MAX_AGE)
    doc = FindingsDocument(  # a run in which none of them fired
        engine=EngineInfo(name="reference", requested="reference"),
        rulebook=RulebookInfo(fingerprint="f", rules=0, sources=[]),
        summary=Summary(),
    )
    h.apply(doc, NOW)
    # 3 days old: dropped silently; 5 minutes old: listed, at most MAX_CLEARED_PER_RUN
    assert len(doc.cleared) == S.MAX_CLEARED_PER_RUN
    assert all(NOW - c.last_seen <= S.CLEARED_KEEP for c in doc.cleared)
    assert h.seen == {}
    h.save()
    assert path.stat().st_size < 1000


def test_seen_entries_are_capped_to_the_most_recent() -> None:
    seen = {
        f"r{i}|s": S.SeenEntry(
            rule_id=f"r{i}",
            title="t",
            severity="info",
            subject_key="s",
            first_seen=NOW,
            last_seen=NOW - timedelta(seconds=i),
        )
        for i in range(S.MAX_SEEN + 50)
    }
    state = S.prune(S.StateFile(seen=seen), NOW)
    assert len(state.seen) == S.MAX_SEEN and "r0|s" in state.seen
    assert f"r{S.MAX_SEEN + 49}|s" not in state.seen


def test_xid_ledger_keys_are_pruned_by_age_and_count() -> None:
    entries = {
        "0000:01:00.0|79": S.XidEntry(before=1, last=NOW - timedelta(days=40)),  # too old
        "0000:02:00.0|79": S.XidEntry(before=1, last=NOW - timedelta(days=2)),
        "0000:03:00.0|48": S.XidEntry(before=2),  # no time: kept
    }
    state = S.prune(S.StateFile(xids=S.XidLedgerState(entries=entries)), NOW)
    assert set(state.xids.entries) == {"0000:02:00.0|79", "0000:03:00.0|48"}
    many = {
        f"0000:{i // 64:02x}:{i % 32:02x}.{i % 8}|{i}": S.XidEntry(last=NOW - timedelta(minutes=i))
        for i in range(S.MAX_XID_KEYS + 10)
    }
    state = S.prune(S.StateFile(xids=S.XidLedgerState(entries=many)), NOW)
    assert len(state.xids.entries) == S.MAX_XID_KEYS


def test_a_valid_state_round_trips_and_old_files_still_read(tmp_path: Path) -> None:
    """A file written before the models (no version, naive times) still loads; the boot
    time spelt "Z" is the same boot as "+00:00" (no false reboot)."""
    path = tmp_path / "state.json"
    old = {
        "seen": {"r|gpu:0000:01:00.0": SEEN_OK},
        "xids": {
            "boot": "2026-12-01T10:00:00+00:00",
            "resets": 1,
            "reset_time": "2026-12-01T10:00:00+00:00",
            "entries": {
                "0000:01:00.0|79": {"before": 2, "since": ["55.5"], "last": "2026-12-01T11:00:00"}
            },
        },
    }
    path.write_text(json.dumps(old))
    h = History.load(path, NOW)
    assert list(h.seen) == ["r|gpu:0000:01:00.0"] and h.xids.resets == 1
    h.save()
    again = History.load(path, NOW)
    assert again.xids.entries == h.xids.entries and again.xids.boot == h.xids.boot
    assert list(tmp_path.glob("*.invalid-*")) == []
