"""Declaratively partitioned tables: a model with ``table_partitions: month`` (on an engine whose
``capabilities.table_partitions`` says it has them: PostgreSQL) gets a table partitioned by
range of its event time, one partition per period of that grain, made as periods appear, and
publish exchanges whole partitions instead of copying their rows.

>>> import datetime as dt
>>> utc = dt.timezone.utc
>>> bound_value(ColumnKind.DATE, dt.datetime(2026, 7, 31, 22, tzinfo=utc))  # Berlin midnight
datetime.date(2026, 8, 1)
>>> partition_name("fct_daily_sales", "2026-08")
'fct_daily_sales__2026_08'

**The layout.** A table partition is a calendar period of ``table_partitions`` in the model's
time zone (the project's C++ calendar: a Berlin day is 23 or 25 hours at DST changes, an hourly
partition is one wall-clock hour at one offset). Its bounds are in the event time column's own
domain, as the period filters compare them: a ``timestamptz`` bound is the instant, a
``timestamp`` bound the UTC wall time (naive timestamps are read as UTC), a ``date`` bound the
first date whose midnight is at or after the instant (so a Berlin day holds one date; periods
shorter than a day cannot cut a date column). Every partition also carries a CHECK constraint
equal to its bound (:data:`BOUND_CHECK`): attached anywhere with that bound, PostgreSQL sees the
constraint implies the partition's and skips the scan that would validate the rows.

**Making partitions.** A task makes the partitions its period needs before its write
transaction, each in a short transaction of its own (create the table, attach it): a partition
made inside the write would hold the parent's lock (SHARE UPDATE EXCLUSIVE, which ATTACH
takes) until the task commits, so every task making a partition would wait for the others'
whole writes. Two tasks making the same partition take turns on a transaction-scoped advisory
lock named for it, and the second finds it made. A task that finds no table makes the parent
and its partitions inside its write transaction (under the lock that orders first creations).

**Publishing.** A partition whose every period the publish replaces, and which the audit area
holds as a partition of the same bounds (tasks made it), is exchanged: ``DETACH`` the published
partition (into ``backup_<publication>`` as a partition of a partitioned table of the model's
name, which takes the place of copying its rows; dropped when nothing is kept), ``DETACH`` the
area's, move it into the published schema and ``ATTACH`` it. Statistics travel with a table (an
``ANALYZE`` of the area's partition is the published partition's). Periods smaller than a
partition are copied as before: DELETE + INSERT of those periods inside their partition, the
replaced rows copied into a partition of the backup. The exchanges run last in the publish
transaction, after every check and copy, because ``DETACH`` takes ACCESS EXCLUSIVE on the
published parent: from the first ``DETACH`` to the commit, readers of the table wait (they then
see all new); before it they read the old rows. A rollback is the reverse exchange.

**What is left alone.** An existing table that is not partitioned (or is partitioned on
something else) is written and published by DELETE + INSERT as before; nothing converts it
unless asked (:meth:`TablePartitions.migrate`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...calendar import PeriodSet
from ...errors import InvalidInputError
from ...fingerprints import PartitionFingerprint
from ...versions import KeptModel
from ..base import Column, ColumnKind, Part, Period, PublishModel, TaskFailure

if TYPE_CHECKING:  # pragma: no cover
    from ...model.project import Model
    from .core import SqlEngine
    from .dialect import Rel

log = logging.getLogger(__name__)

__all__ = [
    "BOUND_CHECK",
    "Bound",
    "Found",
    "TablePart",
    "TablePartitions",
    "bound_value",
    "covers",
    "partition_name",
    "table_layout",
]

#: a partition bound in its column's domain: a date, a naive (UTC) or an aware timestamp
Bound = dt.date | dt.datetime
#: the partitions a table has: (low, high) bounds -> the partition's name (same schema)
Found = dict[tuple[Bound, Bound], str]
#: the name of the CHECK constraint every partition made here carries (its bound)
BOUND_CHECK = "backfill_partition_bound"
#: PostgreSQL's identifier length
_MAX_NAME = 63
_UTC = dt.timezone.utc


def bound_value(kind: ColumnKind | None, instant: dt.datetime) -> Bound:
    """A period bound (a UTC instant) in the domain of an event time column of ``kind``: where
    the period filters cut that column (a date ``d`` is in ``[s, e)`` when its midnight is)."""
    utc = instant.astimezone(_UTC)
    if kind == ColumnKind.TIMESTAMP_TZ:
        return utc
    if kind == ColumnKind.TIMESTAMP:
        return utc.replace(tzinfo=None)
    if kind == ColumnKind.DATE:
        day = utc.date()
        return day if utc == dt.datetime.combine(day, dt.time(), _UTC) else day + dt.timedelta(1)
    raise InvalidInputError(
        f"table_partitions cut a date or timestamp event time column; this one is {kind}"
    )


@dataclass(frozen=True)
class TablePart:
    """One table partition: its calendar period (label, UTC start and end) and its bounds in
    the event time column's domain."""

    label: str
    start: dt.datetime
    end: dt.datetime
    low: Bound
    high: Bound

    @property
    def bounds(self) -> tuple[Bound, Bound]:
        return (self.low, self.high)

    @property
    def period(self) -> Period:
        return (self.start, self.end)


def table_layout(m: Model, column: Column, periods: Sequence[Period]) -> list[TablePart]:
    """The table partitions of ``m`` (``m.table_partitions`` in ``m.tz``) overlapping
    ``periods``, in time order; InvalidInputError when a partition holds no whole value of the
    column (hours of a date column)."""
    grain = m.table_partitions
    if grain is None or not periods:
        return []
    found = PeriodSet(list(periods)).partitions(grain, m.tz)
    parts = [
        TablePart(
            p.label,
            p.start,
            p.end,
            bound_value(column.kind, p.start),
            bound_value(column.kind, p.end),
        )
        for p in found
    ]
    for p in parts:
        # An hour of a date column would be one date or none (both in the column's domain).
        if p.low >= p.high or (column.kind == ColumnKind.DATE and grain == "hour"):
            raise InvalidInputError(
                f"model {m.name!r}: table_partitions {grain!r} of the {column.kind.value} column "
                f"{column.name!r}: the {grain} {p.label} holds no whole value of it; expected "
                "table_partitions of a day or coarser for a date column"
            )
    return parts


def covers(periods: Sequence[Period], part: TablePart) -> bool:
    """Whether ``periods`` cover the whole of ``part``'s period."""
    return (PeriodSet([part.period]) - PeriodSet(list(periods))).is_empty()


def partition_name(table: str, label: str) -> str:
    """The name of ``table``'s partition labelled ``label``: ``fct__2026_08``, ``fct__2026_w32``,
    an hour's offset kept apart (``+02:00`` -> ``p02_00``); a long table name is shortened with
    a hash of it, within PostgreSQL's 63 bytes."""
    suffix = re.sub(r"[^0-9a-z]+", "_", label.lower().replace("+", "p")).strip("_")
    name = f"{table}__{suffix}"
    if len(name.encode()) <= _MAX_NAME:
        return name
    digest = hashlib.md5(table.encode(), usedforsecurity=False).hexdigest()[:8]
    room = _MAX_NAME - len(suffix) - len(digest) - 3
    return f"{table.encode()[:room].decode(errors='ignore')}_{digest}__{suffix}"


def _instant(value: Bound) -> dt.datetime:
    """A column value as the instant the period filters read it as (dates and naive
    timestamps as UTC)."""
    if not isinstance(value, dt.datetime):
        return dt.datetime.combine(value, dt.time(), _UTC)
    return value if value.tzinfo is not None else value.replace(tzinfo=_UTC)


def _in(part: Part, periods: PeriodSet) -> bool:
    return (PeriodSet([(part[1], part[2])]) - periods).is_empty()


@dataclass
class _Exchange:
    """One partition a publish exchanges (run last in its transaction): ``old`` (the
    published partition's name, None: none) leaves ``parent`` for ``backup`` (None: dropped),
    ``new`` (a (schema, name) partition of ``source``, None: nothing comes back) takes its
    place."""

    parent: Rel
    part: TablePart
    old: str | None
    new: Rel | None
    source: Rel | None
    backup: Rel | None


class TablePartitions:
    """The declaratively partitioned tables of one :class:`~.core.SqlEngine`: making them and
    their partitions, and publishing by exchanging partitions (see the module docstring). The
    SQL is the engine's dialect's; the catalog its ``_table_partitions`` hook's."""

    def __init__(self, engine: SqlEngine) -> None:
        self.engine = engine

    # -- which models ----------------------------------------------------------------------------
    def wanted(self, m: Model, where: str) -> bool:
        """Whether a task of ``m`` (at ``where``) writes a partitioned table; a permanent
        TaskFailure when ``m`` asks for one and the engine has none."""
        if m.table_partitions is None:
            return False
        if not self.engine.capabilities.table_partitions:
            raise TaskFailure(
                f"{where}: table_partitions {m.table_partitions!r} needs an engine with "
                f"declaratively partitioned tables (postgres); the {self.engine.name} engine has "
                "none: remove table_partitions",
                transient=False,
            )
        return True

    def _key(self, cur: Any, m: Model, rel: Rel) -> tuple[Column, Found] | None:
        """The event time column of the partitioned table ``rel`` and its partitions; None when
        ``rel`` is missing or not partitioned by range of the event time."""
        e = self.engine
        # The catalog query of _kind first: PostgreSQL caches a name it did not find, and a
        # table another task makes and commits meanwhile stays unknown to this session's
        # lookups by name until it takes a new lock on a catalog (the write's own check of
        # the table, after waiting for its maker, would then find no columns).
        if e._kind(cur, rel) != "table":
            return None
        cols = e._columns(cur, rel)
        col = next((c for c in cols or [] if c.name == m.event_time), None)
        if col is None:
            return None
        found = e._table_partitions(cur, rel, col)
        return None if found is None else (col, found)

    # -- making tables and partitions -------------------------------------------------------------
    def create_table(
        self, cur: Any, m: Model, rel: Rel, like: str, columns: Sequence[Column]
    ) -> None:
        """Makes ``rel``, the partitioned table of ``m``, with the columns of the relation
        ``like`` (no partitions yet)."""
        col = next((c for c in columns if c.name == m.event_time), None)
        if col is None:
            raise InvalidInputError(
                f"model {m.name!r}: its SELECT has no column {m.event_time!r} (its event_time) "
                "to partition the table by"
            )
        bound_value(col.kind, dt.datetime(2000, 1, 1, tzinfo=_UTC))  # a date or a timestamp
        d = self.engine.dialect
        cur.execute(d.partitioned_table(d.qualified(rel), like, col.name))

    def ensure(
        self, cur: Any, m: Model, rel: Rel, periods: Sequence[Period], *, own: bool
    ) -> list[Rel] | None:
        """Makes the partitions of ``rel`` that ``periods`` need (``own``: each in a
        transaction of its own; else in the caller's); returns the partitions holding
        ``periods``. None when ``rel`` is missing or not partitioned by its event time (a table
        left alone: written by DELETE + INSERT)."""
        e = self.engine
        key = self._key(cur, m, rel)
        if key is None:
            return None
        col, found = key
        layout = table_layout(m, col, periods)
        for p in layout:
            if p.bounds in found:
                continue
            if own:
                with e._transaction(cur):
                    found = self._make(cur, m, rel, col, p)
            else:
                found = self._make(cur, m, rel, col, p)
        return [(rel[0], found[p.bounds]) for p in layout]

    def _make(self, cur: Any, m: Model, rel: Rel, col: Column, p: TablePart) -> Found:
        """Makes ``p`` a partition of ``rel`` unless a concurrent task made it (they take turns
        on a lock named for it); returns the table's partitions after."""
        e = self.engine
        e._lock(cur, rel, f"partition {p.label}")
        found = e._table_partitions(cur, rel, col) or {}
        if p.bounds in found:
            return found
        name = partition_name(rel[1], p.label)
        self._create(cur, rel, (rel[0], name), col, p)
        log.info("%s: made partition %s.%s for %s", m.name, rel[0], name, p.label)
        return {**found, p.bounds: name}

    def _create(self, cur: Any, parent: Rel, part: Rel, col: Column, p: TablePart) -> None:
        """An empty table like ``parent`` with its bound as a CHECK, attached to it."""
        d = self.engine.dialect
        cur.execute(
            d.bounded_table(d.qualified(part), d.qualified(parent), col.name, BOUND_CHECK, p.bounds)
        )
        cur.execute(d.attach_partition(d.qualified(parent), d.qualified(part), p.bounds))

    def migrate(self, cur: Any, m: Model, rel: Rel) -> int:
        """Makes the existing table ``rel`` of ``m`` partitioned (what a user asks for: a plain
        table is otherwise left alone), in one transaction: writers wait from the start (SHARE
        lock), readers read the old table while its rows are copied into a new partitioned
        table with a partition for every period between its first and last event time, and
        wait only from the swap (DROP + RENAME) to the commit. Returns the partitions made (0:
        ``rel`` is partitioned by its event time already)."""
        e = self.engine
        d = e.dialect
        target = d.qualified(rel)
        if e._kind(cur, rel) != "table":
            raise InvalidInputError(f"model {m.name!r}: no table {target} to partition")
        col = next((c for c in e._columns(cur, rel) or [] if c.name == m.event_time), None)
        if col is None:
            raise InvalidInputError(
                f"model {m.name!r}: {target} has no column {m.event_time!r} (its event_time)"
            )
        if e._table_partitions(cur, rel, col) is not None:
            return 0
        staging = (rel[0], partition_name(rel[1], "partitioning"))
        et = d.quote(col.name)
        with e._transaction(cur):
            cur.execute(f"LOCK TABLE {target} IN SHARE MODE")
            nulls, low, high = e._rows(
                cur, f"SELECT count(*) - count({et}), min({et}), max({et}) FROM {target}"
            )[0]
            if nulls:
                raise InvalidInputError(
                    f"model {m.name!r}: {nulls} row(s) of {target} have no {col.name} (NULL): "
                    "no partition would hold them; nothing was changed"
                )
            cur.execute(d.partitioned_table(d.qualified(staging), target, col.name))
            # whole seconds, as partition bounds are: the first one's and the one after the last
            span = (
                []
                if low is None
                else [
                    (
                        _instant(low).replace(microsecond=0),
                        _instant(high).replace(microsecond=0) + dt.timedelta(seconds=1),
                    )
                ]
            )
            layout = table_layout(m, col, span)
            parts = [(rel[0], partition_name(rel[1], p.label)) for p in layout]
            for part, p in zip(parts, layout, strict=True):
                self._create(cur, staging, part, col, p)
            names = ", ".join(d.quote(c.name) for c in e._columns(cur, rel) or [])
            copied = e._count(
                cur, f"INSERT INTO {d.qualified(staging)} ({names}) SELECT {names} FROM {target}"
            )
            total = e._one(cur, f"SELECT count(*) FROM {target}")
            if copied != total:  # pragma: no cover - the SHARE lock keeps writers out
                raise InvalidInputError(f"{target}: copied {copied} rows of {total}")
            for part in parts:
                analyze = d.analyze(d.qualified(part))
                if analyze is not None:
                    cur.execute(analyze)
            cur.execute(f"DROP TABLE {target}")  # readers wait from here to the commit
            cur.execute(f"ALTER TABLE {d.qualified(staging)} RENAME TO {d.quote(rel[1])}")
        log.info(
            "%s: %s partitioned into %d partition(s), %d rows", m.name, target, len(parts), total
        )
        return len(parts)

    # -- publishing ------------------------------------------------------------------------------
    def publish(
        self,
        cur: Any,
        m: Model,
        pm: PublishModel,
        sides: tuple[Rel, Rel, Rel | None],
        stale: Sequence[str],
        defer: Callable[[Rel, Callable[[], None]], None],
    ) -> KeptModel | None:
        """Publishes ``pm``'s periods from the area's table into the published one (``sides``:
        published, new, backup (None: keep nothing)), exchanging the partitions whose every
        period it replaces (the exchanges go to ``defer`` with the table they lock: run last in
        the transaction) and
        copying the other periods' rows. None when either table is not partitioned by its event
        time the same way (the caller copies every period)."""
        rel, new_rel, backup = sides
        pub_key, new_key = self._key(cur, m, rel), self._key(cur, m, new_rel)
        if pub_key is None or new_key is None or not self._same_columns(cur, rel, new_rel):
            return None
        col, pub_found = pub_key
        new_found = new_key[1]
        # Periods the audit found identical on both sides (and the stale check as the audit
        # saw them) hold the same rows: a partition of only such periods is left as it is;
        # a partition with a changed one is exchanged whole (its unchanged periods too).
        same = pm.unchanged(stale)
        periods = [(s, en) for _, s, en in pm.parts]
        changed = PeriodSet([(s, en) for label, s, en in pm.parts if label not in same])
        whole = [
            p
            for p in table_layout(m, col, periods)
            if covers(periods, p)
            and p.bounds in new_found
            and not (changed & PeriodSet([p.period])).is_empty()
        ]
        exchanged = PeriodSet([p.period for p in whole])
        in_whole = [part for part in pm.parts if _in(part, exchanged)]
        copied = [part for part in pm.parts if not _in(part, exchanged) and part[0] not in same]
        if backup is not None:
            self._backup_table(cur, m, rel, backup, col)
        kept_rows = self._copy_periods(cur, m, (rel, new_rel, backup), col, copied, copied)
        for p in whole:
            old = pub_found.get(p.bounds)
            if backup is not None:
                kept_rows += self._rows_of(cur, rel, old, p, pm, stale)
            new = (new_rel[0], new_found[p.bounds])
            defer(rel, self._exchanger(cur, _Exchange(rel, p, old, new, new_rel, backup)))
        kept_parts = sorted([*in_whole, *copied], key=lambda x: x[1])
        labels = {label for label, _, _ in kept_parts}
        kept = KeptModel(
            pm.model,
            "replace",
            True,
            tuple(kept_parts),
            rows=kept_rows if backup is not None else 0,
            unchanged=tuple(sorted(label for label, _, _ in pm.parts if label not in labels)),
        )
        # The published fingerprints after the swap: the audit's of the new rows, else those
        # of the area's partitions (the rows the exchange attaches) and of the copied periods.
        after = {label: fp for label, fp in pm.new_fingerprints.items() if label in labels}
        missing_whole = [x for x in in_whole if x[0] not in after]
        missing_rest = [x for x in copied if x[0] not in after]
        after.update(self._fingerprints(cur, new_rel, col, missing_whole))
        after.update(self._fingerprints(cur, rel, col, missing_rest))
        log.info(
            "%s: publish exchanges %d partition(s), copies %d period(s), leaves %d unchanged",
            m.name,
            len(whole),
            len(copied),
            len(pm.parts) - len(kept_parts),
        )
        return dataclasses.replace(kept, after=after)

    def restore(
        self,
        cur: Any,
        m: Model,
        pm: PublishModel,
        sides: tuple[Rel, Rel, Rel | None],
        stale: Sequence[str],
        defer: Callable[[Rel, Callable[[], None]], None],
    ) -> KeptModel | None:
        """A rollback of ``pm`` (``pm.restore``: what the publication kept): the reverse of
        :meth:`publish`, from the kept table (``sides``: published, kept, backup of this
        rollback). None when either table is not partitioned the same way (the caller copies)."""
        kept_then = pm.restore
        assert kept_then is not None
        rel, old_rel, backup = sides
        pub_key, old_key = self._key(cur, m, rel), self._key(cur, m, old_rel)
        if pub_key is None or old_key is None or not self._same_columns(cur, rel, old_rel):
            return None
        col, pub_found = pub_key
        old_found = old_key[1]
        parts = list(kept_then.parts)
        periods = [(s, en) for _, s, en in parts]

        def lone(p: TablePart) -> bool:
            # The kept table has exactly this partition, or none overlapping it (nothing was
            # published there before the publication: the rollback empties it).
            if p.bounds in old_found:
                return True
            return not any(lo < p.high and hi > p.low for lo, hi in old_found)

        whole = [p for p in table_layout(m, col, periods) if covers(periods, p) and lone(p)]
        exchanged = PeriodSet([p.period for p in whole])
        in_whole = [part for part in parts if _in(part, exchanged)]
        rest = [part for part in parts if not _in(part, exchanged)]
        if backup is not None:
            self._backup_table(cur, m, rel, backup, col)
        # What goes back is the kept table's rows: fingerprinted there, before the exchange.
        after = self._fingerprints(cur, old_rel, col, in_whole)
        kept_rows = self._copy_periods(cur, m, (rel, old_rel, backup), col, rest, rest)
        after.update(self._fingerprints(cur, rel, col, rest))
        for p in whole:
            now = pub_found.get(p.bounds)
            if backup is not None:
                kept_rows += self._rows_of(cur, rel, now, p, pm, stale)
            old = old_found.get(p.bounds)
            back = None if old is None else (old_rel[0], old)
            defer(rel, self._exchanger(cur, _Exchange(rel, p, now, back, old_rel, backup)))
        log.info(
            "%s: rollback exchanges %d partition(s), copies %d period(s)",
            m.name,
            len(whole),
            len(rest),
        )
        return KeptModel(
            pm.model,
            "replace",
            True,
            tuple(parts),
            rows=kept_rows if backup is not None else 0,
            after=after,
        )

    def _same_columns(self, cur: Any, a: Rel, b: Rel) -> bool:
        """Whether ``a`` and ``b`` have the same columns of the same types (ATTACH wants that;
        otherwise the rows are copied, as INSERT casts them)."""
        e = self.engine
        return sorted((c.name, c.type) for c in e._columns(cur, a) or []) == sorted(
            (c.name, c.type) for c in e._columns(cur, b) or []
        )

    def _backup_table(self, cur: Any, m: Model, rel: Rel, backup: Rel, col: Column) -> None:
        """The partitioned table ``backup`` like ``rel``: the exchanged partitions are attached
        to it, the copied periods' rows inserted into partitions of it."""
        d = self.engine.dialect
        cur.execute(d.partitioned_table(d.qualified(backup), d.qualified(rel), col.name))

    def _copy_periods(
        self,
        cur: Any,
        m: Model,
        sides: tuple[Rel, Rel, Rel | None],
        col: Column,
        rest: Sequence[Part],
        keep: Sequence[Part],
    ) -> int:
        """DELETE + INSERT of the periods ``rest`` (periods smaller than a partition) from the
        source table into the published one, inside their partitions (made when missing),
        after copying the published rows of ``keep`` into the backup's partitions; returns the
        rows kept."""
        e = self.engine
        d = e.dialect
        rel, source, backup = sides
        if not rest:
            return 0
        assert m.event_time is not None
        rest_periods = [(s, en) for _, s, en in rest]
        self.ensure(cur, m, rel, rest_periods, own=False)
        kept = 0
        if backup is not None and keep:
            keep_periods = [(s, en) for _, s, en in keep]
            self.ensure(cur, m, backup, keep_periods, own=False)
            kept = e._count(
                cur,
                f"INSERT INTO {d.qualified(backup)} SELECT * FROM {d.qualified(rel)} t WHERE "
                f"{d.in_periods(m.event_time, keep_periods, col.kind, 't')}",
            )
        where = d.in_periods(m.event_time, rest_periods, col.kind, "t")
        cur.execute(f"DELETE FROM {d.qualified(rel)} t WHERE {where}")
        names = [c.name for c in e._columns(cur, rel) or []]
        rows = f"(SELECT * FROM {d.qualified(source)} t WHERE {where}) s"
        cur.execute(d.insert(d.qualified(rel), rows, names))
        return kept

    def _rows_of(
        self,
        cur: Any,
        rel: Rel,
        name: str | None,
        p: TablePart,
        pm: PublishModel,
        stale: Sequence[str],
    ) -> int:
        """The rows of the published partition ``name`` (kept whole): the sum of the
        fingerprints the stale check just confirmed, else counted."""
        if name is None:
            return 0
        labels = [label for label, s, en in pm.parts if p.start <= s and en <= p.end]
        recorded = pm.published_fingerprints
        if labels and all(label in recorded and label not in stale for label in labels):
            return sum(recorded[label].rows for label in labels)
        table = self.engine.dialect.qualified((rel[0], name))
        return self.engine._one(cur, f"SELECT count(*) FROM {table}")

    def _fingerprints(
        self, cur: Any, rel: Rel, col: Column, parts: Sequence[Part]
    ) -> dict[str, PartitionFingerprint]:
        if not parts:
            return {}
        e = self.engine
        cols = e._columns(cur, rel) or []
        return e._fingerprint_parts(cur, e.dialect.qualified(rel), cols, col.name, parts)

    def _exchanger(self, cur: Any, x: _Exchange) -> Callable[[], None]:
        return lambda: self._exchange(cur, x)

    def _exchange(self, cur: Any, x: _Exchange) -> None:
        """One exchange (see :class:`_Exchange`), in the publish's transaction."""
        d = self.engine.dialect
        parent = d.qualified(x.parent)
        if x.old is not None:
            old = (x.parent[0], x.old)
            cur.execute(d.detach_partition(parent, d.qualified(old)))
            if x.backup is None:
                cur.execute(f"DROP TABLE {d.qualified(old)}")
            else:
                cur.execute(d.move_table(d.qualified(old), x.backup[0]))
                moved = (x.backup[0], x.old)
                cur.execute(
                    d.attach_partition(d.qualified(x.backup), d.qualified(moved), x.part.bounds)
                )
        if x.new is not None and x.source is not None:
            cur.execute(d.detach_partition(d.qualified(x.source), d.qualified(x.new)))
            if x.new[0] != x.parent[0]:
                cur.execute(d.move_table(d.qualified(x.new), x.parent[0]))
            cur.execute(
                d.attach_partition(parent, d.qualified((x.parent[0], x.new[1])), x.part.bounds)
            )
