"""benchmarks/spark_bench.py's comparisons run (small) on the suite's Spark shop, in the session's
one SparkSession: the backfill and the plain Spark jobs write the same rows, the audit costs a
handful of Spark jobs, and the audit's batched answers equal the single questions'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import backfill
import plan_helpers  # noqa: F401 - puts benchmarks/ on sys.path
from backfill.audit.keys import measures_of, natural_candidates
from backfill.engines import PUBLISHED


def test_spark_bench_quick_on_the_sessions_shop(built_spark_shop: Path, tmp_path: Path) -> None:
    import spark_bench as bench
    import spark_support

    root = spark_support.copy_built(built_spark_shop, tmp_path / "shop")
    project = backfill.Project.load(root)
    engine = backfill.engines.registry.engine_for(project)
    result, bf = bench.measure(root, engine, days=5, repeat=1, publish=False)
    print("\n".join(result.lines("suite")))
    assert result.same_rows, (
        "the plain Spark job wrote other fct_daily_sales rows than the backfill"
    )
    assert result.audit_passed
    # Three models, two jobs each: the published rows of the audited partitions (few: the
    # tables hold fewer than the engine's held_rows), from which its fingerprints and totals
    # and the diff's published rows come (the new version's fingerprints are the run's tasks'),
    # and the new rows of the differing partitions.
    assert result.jobs_audit <= 3 * 2, result
    assert result.t_backfill > 0 and result.t_plain > 0 and result.t_audit > 0

    # What an audit scope answers is what the single questions answer (the model with the most
    # differing partitions; the others go through the same code).
    spark = engine.spark  # type: ignore[attr-defined]
    project = bf.project
    model = "fct_sales_7d"
    parts = bf.partitions()[model]
    m = project.models[model]
    periods = [(s, e) for _, s, e in parts] if parts and m.event_time else None
    cols = engine.columns(project, model, bf.area)
    sums, keys = measures_of(cols, [], m), [[c] for c in natural_candidates(m, cols)[:1]]

    def ask() -> list[object]:
        return [
            engine.fingerprints(project, model, PUBLISHED, parts),
            engine.fingerprints(project, model, bf.area, parts),
            engine.measure_sums(project, model, PUBLISHED, sums, periods),
            engine.measure_sums(project, model, bf.area, sums, periods),
        ] + [
            engine.is_unique(project, model, a, k, periods)
            for a in (PUBLISHED, bf.area)
            for k in keys
        ]

    single = ask()
    before = bench._last_job(spark)
    with engine.audit_scope(project, model, [PUBLISHED, bf.area], parts, sums, keys):
        batched = ask()
    assert batched == single, model
    assert bench._last_job(spark) - before <= 2, "the scope's questions cost jobs"

    # Both versions' rows held (their tables hold fewer than held_rows): the same answers from
    # one query, and the diff's pairs from the rows it read, equal to the pair's own query.
    some = [(s, e) for _, s, e in parts[1:4]]
    with engine.stream_pair(project, model, bf.area, some) as (old, new):
        queried = [_sorted(old.read_all()), _sorted(new.read_all())]
    assert queried[0].num_rows and queried[1].num_rows
    before = bench._last_job(spark)
    with engine.audit_scope(
        project, model, [PUBLISHED, bf.area], parts, sums, keys, diff_area=bf.area
    ):
        held = ask()
        with engine.stream_pair(project, model, bf.area, some) as (old, new):
            from_held = [_sorted(old.read_all()), _sorted(new.read_all())]
    assert held == single, model
    assert from_held == queried
    assert bench._last_job(spark) - before <= 1, "the held rows cost more than one job"
    # The area's fingerprints from the run (the audit asks about the published version only):
    # its rows held, the area's rows of the pair's periods in one more query.
    before = bench._last_job(spark)
    with engine.audit_scope(project, model, [PUBLISHED], parts, sums, keys, diff_area=bf.area):
        published = [
            engine.fingerprints(project, model, PUBLISHED, parts),
            engine.measure_sums(project, model, PUBLISHED, sums, periods),
        ]
        with engine.stream_pair(project, model, bf.area, some) as (old, new):
            half_held = [_sorted(old.read_all()), _sorted(new.read_all())]
    assert published == [single[0], single[2]], model
    assert half_held == queried
    assert bench._last_job(spark) - before <= 2, "more than the held rows and the area's query"
    # Tables larger than held_rows: the scope aggregates instead, with the same answers.
    engine.held_rows = 1  # type: ignore[attr-defined]
    with engine.audit_scope(
        project, model, [PUBLISHED, bf.area], parts, sums, keys, diff_area=bf.area
    ):
        assert ask() == single, model


def _sorted(table: Any) -> Any:
    """``table`` in the order of all its columns (the diff does not depend on row order)."""
    return table.sort_by([(c, "ascending") for c in table.column_names])
