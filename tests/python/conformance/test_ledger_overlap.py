"""The ledger conformance suite, part two: overlapping backfills (``create_backfill(...,
check_overlap=True)`` and ``overlaps``), on every backend of test_ledger.BACKENDS."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledger_cases import make_done, publication

from backfill.errors import NotFoundError
from backfill.run.ledger import (
    BackfillExistsError,
    BackfillState,
    LedgerBackend,
    OverlapError,
    open_ledger,
)
from backfill.run.ledger.overlap import find_overlaps

DAY = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def record(bid: str, project: str = "p", by: str = "ana", mode: str = "audit") -> dict[str, Any]:
    return {
        "id": bid,
        "project": project,
        "project_root": None,
        "selection": "m+",
        "exclude": None,
        "start": "2026-01-01",
        "end": "2026-02-01",
        "as_of": None,
        "reason": f"reason of {bid}",
        "mode": mode,
        "engine": "none",
        "plan": "{}",
        "models": "{}",
        "created_by": by,
    }


def days(first: int, last: int, model: str = "m") -> list[dict[str, Any]]:
    """Tasks of ``model`` for days first..last of January (1-based, inclusive)."""
    return [
        {
            "task_id": i,
            "model": model,
            "start": DAY + dt.timedelta(days=d - 1),
            "end": DAY + dt.timedelta(days=d),
            "label": f"2026-01-{d:02d}",
            "partitions": 1,
            "wave": 0,
            "depends_on": [],
        }
        for i, d in enumerate(range(first, last + 1))
    ]


def test_a_second_backfill_over_the_same_partitions_is_refused_naming_the_first(
    ledger: LedgerBackend,
) -> None:
    ledger.create_backfill(record("b1", by="ana"), days(1, 5), check_overlap=True)
    with pytest.raises(OverlapError) as err:
        ledger.create_backfill(record("b2", by="bo"), days(4, 9), check_overlap=True)
    text = str(err.value)
    assert "b1 (pending, by ana, 'reason of b1') writes m 2026-01-04..2026-01-05 (2 tasks)" in text
    assert "allow_overlap" in text
    (o,) = err.value.overlaps
    assert (o.backfill_id, o.model, o.first, o.last, o.tasks) == (
        "b1",
        "m",
        "2026-01-04",
        "2026-01-05",
        2,
    )
    with pytest.raises(NotFoundError):
        ledger.backfill("b2")  # nothing recorded
    assert ledger.overlaps("p", days(4, 9)) == err.value.overlaps


def test_other_periods_models_and_projects_do_not_overlap(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), days(1, 5), check_overlap=True)
    ledger.create_backfill(record("b2"), days(6, 9), check_overlap=True)  # adjacent, not over
    ledger.create_backfill(record("b3"), days(1, 9, model="n"), check_overlap=True)
    ledger.create_backfill(record("b4", project="q"), days(1, 9), check_overlap=True)
    assert [r["id"] for r in ledger.backfills()] == ["b4", "b3", "b2", "b1"]
    assert [o.backfill_id for o in ledger.overlaps("p", days(5, 6))] == ["b1", "b2"]


def test_only_open_backfills_count(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("pub"), days(1, 2))
    make_done(ledger, "pub")
    ledger.record_publication("pub", publication())
    ledger.create_backfill(record("gone"), days(1, 2))
    ledger.set_status("gone", BackfillState.DISCARDED, finished=True)
    ledger.create_backfill(record("stop"), days(1, 2))
    ledger.cancel("stop", "wrong period", "ana")
    ledger.create_backfill(record("direct", mode="direct"), days(1, 2))
    make_done(ledger, "direct")  # wrote the published tables: nothing left to publish
    assert ledger.overlaps("p", days(1, 2)) == []
    ledger.create_backfill(record("failed"), days(2, 2))
    ledger.set_status("failed", BackfillState.RUNNING)
    ledger.set_status("failed", BackfillState.FAILED)
    ledger.create_backfill(record("done"), days(1, 1))
    make_done(ledger, "done")  # audited or not, it may still publish
    assert [(o.backfill_id, o.status) for o in ledger.overlaps("p", days(1, 2))] == [
        ("done", "done"),
        ("failed", "failed"),
    ]


def test_a_whole_table_task_overlaps_every_task_of_its_model(ledger: LedgerBackend) -> None:
    whole = [{**days(1, 1, model="dim")[0], "start": None, "end": None, "label": "full"}]
    ledger.create_backfill(record("b1"), whole, check_overlap=True)
    with pytest.raises(OverlapError, match="writes dim full"):
        ledger.create_backfill(record("b2"), days(20, 20, model="dim"), check_overlap=True)
    ledger.create_backfill(record("b3"), days(20, 20, model="fct"), check_overlap=True)
    with pytest.raises(OverlapError, match=r"b3 .*writes fct 2026-01-20"):
        ledger.create_backfill(record("b4"), [{**whole[0], "model": "fct"}], check_overlap=True)


def test_the_same_id_again_is_a_duplicate_not_an_overlap(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), days(1, 3), check_overlap=True)
    with pytest.raises(BackfillExistsError):  # an orchestrator's retried create, say
        ledger.create_backfill(record("b1"), days(1, 3), check_overlap=True)


def test_without_the_check_an_overlap_is_recorded(ledger: LedgerBackend) -> None:
    ledger.create_backfill(record("b1"), days(1, 3), check_overlap=True)
    ledger.create_backfill(record("b2"), days(2, 3))  # allowed by the caller
    assert [o.backfill_id for o in ledger.overlaps("p", days(3, 3))] == ["b1", "b2"]


def _create_at_barrier(
    url: str, bid: str, project: str, barrier: threading.Barrier, outcome: dict[str, str]
) -> None:
    led = open_ledger(url)
    try:
        barrier.wait()
        led.create_backfill(record(bid, project=project), days(1, 20), check_overlap=True)
        outcome[bid] = "recorded"
    except OverlapError:
        outcome[bid] = "refused"
    finally:
        led.close()


def test_of_two_overlapping_creates_at_once_one_is_refused(url: str) -> None:
    """Check and write are one step: each round starts both creates together."""
    for round_ in range(4):
        barrier = threading.Barrier(2)
        outcome: dict[str, str] = {}
        threads = [
            threading.Thread(
                target=_create_at_barrier,
                args=(url, f"b{round_}_{i}", f"r{round_}", barrier, outcome),
            )
            for i in (1, 2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcome.values()) == ["recorded", "refused"], outcome


@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 5)), max_size=8),
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 5), st.sampled_from("ab")), max_size=12),
)
def test_find_overlaps_matches_pairwise_comparison(
    new: list[tuple[int, int]], other: list[tuple[int, int, str]]
) -> None:
    def at(d: int) -> dt.datetime:
        return DAY + dt.timedelta(days=d)

    mine = [{"model": "m", "start": at(s), "end": at(s + n)} for s, n in new]
    rows = [
        {
            "backfill_id": b,
            "created_by": "x",
            "status": "pending",
            "reason": "r",
            "model": "m",
            "start": at(s).isoformat(),
            "end": at(s + n).isoformat(),
            "label": f"{s:02d}",
        }
        for s, n, b in other
    ]
    expected: dict[str, int] = {}
    for s, n, b in other:
        if any(s < s2 + n2 and s2 < s + n for s2, n2 in new):
            expected[b] = expected.get(b, 0) + 1
    assert {o.backfill_id: o.tasks for o in find_overlaps(mine, rows)} == expected
