"""Copying the batches one dbt invocation rebuilt into the audit area, on DuckDB, in one go.

An invocation runs a group of consecutive batches (tasks); each task's rows then go from the
work schema to ``audit_<id>``. Statement by statement per task that was 4 statements (count,
delete, insert, fingerprint) times the group's size; here it is 4 for the whole group, in one
transaction, with the counts and fingerprints per task from one aggregate each
(:func:`~backfill.engines.duckdb.sql.fingerprint_parts`). Rows and fingerprints are those the
per-task copy gave (the tests compare them).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from ...engines import PartitionFingerprint, Period
from ...engines.duckdb.sql import fingerprint_parts, in_periods, quote, sql_literal, transaction

__all__ = ["copy_periods"]


def _counts(
    cur: duckdb.DuckDBPyConnection, relation: str, event_time: str, periods: Sequence[Period]
) -> list[int]:
    """Rows of ``relation`` in each period, from one aggregate."""
    et = quote(event_time)
    values = ", ".join(
        f"({i}, {sql_literal(s)}, {sql_literal(e)})" for i, (s, e) in enumerate(periods)
    )
    rows = cur.execute(
        f"SELECT p.i, count(t.{et}) FROM (VALUES {values}) p(i, s, e) "
        f"LEFT JOIN {relation} t ON t.{et} >= p.s AND t.{et} < p.e "
        "GROUP BY p.i"
    ).fetchall()
    by_i = {int(i): int(n) for i, n in rows}
    return [by_i[i] for i in range(len(periods))]


def copy_periods(
    cur: duckdb.DuckDBPyConnection,
    target: str,
    work: str,
    event_time: str,
    periods: Sequence[Period],
    *,
    direct: bool,
) -> list[tuple[int, PartitionFingerprint]]:
    """Replaces ``target``'s rows in ``periods`` with ``work``'s in one transaction (``direct``:
    dbt wrote ``target`` itself, nothing to copy); (rows replaced, fingerprint) per period."""
    deleted = [0] * len(periods)
    if not direct:
        where = in_periods(event_time, periods)
        with transaction(cur):
            cur.execute(f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM {work} LIMIT 0")
            deleted = _counts(cur, target, event_time, periods)
            cur.execute(f"DELETE FROM {target} WHERE {where}")
            cur.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {work} WHERE {where}")
    parts = [(str(i), s, e) for i, (s, e) in enumerate(periods)]
    fps = fingerprint_parts(cur, target, event_time, parts)
    return [(deleted[i], fps[str(i)]) for i in range(len(periods))]
