"""The DuckDB write of one ``replace`` task, in as few statements as the checks allow.

A task's fixed cost is mostly per statement (DuckDB parses, binds and plans each; a commit
syncs), so a partition of a replace model is written straight from the model's SELECT:

    columns of the target and of the SELECT (bound, not run; none: create it empty)
    DELETE the period                     -> rows deleted
    INSERT the SELECT                     -> rows written
    fingerprint the period                -> rows now in the period, and their fingerprint
                                             (per calendar partition, for the audit)

Both column lists come from binding a relation (``cur.sql(...).columns``): nothing runs, and a
relation that fails to bind (no such table) does not abort the transaction, unlike a failed
statement. A ``duckdb_columns()`` lookup and a ``LIMIT 0`` run of the SELECT took 4.3 ms of CPU
a task, a third of an empty period's task. When the SELECT wrote no rows, the period is empty
(the DELETE emptied it in this transaction), so its fingerprint is known without a scan.

The rows the SELECT returned outside the task's period (or with a NULL event time) are the
rows written minus the rows now in the period (the DELETE emptied it): the same check as
before, without a temporary table, its copy and its counts. Merge, append and landed rows keep
the general path (a merge deletes by the new rows' keys, so it needs them first).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence

import duckdb

from ..base import Part, PartitionFingerprint, TaskFailure
from .sql import fingerprint_parts, fingerprint_where, in_periods, one

__all__ = ["schema_changed", "write_replace"]


def _columns(cur: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    """The columns of ``"schema"."table"`` in catalog order; empty when it does not exist
    (bound as a relation, never run: the transaction survives a missing table)."""
    try:
        return [str(c) for c in cur.sql(f"FROM {relation}").columns]
    except duckdb.CatalogException:
        return []


def schema_changed(where: str, target: str, new: list[str], old: list[str]) -> TaskFailure:
    """The permanent failure of a task whose SELECT's columns (``new``) differ from its table's
    (``old``); ``where`` names the model."""
    schema = target.rsplit(".", 1)[0].strip('"')
    return TaskFailure(
        f"{where}: the SELECT's columns ({', '.join(new)}) differ from the table's "
        f"({', '.join(old)}) in schema {schema!r}; a partition task cannot change the "
        "schema: rebuild the model (strategy full) or backfill it into an audit area",
        transient=False,
    )


def write_replace(
    cur: duckdb.DuckDBPyConnection,
    target: str,
    sql: str,
    event_time: str,
    start: dt.datetime,
    end: dt.datetime,
    where: str,
    parts: Sequence[Part] = (),
) -> tuple[int, int, PartitionFingerprint, Mapping[str, PartitionFingerprint]]:
    """Replaces ``target``'s rows in [start, end) with the rows of ``sql``, inside the caller's
    transaction; returns (rows written, rows deleted, fingerprint of the period, fingerprint of
    each of ``parts``: the calendar partitions of the period, or none). Raises
    :class:`TaskFailure` (permanent; the caller rolls back) when the SELECT's columns differ from
    the table's or it returns rows outside the period. ``where`` names the model in errors."""
    select = f"SELECT * FROM (\n{sql}\n)"  # newlines: a trailing -- comment stays closed
    in_period = in_periods(event_time, [(start, end)])
    old = _columns(cur, target)
    new = [str(c) for c in cur.sql(select).columns]  # bound, not run
    if not old:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {target.rsplit('.', 1)[0]}")
        cur.execute(f"CREATE TABLE {target} AS {select} LIMIT 0")
        old = new
    elif set(new) != set(old):
        raise schema_changed(where, target, new, old)
    deleted = one(cur, f"DELETE FROM {target} WHERE {in_period}")
    written = one(cur, f"INSERT INTO {target} BY NAME {select}")
    # The same scan, grouped per partition when the period has several: the audit takes the
    # area's fingerprints from here instead of scanning every backfilled partition again.
    covered = _covers(parts, start, end)
    by_part: Mapping[str, PartitionFingerprint] = {}
    if not written:
        # Nothing written: the period is empty (deleted above, in this transaction), no scan.
        fp = PartitionFingerprint.empty()
        if covered:
            by_part = {part[0]: fp for part in parts}
    elif len(parts) > 1 and covered:
        by_part = fingerprint_parts(cur, target, event_time, parts, old)
        fp = PartitionFingerprint.total(by_part.values())
    else:
        fp = fingerprint_where(cur, target, in_period, old)
        if len(parts) == 1 and covered:
            by_part = {parts[0][0]: fp}
    outside = written - fp.rows
    if outside:
        raise TaskFailure(
            f"{where}: the SELECT returned {outside} row(s) with {event_time} outside the "
            f"task's period [{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M}) UTC (or NULL); a "
            "task writes exactly its period: filter the inputs with {{ start }} and {{ end }}",
            transient=False,
        )
    return written, deleted, fp, by_part


def _covers(parts: Sequence[Part], start: dt.datetime, end: dt.datetime) -> bool:
    """Whether ``parts`` (in time order) tile [start, end) exactly."""
    return (
        parts[0][1] == start
        and parts[-1][2] == end
        and all(a[2] == b[1] for a, b in itertools.pairwise(parts))
    )
