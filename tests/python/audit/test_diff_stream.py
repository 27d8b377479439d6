"""DiffStream (pairs of parts fed one at a time) against the one-shot diff of the concatenated
parts: random tables (every value type, composite keys, duplicates, null keys, a partition
column whose value moves keys between pairs) cut into random pairs."""

from __future__ import annotations

import logging
import math
import pathlib
import sys
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backfill
from backfill.audit.diff import DiffResult, DiffStream, diff_pairs
from backfill.engines import PUBLISHED
from diff_oracles import same_float, table_pairs


def _norm(v: Any) -> Any:
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def _rows(t: Any) -> list[dict[str, Any]]:
    return [{k: _norm(v) for k, v in r.items()} for r in t.to_pylist()]


def assert_same(a: DiffResult, b: DiffResult) -> None:
    """Equal results; float sums (added pair by pair) up to rounding."""
    assert a.summary == b.summary
    assert _rows(a.schema) == _rows(b.schema)
    for ta, tb in ((a.columns, b.columns), (a.partitions, b.partitions)):
        ra, rb = ta.to_pylist(), tb.to_pylist()
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb, strict=True):
            assert x.keys() == y.keys()
            for k in x:
                if isinstance(x[k], float) or isinstance(y[k], float):
                    assert same_float(x[k], y[k]), (k, x, y)
                else:
                    assert x[k] == y[k], (k, x, y)
    for sa, sb in (
        (a.changed_sample, b.changed_sample),
        (a.added_sample, b.added_sample),
        (a.removed_sample, b.removed_sample),
    ):
        assert _rows(sa) == _rows(sb)


def with_days(t: pa.Table, days: list[int]) -> pa.Table:
    col = pa.array([19000 + d for d in days], pa.int32()).cast(pa.date32())
    return t.append_column("day", col)


def cut(t: pa.Table, points: list[int]) -> list[pa.Table]:
    c = sorted({0, t.num_rows, *(min(p, t.num_rows) for p in points)})
    parts = [t.slice(lo, hi - lo) for lo, hi in pairwise(c)] or [t.slice(0, 0)]
    return parts


@st.composite
def streamed_case(
    draw: Any,
) -> tuple[pa.Table, pa.Table, list[str], list[pa.Table], list[pa.Table]]:
    old, new, keys, _ = draw(table_pairs())
    old = with_days(
        old, draw(st.lists(st.integers(0, 2), min_size=old.num_rows, max_size=old.num_rows))
    )
    new = with_days(
        new, draw(st.lists(st.integers(0, 2), min_size=new.num_rows, max_size=new.num_rows))
    )
    pairs = draw(st.integers(1, 5))
    old_parts = cut(old, draw(st.lists(st.integers(0, 30), min_size=pairs - 1, max_size=pairs - 1)))
    new_parts = cut(new, draw(st.lists(st.integers(0, 30), min_size=pairs - 1, max_size=pairs - 1)))
    n = max(len(old_parts), len(new_parts))
    old_parts += [old.slice(0, 0)] * (n - len(old_parts))
    new_parts += [new.slice(0, 0)] * (n - len(new_parts))
    return old, new, keys, old_parts, new_parts


@settings(max_examples=150)
@given(streamed_case(), st.sampled_from([0, 3]), st.sampled_from([1, 2]))
def test_streamed_pairs_equal_the_one_shot_diff(case: Any, sample: int, threads: int) -> None:
    old, new, keys, old_parts, new_parts = case
    opts: dict[str, Any] = {
        "partition_by": "day",
        "sample": sample,
        "threads": threads,
        "on_duplicate": "report",
    }
    whole = backfill.diff(old, new, keys, **opts)
    streamed = diff_pairs(zip(old_parts, new_parts, strict=True), keys, **opts)
    if whole.summary.duplicate_keys:
        # A duplicate (in a pair or across pairs) hands back to the whole diff.
        assert streamed is None
        with pytest.raises(backfill.InvalidInputError, match="duplicate key"):
            backfill.diff(old, new, keys, partition_by="day")
        return
    assert streamed is not None
    assert_same(whole, streamed)


def test_a_key_moving_between_pairs_is_matched_at_the_end() -> None:
    old = pa.table(
        {
            "id": [1, 2, 3],
            "v": [1.0, 2.0, 3.0],
            "day": pa.array([19000, 19000, 19001], pa.int32()).cast(pa.date32()),
        }
    )
    new = pa.table(
        {
            "id": [2, 3, 1],
            "v": [2.0, 3.5, 1.0],
            "day": pa.array([19000, 19001, 19001], pa.int32()).cast(pa.date32()),
        }
    )
    s = DiffStream("id", partition_by="day")
    s.add(old.slice(0, 2), new.slice(0, 1))  # day 19000: id 1 leaves it
    s.add(old.slice(2), new.slice(1))  # day 19001: id 1 arrives
    assert s.carried == (1, 1)
    r = s.finish()
    assert r is not None
    assert (r.summary.matched, r.summary.changed, r.summary.added, r.summary.removed) == (
        3,
        2,
        0,
        0,
    )
    assert [(p["partition"], p["changed"]) for p in r.partitions.to_pylist()] == [
        ("2022-01-08", 1),
        ("2022-01-09", 2),
    ]
    assert_same(backfill.diff(old, new, "id", partition_by="day"), r)


def test_pairs_need_one_schema_and_at_least_one_pair() -> None:
    t = pa.table({"id": [1], "v": [1.0]})
    s = DiffStream("id")
    s.add(t, t)
    with pytest.raises(backfill.InvalidInputError, match="pair 2"):
        s.add(t, t.cast(pa.schema([("id", pa.int64()), ("v", pa.float32())])))
    with pytest.raises(backfill.InvalidInputError, match="no pair"):
        DiffStream("id").finish()


def test_quick_benchmark_stream_and_whole_agree() -> None:
    """benchmarks/diff_stream_bench.py --quick: every day of 8 differs; the streamed diff (one
    day per pair, keys moving between days) equals the whole diff (checked inside main), and
    each competitor reports its peak RSS. Timing and memory are not asserted (shared machine)."""
    bench = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"
    sys.path.insert(0, str(bench))
    import diff_stream_bench

    out = diff_stream_bench.main(["--quick"])
    assert out["days"] == 8
    assert all(m["peak_mb"] > 0 for m in out["medians"].values())


# -- the audit streams the differing partitions a group at a time ------------------------------
def _lines_project(root: pathlib.Path, as_of: Any) -> backfill.Project:
    """A day-partitioned model over raw.lines (4 days x 50 lines), built and published."""
    import duckdb

    (root / "models").mkdir()
    (root / "backfill.yml").write_text(
        "name: lines\nengine: {type: duckdb, path: w.duckdb}\nstate: .backfill\n"
        "sources:\n  raw:\n    lines: {grain: day, tz: UTC, event_time: ordered_at}\n"
        "models:\n  defaults: {grain: day, tz: UTC, begin: '2026-08-01', strategy: replace}\n"
        "  order_lines: {}\n"
    )
    (root / "models" / "order_lines.sql").write_text(
        '{{ config(event_time="ordered_at") }}\nselect line_id, line_no, qty, ordered_at from '
        '{{ source("raw", "lines") }}\nwhere ordered_at >= {{ start }} and ordered_at < {{ end }}\n'
    )
    con = duckdb.connect(str(root / "w.duckdb"))
    con.execute(
        "CREATE SCHEMA raw; CREATE TABLE raw.lines AS SELECT i AS line_id, "
        "i % 3 AS line_no, i % 5 AS qty, "
        "TIMESTAMP '2026-08-01' + to_minutes(i * 24 * 60 // 50) AS ordered_at "
        "FROM range(200) t(i)"
    )
    con.close()
    p = backfill.Project.load(root)
    assert (
        p.backfill(
            p.plan("*", "2026-08-01", "2026-08-05", as_of=as_of), reason="build", direct=True
        )
        .run()
        .ok
    )
    return p


def _audit_after(root: pathlib.Path, as_of: Any, change: str) -> tuple[Any, Any]:
    """The audit of a rebuild after ``change`` to raw.lines, and the one-shot diff of the same
    differing partitions (every one as one stream per side: the audit's path before)."""
    import duckdb

    con = duckdb.connect(str(root / "w.duckdb"))
    con.execute(change)
    con.close()
    p = backfill.Project.load(root)
    bf = p.backfill(p.plan("*", "2026-08-01", "2026-08-05", as_of=as_of), reason="fix")
    assert bf.run().ok
    a = bf.audit()["order_lines"]
    periods = [(x.start, x.end) for x in a.differing]
    with (
        bf.engine.stream(p, "order_lines", PUBLISHED, periods) as old,
        bf.engine.stream(p, "order_lines", bf.area, periods, preview=True) as new,
    ):
        whole = backfill.diff(
            old, new, a.key, measures=a.measures, on_duplicate="report", partition_by="ordered_at"
        )
    bf.engine.close()
    return a, whole


@pytest.fixture
def day_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """One partition (50 rows) per streamed pair, as large partitions are at scale."""
    from backfill.audit import audit

    monkeypatch.setattr(audit, "_PAIR_ROWS", 50)


def test_audit_streams_partitions_and_matches_keys_moving_between_them(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture, day_pairs: None
) -> None:
    from shop_support import AS_OF

    caplog.set_level(logging.DEBUG, logger="backfill.audit.audit")
    _lines_project(tmp_path, AS_OF)
    # Lines 40-44 (1 Aug) move to 2 Aug; qty changes on every day (lines 3, 53, 103, 153).
    a, whole = _audit_after(
        tmp_path,
        AS_OF,
        """
        UPDATE raw.lines SET ordered_at = ordered_at + INTERVAL 1 DAY WHERE line_id BETWEEN 40
            AND 44;
        UPDATE raw.lines SET qty = qty + 1 WHERE line_id % 50 = 3""",
    )
    assert a.key == ["line_id"] and [x.label for x in a.differing] == [
        "2026-08-01",
        "2026-08-02",
        "2026-08-03",
        "2026-08-04",
    ]
    assert a.diff is not None
    s = a.diff.summary
    assert (s.changed, s.added, s.removed, s.duplicate_keys) == (4 + 5, 0, 0, 0)
    assert_same_counts(a.diff, whole)
    # One pair per day; the 5 moved lines were unmatched in their own pairs, matched at the end.
    assert "4 pairs streamed, 5/5 rows carried" in caplog.text
    by_day = {x.label: (x.added, x.removed, x.changed) for x in a.differing}
    assert by_day == {
        "2026-08-01": (0, 0, 1 + 5),
        "2026-08-02": (0, 0, 1 + 5),
        "2026-08-03": (0, 0, 1),
        "2026-08-04": (0, 0, 1),
    }


def test_audit_falls_back_to_the_whole_diff_for_a_key_repeated_across_partitions(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture, day_pairs: None
) -> None:
    from shop_support import AS_OF

    caplog.set_level(logging.INFO, logger="backfill.audit.audit")
    _lines_project(tmp_path, AS_OF)
    # Line 5 (1 Aug) gets a second line_no on 3 Aug, line 6 another qty: both days differ and
    # line_id repeats across them, so the
    # audit's first key candidate fails there and (line_id, line_no) is checked and used.
    a, whole = _audit_after(
        tmp_path,
        AS_OF,
        """
        INSERT INTO raw.lines SELECT line_id, 9, qty, ordered_at + INTERVAL 2 DAY
        FROM raw.lines WHERE line_id = 5;
        UPDATE raw.lines SET qty = qty + 1 WHERE line_id = 6""",
    )
    assert "a key recurs across partitions; diffing them at once" in caplog.text
    assert a.key == ["line_id", "line_no"] and a.diff is not None
    assert [x.label for x in a.differing] == ["2026-08-01", "2026-08-03"]
    assert (a.diff.summary.added, a.diff.summary.changed, a.diff.summary.duplicate_keys) == (
        1,
        1,
        0,
    )
    assert_same_counts(a.diff, whole)


def assert_same_counts(a: DiffResult, b: DiffResult) -> None:
    """Same summary, columns and partitions tables (samples follow the engine's row order)."""
    assert a.summary == b.summary
    assert a.columns.to_pylist() == b.columns.to_pylist()
    assert a.partitions.to_pylist() == b.partitions.to_pylist()
