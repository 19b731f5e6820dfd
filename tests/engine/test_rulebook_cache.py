"""The compiled-rulebook cache: a hit equals a fresh compile; anything wrong with the
disk cache is a miss, never an error or a stale rulebook."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_triage.engine import rulebook_cache
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.loader import read_sources

RULE = """id: cache-probe
title: cache probe
version: {v}
severity: info
stage: FD1
symptom: s
cause: c
fix: f
when: gpu.utilization_gpu_pct < {t}
references: [guide/FD1]
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache" / "gpu-triage"
    monkeypatch.setenv(rulebook_cache.ENV, str(d))
    rulebook_cache.clear_memory()
    yield d
    rulebook_cache.clear_memory()


def _files(cache: Path) -> list[Path]:
    return sorted(cache.glob("rulebook-*.pickle")) if cache.exists() else []


def test_disk_hit_equals_a_fresh_compile(cache: Path) -> None:
    first = load_rulebook()
    assert len(_files(cache)) == 1
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    rulebook_cache.clear_memory()
    again = load_rulebook()
    assert again is not first  # read back from disk
    assert again.fingerprint == first.fingerprint
    assert [r.id for r in again.rules] == [r.id for r in first.rules]
    assert load_rulebook() is again  # then from memory


def test_a_rule_read_from_disk_reads_its_source_back_when_first_used(cache: Path) -> None:
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import load_snapshot

    first = load_rulebook()
    rulebook_cache.clear_memory()
    again = load_rulebook()

    def pending() -> int:
        return sum("rule" not in vars(r) for r in again.rules)

    assert pending() == len(again.rules)  # nothing read back yet
    snap = load_snapshot(demo_snapshot_path())
    doc = evaluate(snap, again, engine="reference")
    fresh = evaluate(snap, first, engine="reference")
    assert doc.findings == fresh.findings
    reported = {f.rule_id for f in doc.findings}
    assert 0 < pending() < len(again.rules) - len(reported)  # only some were read back
    for old, new in zip(first.rules, again.rules, strict=True):
        assert new.rule == old.rule  # every source reads back equal
        assert (new.group, new.concludes, new.tags) == (
            old.rule.group,
            old.rule.concludes,
            tuple(old.rule.tags),
        )
    assert pending() == 0
    assert again.read_paths == first.read_paths and again.overlays == first.overlays


def test_a_rule_not_yet_read_back_copies_and_reads_back_from_threads(cache: Path) -> None:
    """Copied or pickled before its source is read back, a rule keeps it; read back by
    several threads at once, each gets the rule and none fails."""
    import copy
    import pickle
    import threading

    first = load_rulebook()
    rulebook_cache.clear_memory()
    again = load_rulebook()
    a, b = again.rules[0], again.rules[1]
    assert "rule" not in vars(a) and "rule" not in vars(b)
    for clone in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert clone.rule == first.rules[0].rule
    assert "rule" not in vars(a)  # copying read back nothing

    seen: list[object] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def read() -> None:
        try:
            start.wait()
            seen.append(b.rule)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(seen) == 8
    assert all(r == first.rules[1].rule for r in seen)
    assert b.rule is b.rule  # one object kept from then on


def test_a_changed_rule_file_is_a_miss(cache: Path, tmp_path: Path) -> None:
    rule = tmp_path / "rules" / "probe.yaml"
    rule.parent.mkdir()
    rule.write_text(RULE.format(v=1, t=10))
    a = load_rulebook([rule.parent])
    rule.write_text(RULE.format(v=1, t=20))
    b = load_rulebook([rule.parent])
    assert a.fingerprint != b.fingerprint
    assert "20" in str(b.by_id("cache-probe").expr)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_corrupt_file_is_a_miss_and_is_replaced(cache: Path, damage: str) -> None:
    good = load_rulebook()
    (path,) = _files(cache)
    data = path.read_bytes()
    path.write_bytes(
        {
            "truncate": data[: len(data) // 2],
            "flip": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
            "garbage": b"\x80\x04junk" * 100,
            "empty": b"",
        }[damage]
    )
    rulebook_cache.clear_memory()
    again = load_rulebook()
    assert again.fingerprint == good.fingerprint
    assert path.read_bytes() == data  # rewritten


def test_a_symlinked_or_shared_directory_is_not_used(cache: Path, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    cache.parent.mkdir(parents=True)
    cache.symlink_to(real)
    load_rulebook()
    assert not list(real.iterdir())
    cache.unlink()
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)  # writable by others: a planted pickle would run as us
    rulebook_cache.clear_memory()
    load_rulebook()
    assert not _files(cache)


def test_a_file_writable_by_others_is_not_read(cache: Path) -> None:
    load_rulebook()
    (path,) = _files(cache)
    os.chmod(path, 0o666)
    rulebook_cache.clear_memory()
    sources, _ = read_sources([])
    assert rulebook_cache._read(rulebook_cache.key_of(sources)) is None


def test_unwritable_or_disabled_cache_still_loads(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(rulebook_cache.ENV, str(blocker / "gpu-triage"))
    assert load_rulebook().rules
    monkeypatch.setenv(rulebook_cache.ENV, "off")
    rulebook_cache.clear_memory()
    assert rulebook_cache.cache_dir() is None
    assert load_rulebook().rules


def test_fingerprint_is_computed_once(cache: Path) -> None:
    book = load_rulebook()
    assert book.fingerprint is book.fingerprint


def test_a_prespawned_durable_worker_is_taken_by_the_backend(builtin_book) -> None:
    from gpu_triage.engine import durable_worker
    from gpu_triage.engine.durable_backend import DurableBackend

    durable_worker.discard_spare()
    durable_worker.prespawn()
    (spare,) = durable_worker._SPARE
    backend = DurableBackend(builtin_book)
    try:
        backend._start()
        assert backend._proc is spare and not durable_worker._SPARE
    finally:
        backend.close()
    durable_worker.prespawn()
    (unused,) = durable_worker._SPARE
    durable_worker.discard_spare()
    assert unused.poll() is not None  # ended, not left behind


def test_the_durable_ruleset_is_cached_with_the_rulebook(cache: Path) -> None:
    from gpu_triage.engine import durable_backend

    first = load_rulebook()  # compiled now: its durable ruleset is compiled for the cache
    assert durable_backend.DERIVED in first.derived
    rulebook_cache.clear_memory()
    again = load_rulebook()
    assert again is not first and durable_backend.DERIVED in again.derived
    text, programs = durable_backend.compiled(again)
    fresh_text, fresh_programs = durable_backend._compile(again)
    assert text == fresh_text and programs.keys() == fresh_programs.keys()
    # the programs read back point at the rules of the rulebook read back
    assert all(p.rule is again.by_id(rule_id) for rule_id, p in programs.items())


def test_a_new_worker_preloads_the_ruleset_last_sent(cache: Path, builtin_book) -> None:
    from gpu_triage.engine import durable_worker
    from gpu_triage.engine.durable_backend import DurableBackend
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import load_snapshot

    def findings(engine: str, backend: DurableBackend | None = None) -> list[tuple[str, str]]:
        doc = evaluate(
            load_snapshot(demo_snapshot_path()),
            builtin_book,
            engine=engine,
            backend_factory=(lambda _book: backend) if backend else None,
        )
        assert doc.engine.name == engine and doc.engine.fallback_reason is None
        return [(f.rule_id, f.subject_key) for f in doc.findings + doc.needs_confirmation]

    durable_worker.discard_spare()
    seen = []
    for _ in range(2):
        backend = DurableBackend(builtin_book)
        try:
            backend._start()
            seen.append(backend.preloaded)
            # the preloaded (and warmed) ruleset decides as the one sent whole, and as
            # the reference evaluator does
            assert findings("durable", backend) == findings("reference")
        finally:
            backend.close()
    assert seen == [False, True]  # the first sent it whole, the second found it loaded
    (cache / durable_worker.LAST_NAME).write_bytes(b"garbage")  # a damaged one: sent whole
    backend = DurableBackend(builtin_book)
    try:
        backend._start()
        assert backend.preloaded is False and backend._request({"op": "ping"})["ok"]
    finally:
        backend.close()
