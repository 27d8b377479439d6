"""``SqlLedger``: every :class:`~.backend.LedgerBackend` operation, written once in the SQL both
backends speak; :class:`~.sqlite.SqliteLedger` and :class:`~.postgres.PostgresLedger` override
only what truly differs (connections and transactions, locking, the Postgres one-statement
claims and finish, commit-landed detection after a lost connection).

Statements here use named parameters (``:name``) and four words for the clock, which a backend
renders in its own way (:meth:`SqlLedger._render`, :meth:`SqlLedger._p`):

* ``:now`` -- the stamp users read (ISO 8601 UTC text with milliseconds);
* ``:clock`` -- the clock lease expiries are compared with (``expires_at < :clock``);
* ``:epoch`` -- the same clock as epoch seconds (a retry's ``not_before``);
* ``:expires`` -- a lease's end, ``:secs`` seconds from now.

SQLite binds them from this process's clock (one machine); Postgres writes the DATABASE's clock
(``clock_timestamp()``) in their place, so workers on hosts with skewed clocks agree on who holds
a lease.

Every status write is a guarded ``UPDATE ... WHERE status IN (...)`` whose states come from
:mod:`.states`, so check and change are one step in the database. Every operation runs through
:meth:`SqlLedger._read` or :meth:`SqlLedger._write`, where a backend turns its driver's errors into
:class:`~.records.LedgerError` naming the ledger.
"""

from __future__ import annotations

import enum
import json
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ...errors import ConflictError, InvalidInputError, NotFoundError
from .backend import FinishOutcome
from .cost_records import HISTORY_RUN_COLUMNS, HISTORY_SAMPLE_COLUMNS, history, sample_rows
from .overlap import OPEN_ROWS_SQL, Overlap, find_overlaps, overlap_error
from .records import (
    AUDIT_KEYS,
    BACKFILL_KEYS,
    OPTIONAL_BACKFILL_KEYS,
    PUBLICATION_KEYS,
    AttemptRecord,
    AuditRecord,
    BackfillExistsError,
    BackfillRecord,
    Claim,
    CostMeasure,
    KeptVersion,
    LedgerError,
    OffsetReset,
    PublicationRecord,
    TaskBusyError,
    TaskEnd,
    TaskRow,
    check_backfill_input,
    held_error,
    iso_utc,
    lease_end_text,
    parse_stamp,
    require_keys,
    stored_fingerprints,
    task_row,
    worker_dead,
)
from .replay_records import OFFSET_RESET_KEYS
from .schema import SCHEMA_VERSION, AllowValues, Dialect, Step, migration, v1_statements
from .states import (
    ATTEMPT_TRANSITIONS,
    BACKFILL_TRANSITIONS,
    PAUSABLE,
    TASK_TRANSITIONS,
    AttemptState,
    BackfillState,
    IllegalTransitionError,
    TaskState,
    allowed_from,
    check_backfill_transition,
    check_pausable,
    finish_target,
    finished_stamp,
    refused_backfill_move,
    set_status_target,
    sources,
)

__all__ = [
    "TASK_COLUMNS",
    "Finishing",
    "SqlLedger",
    "WriteMode",
    "in_states",
    "late_report",
    "log_dropped",
    "log_lost",
]

log = logging.getLogger(__name__)

E = TypeVar("E", bound=enum.Enum)
R = TypeVar("R")
#: A DB-API connection of the backend (sqlite3's, psycopg's): ``execute`` and ``cursor``.
Db = Any

TASK_COLUMNS = (
    'task_id, model, start, "end", label, partitions, wave, status, attempts, '
    "rows_written, fingerprint, error"
)


def in_states(states: Iterable[E]) -> str:
    """``('a', 'b')`` for a ``status IN`` guard. Literals, not parameters: the enums' values are
    fixed, and the Postgres planner can match them against the partial index of ready tasks."""
    return "(" + ", ".join(sorted(f"'{s.value}'" for s in states)) + ")"


_T, _A, _B = TaskState, AttemptState, BackfillState

# A task whose dependencies are all done (params: b).
_DEPS_DONE = (
    "NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.backfill_id = d.backfill_id AND "
    "p.task_id = d.dep_id WHERE d.backfill_id = t.backfill_id AND d.task_id = t.task_id AND "
    f"p.status <> '{_T.DONE.value}')"
)
_READY = (
    f"FROM tasks t WHERE t.backfill_id = :b AND t.status = '{_T.PENDING.value}' "
    f"AND t.not_before <= :epoch AND {_DEPS_DONE} ORDER BY t.wave, t.task_id LIMIT :n"
)
_INSERT_BACKFILL = (
    'INSERT INTO backfills (id, project, project_root, selection, exclude, start, "end", as_of, '
    "reason, mode, engine, plan, models, created_by, created_at, status, updated_at, options, "
    "engine_type) VALUES (:id, :project, :project_root, :selection, :exclude, :start, :end, "
    ":as_of, :reason, :mode, :engine, :plan, :models, :created_by, :now, :status, :now, "
    ":options, :engine_type) "
    "ON CONFLICT (id) DO NOTHING"
)
_INSERT_TASK = (
    'INSERT INTO tasks (backfill_id, task_id, model, start, "end", label, partitions, wave, '
    "status) VALUES (:b, :task_id, :model, :start, :end, :label, :partitions, :wave, :status)"
)
_INSERT_DEP = "INSERT INTO task_deps (backfill_id, task_id, dep_id) VALUES (:b, :t, :d)"
_RECENT_IDS = "SELECT id FROM backfills ORDER BY created_at DESC, id DESC LIMIT :n"
_WAITING = (
    "SELECT p.task_id, p.model, p.label, p.status FROM task_deps d JOIN tasks p ON "
    "p.backfill_id = d.backfill_id AND p.task_id = d.dep_id WHERE d.backfill_id = :b AND "
    f"d.task_id = :t AND p.status <> '{_T.DONE.value}' ORDER BY p.task_id"
)
_INSERT_AUDIT = (
    "INSERT INTO audits (backfill_id, model, created_at, created_by, passed, "
    "published_fingerprints, result) VALUES (:b, :model, :created_at, :created_by, :passed, "
    ":fps, :result)"
)
_INSERT_PUBLICATION = (
    "INSERT INTO publications (backfill_id, published_at, published_by, note, forced_reason, "
    "models) VALUES (:b, :published_at, :published_by, :note, :forced_reason, :models)"
)
_INSERT_KEPT = (
    "INSERT INTO kept_versions (publication_id, backfill_id, kind, rolls_back, published_at, "
    "keep_until, models) VALUES (:pid, :b, :kind, :rolls_back, :published_at, :keep_until, "
    ":kept_models) ON CONFLICT (publication_id) DO NOTHING"
)
_KEPT_LANDED = "SELECT 1 FROM kept_versions WHERE publication_id = :pid"
_INSERT_RESET = (
    f"INSERT INTO offset_resets ({', '.join(OFFSET_RESET_KEYS)}) VALUES "
    f"({', '.join(':' + k for k in OFFSET_RESET_KEYS)}) ON CONFLICT (reset_id) DO NOTHING"
)
_INSERT_SAMPLE = (
    "INSERT INTO cost_samples (project, model, sql_hash, label, partitions, seconds, "
    "rows_written, created_at, engine_type) VALUES (:project, :model, :sql_hash, :label, "
    ":partitions, :seconds, :rows, :created_at, :engine_type)"
)
# The project's most recent backfills first (primary keys lead from them to their tasks and
# attempts), so reading history costs what a few backfills hold, however long the ledger is.
_RUNS = (
    f"SELECT {HISTORY_RUN_COLUMNS} FROM (SELECT id, models, created_at, engine_type FROM backfills "
    "WHERE project = :project ORDER BY created_at DESC, id DESC LIMIT :n) b "
    "JOIN attempts a ON a.backfill_id = b.id "
    "JOIN tasks t ON t.backfill_id = a.backfill_id AND t.task_id = a.task_id "
    f"WHERE a.status = '{_A.DONE.value}' AND t.model IN ({{models}}) "
    "ORDER BY b.created_at DESC, a.id DESC"
)
_SAMPLES = (
    f"SELECT {HISTORY_SAMPLE_COLUMNS} FROM cost_samples WHERE project = :project "
    "AND model IN ({models}) ORDER BY created_at DESC"
)


# What a task's end writes besides its status, per status.
_FINISH_SETS = {
    _T.DONE: "rows_written = :rows, fingerprint = :fp, finished_at = :now, error = NULL",
    _T.PENDING: "not_before = :epoch + :retry, error = :err",
    _T.FAILED: "error = :err, finished_at = :now",
}


@dataclass(frozen=True)
class WriteMode:
    """How :meth:`SqlLedger._write` runs: ``durable`` (synced commit), ``one_statement``."""

    durable: bool = False
    one_statement: bool = False


class SqlLedger(ABC):
    """The ledger operations over a DB-API connection; a backend supplies the connections and
    transactions (:meth:`_read`, :meth:`_run_write`) and overrides what differs."""

    dialect: ClassVar[Dialect]
    #: a row lock the statement reading a backfill's hold takes inside ``claim_task`` (Postgres:
    #: a pause then waits for the claim); SQLite's write transaction locks the whole file
    share_lock: ClassVar[str] = ""
    update_lock: ClassVar[str] = ""
    #: a JSON text column's field as text: ``{col}`` and ``{key}`` are filled in
    json_field: ClassVar[str] = "json_extract({col}, '$.{key}')"
    #: what an unversioned ``meta`` table says this is (in a refusal)
    where: str

    # -- what a backend supplies -------------------------------------------------------------
    @abstractmethod
    def _read(self, what: str, fn: Callable[[Db], R]) -> R:
        """Runs ``fn(connection)`` outside a write transaction."""

    @abstractmethod
    def _run_write(self, what: str, fn: Callable[[Db, bool], R], mode: WriteMode) -> R:
        """Runs ``fn(connection, retried)`` as :meth:`_write` says."""

    def _write(
        self,
        what: str,
        fn: Callable[[Db, bool], R],
        *,
        durable: bool = False,
        one_statement: bool = False,
    ) -> R:
        """Runs ``fn(connection, retried)`` in one write transaction (``one_statement``: ``fn``
        runs a single statement, atomic by itself). ``retried`` tells ``fn`` that an earlier try
        may have committed before its connection was lost, so a write checks first whether it
        landed. ``durable``: the commit is synced (records nothing re-creates)."""
        return self._run_write(what, fn, WriteMode(durable, one_statement))

    def _render(self, sql: str) -> Any:
        """``sql`` (``:name`` parameters, the clock words) as the driver takes it."""
        return sql

    def _clock(self, secs: float | None) -> dict[str, Any]:
        """The parameters the clock words bind (none where the database supplies them)."""
        return {}

    @abstractmethod
    def _has_table(self, db: Db, name: str) -> bool: ...

    @abstractmethod
    def _allow_values(self, db: Db, step: AllowValues) -> None:
        """Changes a CHECK's list of values (see :class:`~.schema.AllowValues`)."""

    def _lock_schema(self, db: Db) -> None:
        """Called first when the tables are created or migrated (concurrent openers wait)."""
        return  # by default the write transaction alone (SQLite: BEGIN IMMEDIATE locks the file)

    def _lock_project(self, db: Db, project: str) -> None:
        """Creates of one project take turns (an overlap check sees the other's tasks)."""
        return  # by default the write transaction alone (SQLite: BEGIN IMMEDIATE locks the file)

    def _created(self, tasks: int) -> None:
        """Called after a backfill of ``tasks`` tasks was recorded."""
        return  # nothing to do by default

    # -- helpers -------------------------------------------------------------------------------
    def _x(self, db: Db, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """Executes ``sql`` with ``params`` (plus the clock's); returns the cursor."""
        return db.execute(self._render(sql), self._p(params))

    def _p(self, params: Mapping[str, Any] | None = None, secs: float | None = None) -> Any:
        """``params`` with the clock's (``secs``: a lease's length, for ``:expires``)."""
        extra = {} if secs is None else {"secs": secs}
        return {**(params or {}), **extra, **self._clock(secs)}

    def _many(self, db: Db, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        cur = db.cursor()
        try:
            cur.executemany(self._render(sql), rows)
        finally:
            cur.close()

    def _rows(self, db: Db, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        cur = self._x(db, sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def _not_found(self, db: Db, backfill_id: str) -> NotFoundError:
        known = [str(r[0]) for r in self._x(db, _RECENT_IDS, {"n": 5}).fetchall()]
        return NotFoundError(
            f"no backfill {backfill_id!r} in {self.where}; recent: {', '.join(known) or 'none'}"
        )

    # -- schema --------------------------------------------------------------------------------
    def _stored_version(self, db: Db) -> int | None:
        """The ledger's schema version; None for a new (empty) one."""
        if not self._has_table(db, "meta"):
            return None
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            return None
        text = str(row[0])
        if not text.isdigit():
            raise LedgerError(
                f"ledger {self.where}: schema_version {text!r} is not a version number; "
                f"is {self._ledger_noun()} a backfill ledger?"
            )
        return int(text)

    def _ledger_noun(self) -> str:
        return "this"

    def _prepare(self, db: Db) -> None:
        """Creates or migrates the tables (see :mod:`.schema`); inside a write transaction."""
        self._lock_schema(db)
        version = self._stored_version(db)
        if version is not None and version > SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.where} has schema version {version}, newer than the version "
                f"{SCHEMA_VERSION} this backfill supports: a newer backfill wrote it. "
                "Upgrade backfill (pip install -U backfill) to use it; it was left "
                "unchanged"
            )
        if version is None:
            for statement in v1_statements(self.dialect):
                db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
            version = 1
        for target in range(version + 1, SCHEMA_VERSION + 1):
            step = migration(target)
            if step is None:  # pragma: no cover - MIGRATIONS lists every version
                raise LedgerError(
                    f"ledger {self.where} has schema version {version}; no migration to "
                    f"version {target} exists (supported: {SCHEMA_VERSION})"
                )
            for one in step.steps:
                self._apply(db, one)
            self._x(
                db,
                "UPDATE meta SET value = :v WHERE key = 'schema_version'",
                {"v": str(target)},
            )

    def _apply(self, db: Db, step: Step) -> None:
        if isinstance(step, AllowValues):
            if step.only in (None, self.dialect.name):
                self._allow_values(db, step)
            return
        for statement in self.dialect.statements(step):
            db.execute(statement)

    # -- backfills -----------------------------------------------------------------------------
    def create_backfill(
        self,
        record: Mapping[str, Any],
        tasks: Sequence[Mapping[str, Any]],
        *,
        check_overlap: bool = False,
    ) -> None:
        check_backfill_input(record, tasks)
        bid = record["id"]
        values = {
            **{k: record[k] for k in BACKFILL_KEYS},
            **{k: record.get(k) for k in OPTIONAL_BACKFILL_KEYS},
            "status": BackfillState.PENDING.value,
        }

        def run(db: Db, retried: bool) -> None:
            self._lock_project(db, record["project"])
            if check_overlap:  # rows of this id are a lost try's own, or refused below
                rows = [
                    r for r in self._open_rows(db, record["project"]) if r["backfill_id"] != bid
                ]
                found = find_overlaps(tasks, rows)
                if found:
                    raise overlap_error(bid, found)
            if not self._x(db, _INSERT_BACKFILL, values).rowcount:
                if retried and self._recorded_as(db, record, len(tasks)):
                    return  # the earlier try committed before its connection was lost
                raise BackfillExistsError(f"backfill {bid} is recorded already in {self.where}")
            self._insert_tasks(db, bid, tasks)

        self._write("recording a backfill", run, durable=True)
        self._created(len(tasks))

    def _insert_tasks(self, db: Db, bid: str, tasks: Sequence[Mapping[str, Any]]) -> None:
        self._many(
            db,
            _INSERT_TASK,
            [
                {
                    "b": bid,
                    "task_id": t["task_id"],
                    "model": t["model"],
                    "start": iso_utc(t["start"]),
                    "end": iso_utc(t["end"]),
                    "label": t["label"],
                    "partitions": t["partitions"],
                    "wave": t["wave"],
                    "status": TaskState.PENDING.value,
                }
                for t in tasks
            ],
        )
        self._many(
            db,
            _INSERT_DEP,
            [{"b": bid, "t": t["task_id"], "d": d} for t in tasks for d in t["depends_on"]],
        )

    def _recorded_as(self, db: Db, record: Mapping[str, Any], count: int) -> bool:
        row = self._x(
            db,
            "SELECT plan, reason, created_by, (SELECT count(*) FROM tasks WHERE "
            "backfill_id = :id) FROM backfills WHERE id = :id",
            {"id": record["id"]},
        ).fetchone()
        return row is not None and tuple(row) == (
            record["plan"],
            record["reason"],
            record["created_by"],
            count,
        )

    def _open_rows(self, db: Db, project: str) -> list[dict[str, Any]]:
        """The tasks of the project's open backfills (read inside a create's transaction too)."""
        return self._rows(db, OPEN_ROWS_SQL, {"project": project})

    def overlaps(self, project: str, tasks: Sequence[Mapping[str, Any]]) -> list[Overlap]:
        return self._read(
            "finding overlapping backfills",
            lambda db: find_overlaps(tasks, self._open_rows(db, project)),
        )

    def backfill(self, backfill_id: str) -> BackfillRecord:
        def run(db: Db) -> BackfillRecord:
            rows = self._rows(db, "SELECT * FROM backfills WHERE id = :id", {"id": backfill_id})
            if not rows:
                raise self._not_found(db, backfill_id)
            return BackfillRecord.from_row(rows[0])

        return self._read("reading a backfill", run)

    def backfills(self, limit: int = 50) -> list[BackfillRecord]:
        sql = "SELECT * FROM backfills ORDER BY created_at DESC, id DESC LIMIT :n"
        return self._read(
            "listing backfills",
            lambda db: [BackfillRecord.from_row(r) for r in self._rows(db, sql, {"n": limit})],
        )

    def latest(self) -> str | None:
        def run(db: Db) -> str | None:
            row = self._x(db, _RECENT_IDS, {"n": 1}).fetchone()
            return None if row is None else str(row[0])

        return self._read("finding the latest backfill", run)

    def set_status(
        self, backfill_id: str, status: BackfillState | str, *, finished: bool = False
    ) -> None:
        """Moves the backfill to ``status`` if the lifecycle allows it from its current one
        (:mod:`.states`); the guarded UPDATE makes check and change one step."""
        target = set_status_target(backfill_id, status)
        self._write(
            "changing a backfill's status",
            lambda db, _: self._move_backfill(
                db, backfill_id, target, allowed_from(target), finished, True
            ),
            durable=True,
        )

    def _move_backfill(
        self,
        db: Db,
        backfill_id: str,
        target: BackfillState,
        from_states: list[BackfillState],
        finished: bool,
        stay_ok: bool,
    ) -> None:
        stamp = {"now": ":now", "clear": "NULL", "keep": "finished_at"}[
            finished_stamp(target, finished)
        ]
        cur = self._x(
            db,
            f"UPDATE backfills SET status = :status, updated_at = :now, finished_at = {stamp} "
            f"WHERE id = :id AND status IN {in_states(from_states)}",
            {"status": target.value, "id": backfill_id},
        )
        if cur.rowcount:
            return
        row = self._x(db, "SELECT status FROM backfills WHERE id = :id", {"id": backfill_id})
        found = row.fetchone()
        if found is None:
            raise self._not_found(db, backfill_id)
        refused_backfill_move(backfill_id, found[0], target, stay_ok)

    # -- operator controls ---------------------------------------------------------------------
    def _hold(self, db: Db, backfill_id: str, lock: bool = False) -> tuple[str, Any, str | None]:
        row = self._x(
            db,
            "SELECT status, paused_at, paused_by FROM backfills WHERE id = :id"
            + (self.share_lock if lock else ""),
            {"id": backfill_id},
        ).fetchone()
        if row is None:
            raise self._not_found(db, backfill_id)
        return str(row[0]), row[1], row[2]

    def _refuse_held(self, db: Db, backfill_id: str) -> None:
        """For ``claim_task``: BackfillHeldError while the backfill is paused or cancelled (the
        row stays share-locked where the backend locks rows, so a pause waits for this claim)."""
        error = held_error(backfill_id, *self._hold(db, backfill_id, lock=True))
        if error is not None:
            raise error

    def set_paused(self, backfill_id: str, paused: bool, by: str) -> None:
        sql = (
            "UPDATE backfills SET paused_at = :now, paused_by = :by, updated_at = :now "
            f"WHERE id = :id AND paused_at IS NULL AND status IN {in_states(PAUSABLE)}"
            if paused
            else "UPDATE backfills SET paused_at = NULL, paused_by = NULL, updated_at = :now "
            "WHERE id = :id AND paused_at IS NOT NULL"
        )

        def run(db: Db, retried: bool) -> None:
            if self._x(db, sql, {"by": by, "id": backfill_id}).rowcount == 1:
                return
            status, paused_at, _ = self._hold(db, backfill_id)
            if retried and (paused_at is not None) == paused:
                return  # the earlier try committed
            check_pausable(backfill_id, status, paused_at is not None, paused)

        self._write("pausing or resuming a backfill", run)

    def cancel(self, backfill_id: str, reason: str, by: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInputError(
                f"cancelling backfill {backfill_id} needs a reason (who "
                "reads its record will ask), e.g. reason='wrong period'"
            )
        froms = sources(BACKFILL_TRANSITIONS, _B.CANCELLED)
        sql = (
            "UPDATE backfills SET status = :status, cancel_reason = :reason, cancelled_by = :by, "
            "paused_at = NULL, paused_by = NULL, updated_at = :now, finished_at = :now "
            f"WHERE id = :id AND status IN {in_states(froms)}"
        )
        values = {"status": _B.CANCELLED.value, "reason": reason.strip(), "by": by}

        def run(db: Db, retried: bool) -> None:
            if self._x(db, sql, {**values, "id": backfill_id}).rowcount == 1:
                return
            status = self._hold(db, backfill_id)[0]
            if status == _B.CANCELLED:
                if retried:
                    return  # the earlier try committed
                raise IllegalTransitionError(f"backfill {backfill_id} is cancelled already")
            check_backfill_transition(backfill_id, status, _B.CANCELLED.value)

        self._write("cancelling a backfill", run)

    def set_options(self, backfill_id: str, options: Mapping[str, Any]) -> None:
        text = json.dumps(dict(options), sort_keys=True)

        def run(db: Db, _: bool) -> None:
            sql = "UPDATE backfills SET options = :options, updated_at = :now WHERE id = :id"
            if self._x(db, sql, {"options": text, "id": backfill_id}).rowcount != 1:
                raise self._not_found(db, backfill_id)

        self._write("recording run options", run, one_statement=True)

    def ready(self, backfill_id: str, limit: int) -> list[TaskRow]:
        if limit <= 0:
            return []

        def run(db: Db) -> list[TaskRow]:
            if held_error(backfill_id, *self._hold(db, backfill_id)) is not None:
                return []
            sql = f"SELECT {_cols('t')} {_READY}"
            return [task_row(r) for r in self._x(db, sql, {"b": backfill_id, "n": limit})]

        return self._read("listing ready tasks", run)

    # -- tasks ---------------------------------------------------------------------------------
    def tasks(self, backfill_id: str) -> list[TaskRow]:
        def run(db: Db) -> list[TaskRow]:
            deps: dict[int, list[int]] = {}
            for tid, dep in self._x(
                db,
                "SELECT task_id, dep_id FROM task_deps WHERE backfill_id = :b",
                {"b": backfill_id},
            ):
                deps.setdefault(int(tid), []).append(int(dep))
            rows = self._x(
                db,
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE backfill_id = :b ORDER BY task_id",
                {"b": backfill_id},
            ).fetchall()
            return [task_row(r, deps.get(int(r[0]), ())) for r in rows]

        return self._read("reading tasks", run)

    def attempts(self, backfill_id: str) -> list[AttemptRecord]:
        sql = "SELECT * FROM attempts WHERE backfill_id = :b ORDER BY id"
        return self._read(
            "reading attempts",
            lambda db: [AttemptRecord.from_row(r) for r in self._rows(db, sql, {"b": backfill_id})],
        )

    def _task(self, db: Db, backfill_id: str, task_id: int) -> TaskRow:
        r = self._x(
            db,
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE backfill_id = :b AND task_id = :t",
            {"b": backfill_id, "t": task_id},
        ).fetchone()
        return task_row(r)

    def _drop_dead_leases(self, db: Db, backfill_id: str) -> int:
        """Ends the leases of gone workers (expired, or dead processes of this host): their
        attempts become abandoned, their tasks pending (claimable again). Returns how many."""
        leases = self._x(
            db,
            "SELECT task_id, worker, attempt_id, expires_at < :clock FROM leases "
            "WHERE backfill_id = :b",
            {"b": backfill_id},
        ).fetchall()
        dropped = 0
        for task_id, worker, attempt_id, expired in leases:
            if not expired and not worker_dead(worker):
                continue
            dropped += 1
            log_dropped(backfill_id, task_id, worker, expired=bool(expired))
            key = {"b": backfill_id, "t": task_id}
            self._x(db, "DELETE FROM leases WHERE backfill_id = :b AND task_id = :t", key)
            self._x(
                db,
                f"UPDATE attempts SET status = '{_A.ABANDONED.value}', finished_at = :now, "
                f"error = :error WHERE id = :a AND status IN "
                f"{in_states(sources(ATTEMPT_TRANSITIONS, _A.ABANDONED))}",
                {"a": attempt_id, "error": f"worker {worker} lost its lease"},
            )
            self._x(
                db,
                f"UPDATE tasks SET status = '{_T.PENDING.value}' WHERE backfill_id = :b AND "
                f"task_id = :t AND status IN "
                f"{in_states(sources(TASK_TRANSITIONS, _T.PENDING, among=[_T.RUNNING]))}",
                key,
            )
        return dropped

    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Claims up to ``limit`` ready tasks (pending, due, every dependency done)."""
        if limit <= 0:
            return []

        def run(db: Db, _: bool) -> list[Claim]:
            if held_error(backfill_id, *self._hold(db, backfill_id)) is not None:
                return []  # paused or cancelled: running tasks finish, nothing new starts
            self._drop_dead_leases(db, backfill_id)
            ready = self._x(db, f"SELECT t.task_id {_READY}", {"b": backfill_id, "n": limit})
            start = {"b": backfill_id, "w": worker, "secs": float(lease_seconds), "tok": None}
            return [
                self._start(db, {**start, "t": task_id}, [_T.PENDING])
                for (task_id,) in ready.fetchall()
            ]

        return self._write("claiming tasks", run)

    def _start(self, db: Db, params: Mapping[str, Any], from_states: list[TaskState]) -> Claim:
        """Marks task ``t`` running, records a new attempt and leases it to worker ``w`` for
        ``secs`` seconds (params ``b``, ``t``, ``w``, ``secs``, ``tok``)."""
        values = self._p(params, secs=params["secs"])  # one stamp for all three statements
        render = self._render
        row = db.execute(
            render(
                f"UPDATE tasks SET status = '{_T.RUNNING.value}', attempts = attempts + 1, "
                "not_before = 0, started_at = :now, error = NULL WHERE backfill_id = :b AND "
                f"task_id = :t AND status IN "
                f"{in_states(sources(TASK_TRANSITIONS, _T.RUNNING, among=from_states))} "
                "RETURNING attempts"
            ),
            values,
        ).fetchone()
        if row is None:  # the caller checked the state in this transaction: a bug if reached
            raise IllegalTransitionError(
                f"task {params['t']} of {params['b']} is not "
                f"{' or '.join(s.value for s in from_states)}"
            )
        attempt = int(row[0])
        (attempt_id,) = db.execute(
            render(
                "INSERT INTO attempts (backfill_id, task_id, attempt, worker, status, started_at) "
                f"VALUES (:b, :t, :attempt, :w, '{_A.RUNNING.value}', :now) RETURNING id"
            ),
            {**values, "attempt": attempt},
        ).fetchone()
        db.execute(
            render(
                "INSERT INTO leases (backfill_id, task_id, worker, attempt_id, expires_at) "
                "VALUES (:b, :t, :w, :a, :expires)"
            ),
            {**values, "a": int(attempt_id)},
        )
        return Claim(self._task(db, params["b"], params["t"]), attempt, int(attempt_id))

    def _reclaimed(self, db: Db, token: str) -> list[Claim]:
        """The claims an earlier try of this call committed (found by its token)."""
        return []

    def claim_task(
        self, backfill_id: str, task_id: int, worker: str, lease_seconds: float
    ) -> Claim | TaskRow:
        """Claims exactly task ``task_id`` (an orchestrator such as Airflow decides what runs
        where). Returns the :class:`Claim`, or the task's row when it is already done.

        A failed task is claimed again (the orchestrator decided to retry it). Raises
        :class:`TaskBusyError` while another live worker holds its lease, and
        :class:`~backfill.errors.ConflictError` when a dependency is not done."""
        params: dict[str, Any] = {
            "b": backfill_id,
            "t": task_id,
            "w": worker,
            "secs": float(lease_seconds),
            "tok": uuid.uuid4().hex,
        }

        def run(db: Db, retried: bool) -> Claim | TaskRow:
            if retried and (again := self._reclaimed(db, params["tok"])):
                return again[0]
            self._refuse_held(db, backfill_id)
            self._drop_dead_leases(db, backfill_id)
            return self._claim_one(db, params)

        return self._write("claiming a task", run)

    def _claim_one(self, db: Db, params: Mapping[str, Any]) -> Claim | TaskRow:
        backfill_id, task_id = params["b"], params["t"]
        key = {"b": backfill_id, "t": task_id}
        row = self._x(
            db,
            "SELECT status FROM tasks WHERE backfill_id = :b AND task_id = :t" + self.update_lock,
            key,
        ).fetchone()
        if row is None:
            (count,) = self._x(
                db, "SELECT count(*) FROM tasks WHERE backfill_id = :b", key
            ).fetchone() or (0,)
            raise NotFoundError(
                f"backfill {backfill_id} has no task {task_id!r} (task ids are 0..{int(count) - 1})"
                if count
                else f"no backfill {backfill_id!r} (or it has no tasks) in {self.where}"
            )
        status = TaskState(row[0])
        if status is TaskState.DONE:
            return self._task(db, backfill_id, task_id)
        if status is TaskState.RUNNING:
            held = self._x(
                db,
                "SELECT worker, expires_at FROM leases WHERE backfill_id = :b AND task_id = :t",
                key,
            ).fetchone()
            who, until = (held[0], lease_end_text(held[1])) if held else ("?", "?")
            raise TaskBusyError(
                f"task {task_id} of {backfill_id} is running in worker {who} "
                f"(lease until {until} UTC)"
            )
        waiting = self._x(db, _WAITING, key).fetchall()
        if waiting:
            shown = ", ".join(f"{m} {lbl} (task {t}, {s})" for t, m, lbl, s in waiting[:5])
            more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
            raise ConflictError(
                f"task {task_id} of {backfill_id} depends on tasks not done: "
                f"{shown}{more}; run them first"
            )
        return self._start(db, params, [TaskState.PENDING, TaskState.FAILED])

    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        """Extends the worker's leases on ``task_ids``; returns how many it still held."""
        if not task_ids:
            return 0
        ids = {f"t{i}": int(t) for i, t in enumerate(task_ids)}
        sql = (
            "UPDATE leases SET expires_at = :expires WHERE backfill_id = :b AND worker = :w "
            f"AND task_id IN ({', '.join(':' + k for k in ids)})"
        )

        def run(db: Db, _: bool) -> int:
            values = self._p({"b": backfill_id, "w": worker, **ids}, secs=float(lease_seconds))
            return int(db.execute(self._render(sql), values).rowcount)

        return self._write("renewing leases", run, one_statement=True)

    def finish(
        self,
        claim: Claim,
        backfill_id: str,
        worker: str,
        end: TaskEnd,
    ) -> FinishOutcome:
        """Records an attempt's end. Returns the task's new status (pending when retried), or
        ``"lost"`` when the attempt no longer held the task's lease."""
        return self._finish(Finishing(claim, backfill_id, worker, end))

    def _finish(self, f: Finishing) -> FinishOutcome:
        """Ends the attempt in a few statements of one transaction (Postgres: one statement)."""
        key = {"b": f.backfill_id, "t": f.task_id, "w": f.worker, "a": f.claim.attempt_id}
        end = f.end

        def run(db: Db, _: bool) -> FinishOutcome:
            held = self._x(
                db,
                "SELECT 1 FROM leases WHERE backfill_id = :b AND task_id = :t AND worker = :w "
                "AND attempt_id = :a",
                key,
            ).fetchone()
            if held is None:
                self._note_late(db, f.claim, end.ok, end.seconds)
                log_lost(f.backfill_id, f.claim, f.worker)
                return "lost"
            self._x(db, "DELETE FROM leases WHERE backfill_id = :b AND task_id = :t", key)
            ended = AttemptState.DONE if end.ok else AttemptState.FAILED
            self._x(
                db,
                "UPDATE attempts SET status = :ended, finished_at = :now, seconds = :secs, "
                "rows_written = :rows, rows_deleted = :del, fingerprint = :fp, error = :err "
                f"WHERE id = :a AND status IN {in_states(sources(ATTEMPT_TRANSITIONS, ended))}",
                {
                    **key,
                    "ended": ended.value,
                    "secs": end.seconds,
                    "rows": end.rows,
                    "del": end.deleted,
                    "fp": f.fingerprint,
                    "err": end.error,
                },
            )
            sets = _FINISH_SETS[f.target]
            cur = self._x(
                db,
                f"UPDATE tasks SET status = :target, {sets} WHERE backfill_id = :b AND "
                f"task_id = :t AND status IN "
                f"{in_states(sources(TASK_TRANSITIONS, f.target, among=[_T.RUNNING]))}",
                {
                    **key,
                    "target": f.target.value,
                    "rows": end.rows,
                    "fp": f.fingerprint,
                    "err": end.error,
                    "retry": end.retry_in,
                },
            )
            if cur.rowcount != 1:  # a held lease means a running task: a bug if reached
                raise IllegalTransitionError(f.bug)
            return f.outcome

        return self._write("recording a task's end", run)

    def _note_late(self, db: Db, claim: Claim, ok: bool, seconds: float) -> None:
        """The lease was dropped (the attempt is abandoned, final) and the task may be someone
        else's now: keep what this worker reports for the record only."""
        self._x(
            db,
            "UPDATE attempts SET error = coalesce(error, '') || :late WHERE id = :a "
            f"AND status = '{_A.ABANDONED.value}'",
            {"a": claim.attempt_id, "late": late_report(ok, seconds)},
        )

    def reset_failed(self, backfill_id: str) -> int:
        """Makes failed tasks pending again (a resume gives them fresh attempts)."""
        froms = sources(TASK_TRANSITIONS, _T.PENDING, among=[_T.FAILED])
        sql = (
            f"UPDATE tasks SET status = '{_T.PENDING.value}', attempts = 0, not_before = 0 "
            f"WHERE backfill_id = :b AND status IN {in_states(froms)}"
        )
        return self._write(
            "resetting failed tasks",
            lambda db, _: int(self._x(db, sql, {"b": backfill_id}).rowcount),
            one_statement=True,
        )

    def live_workers(self, backfill_id: str) -> set[str]:
        """Workers holding an unexpired lease on one of the backfill's tasks (minus dead
        processes on this host)."""
        sql = "SELECT DISTINCT worker FROM leases WHERE backfill_id = :b AND expires_at >= :clock"
        rows = self._read(
            "listing live workers", lambda db: self._x(db, sql, {"b": backfill_id}).fetchall()
        )
        return {str(w) for (w,) in rows if not worker_dead(str(w))}

    # -- audits and publications ---------------------------------------------------------------
    def record_audit(
        self,
        backfill_id: str,
        audit_id: str,
        created_at: str,
        created_by: str,
        models: Sequence[Mapping[str, Any]],
    ) -> None:
        """Records one audit: per model ``model``, ``passed``, ``published_fingerprints``
        (label -> PartitionFingerprint) and ``result`` (the JSON-able audit of the model)."""
        for m in models:
            require_keys(m, AUDIT_KEYS, f"audit {audit_id} model row")
        rows = [
            {
                "b": backfill_id,
                "model": m["model"],
                "created_at": created_at,
                "created_by": created_by,
                "passed": int(bool(m["passed"])),
                "fps": stored_fingerprints(m["published_fingerprints"]),
                "result": json.dumps({"audit_id": audit_id, **m["result"]}, default=str),
            }
            for m in models
        ]
        landed = (
            "SELECT 1 FROM audits WHERE backfill_id = :b AND "
            + self.json_field.format(col="result", key="audit_id")
            + " = :audit LIMIT 1"
        )

        def run(db: Db, retried: bool) -> None:
            key = {"b": backfill_id, "audit": audit_id}
            if (
                self._x(
                    db, "SELECT 1 FROM backfills WHERE id = :b" + self.share_lock, key
                ).fetchone()
                is None
            ):
                raise self._not_found(db, backfill_id)
            if retried and self._x(db, landed, key).fetchone():
                return  # the earlier try committed
            self._many(db, _INSERT_AUDIT, rows)

        self._write("recording an audit", run, durable=True)

    def record_publication(
        self,
        backfill_id: str,
        publication: Mapping[str, Any],
        kept: KeptVersion | None = None,
    ) -> None:
        """Records a publication (``published_at``, ``published_by``, ``note``,
        ``forced_reason``, ``publication_id``, ``models``: model -> changed partition labels)
        and what it kept (``kept``, when given), and marks the done backfill published, in one
        transaction."""
        require_keys(publication, PUBLICATION_KEYS, f"publication of {backfill_id}")
        pid = publication["publication_id"]
        values = {
            "b": backfill_id,
            "pid": pid,
            **{
                k: publication[k] for k in ("published_at", "published_by", "note", "forced_reason")
            },
            "models": json.dumps({"publication_id": pid, "models": publication["models"]}),
        }
        if kept is not None:
            kept_values = _kept_values(kept, "publish")
            mismatched = [
                f"{name} {mine!r} (the publication's: {theirs!r})"
                for name, mine, theirs in (
                    ("publication_id", kept.publication_id, pid),
                    ("backfill_id", kept.backfill_id, backfill_id),
                )
                if mine != theirs
            ]
            if mismatched:
                raise InvalidInputError(
                    f"publication {pid} of {backfill_id}: its kept version has "
                    f"{', '.join(mismatched)}; expected the publication's own"
                )
            values.update(kept_values)
        landed = (
            "SELECT 1 FROM publications WHERE backfill_id = :b AND "
            + self.json_field.format(col="models", key="publication_id")
            + " = :pid LIMIT 1"
        )

        def run(db: Db, retried: bool) -> None:
            if retried and self._x(db, landed, values).fetchone():
                return  # the earlier try committed (the kept version with it)
            done = sources(BACKFILL_TRANSITIONS, _B.PUBLISHED)
            self._move_backfill(db, backfill_id, _B.PUBLISHED, done, False, False)
            self._x(db, _INSERT_PUBLICATION, values)
            if kept is not None:
                self._insert_kept(db, values)

        self._write("recording a publication", run, durable=True)

    def _insert_kept(self, db: Db, values: Mapping[str, Any]) -> None:
        """Inserts a kept version (:func:`_kept_values`); ConflictError when its id is taken
        (the transaction then rolls back whatever else it wrote)."""
        if not self._x(db, _INSERT_KEPT, values).rowcount:
            raise ConflictError(
                f"a kept version of {values['pid']} is recorded already in {self.where}; "
                "publication and rollback ids are unique"
            )

    # -- kept versions and rollbacks (schema version 7; see backfill.versions) ------------------
    def record_rollback(self, kept: KeptVersion) -> None:
        """Records the rollback ``kept`` and marks the publication it took back rolled back by
        it, in one transaction: the taken-back row is locked (Postgres: ``FOR UPDATE``; SQLite's
        write transaction locks the file), so of two rollbacks of it one is refused."""
        values = _kept_values(kept, "rollback")
        rid, taken = kept.publication_id, kept.rolls_back
        lookup = (
            "SELECT rolled_back_by, backfill_id FROM kept_versions WHERE publication_id = :taken"
            + self.update_lock
        )
        mark = (
            "UPDATE kept_versions SET rolled_back_by = :pid WHERE publication_id = :taken "
            "AND rolled_back_by IS NULL"
        )

        def run(db: Db, retried: bool) -> None:
            if retried and self._x(db, _KEPT_LANDED, values).fetchone():
                return  # the earlier try committed
            row = self._x(db, lookup, values).fetchone()
            if row is None:
                raise NotFoundError(
                    f"rollback {rid}: no publication {taken!r} is recorded with what it kept in "
                    f"{self.where}; `backfill changelog` lists publications"
                )
            by, of = row
            if by is not None:
                raise ConflictError(f"publication {taken} was already rolled back by {by}")
            if of != kept.backfill_id:
                raise InvalidInputError(
                    f"rollback {rid}: backfill_id {kept.backfill_id!r}, but publication {taken} "
                    f"is of backfill {of!r}; expected the backfill it took back"
                )
            self._insert_kept(db, values)
            if self._x(db, mark, values).rowcount != 1:  # the row is locked: a bug if reached
                raise ConflictError(f"publication {taken} was rolled back meanwhile")

        self._write("recording a rollback", run, durable=True)

    def kept_version(self, publication_id: str) -> KeptVersion:
        published = (
            "SELECT 1 FROM publications WHERE "
            + self.json_field.format(col="models", key="publication_id")
            + " = :pid LIMIT 1"
        )

        def run(db: Db) -> KeptVersion:
            key = {"pid": publication_id}
            rows = self._rows(db, "SELECT * FROM kept_versions WHERE publication_id = :pid", key)
            if rows:
                return KeptVersion.from_row(rows[0])
            if self._x(db, published, key).fetchone():
                raise NotFoundError(
                    f"publication {publication_id} kept nothing the ledger knows of: it was "
                    "published before publications kept what they replaced"
                )
            raise NotFoundError(
                f"no publication {publication_id!r} in {self.where}; `backfill changelog` "
                "lists them"
            )

        return self._read("reading a kept version", run)

    def kept_versions(self, backfill_id: str | None = None) -> list[KeptVersion]:
        sql = (
            "SELECT * FROM kept_versions"
            + (" WHERE backfill_id = :b" if backfill_id is not None else "")
            + " ORDER BY published_at, publication_id"
        )
        return self._read(
            "reading kept versions",
            lambda db: [KeptVersion.from_row(r) for r in self._rows(db, sql, {"b": backfill_id})],
        )

    def mark_dropped(self, publication_id: str, dropped_at: str) -> None:
        """Stamps ``dropped_at`` on the kept version (the first stamp stays)."""
        parse_stamp(dropped_at, f"publication {publication_id}: dropped_at")
        sql = (
            "UPDATE kept_versions SET dropped_at = coalesce(dropped_at, :at) "
            "WHERE publication_id = :pid"
        )
        changed = self._write(
            "recording a dropped kept version",
            lambda db, _: int(self._x(db, sql, {"at": dropped_at, "pid": publication_id}).rowcount),
            one_statement=True,
        )
        if not changed:
            raise NotFoundError(
                f"no publication {publication_id!r} in {self.where}; `backfill changelog` "
                "lists them"
            )

    def audits(self, backfill_id: str) -> list[AuditRecord]:
        sql = "SELECT * FROM audits WHERE backfill_id = :b ORDER BY id"
        return self._read(
            "reading audits",
            lambda db: [AuditRecord.from_row(r) for r in self._rows(db, sql, {"b": backfill_id})],
        )

    def publications(self, backfill_id: str | None = None) -> list[PublicationRecord]:
        sql = "SELECT * FROM publications" + (" WHERE backfill_id = :b" if backfill_id else "")
        return self._read(
            "reading publications",
            lambda db: [
                PublicationRecord.from_row(r)
                for r in self._rows(db, sql + " ORDER BY id", {"b": backfill_id})
            ],
        )

    # -- replays from Kafka (schema version 4; see .replay_records) ------------------------------
    def record_attempt_detail(self, backfill_id: str, attempt_id: int, detail: str) -> None:
        """Keeps ``detail`` (JSON text: what a landing attempt read) with the attempt (a later
        call replaces it); NotFoundError when the backfill has no such attempt."""
        sql = "UPDATE attempts SET detail = :detail WHERE backfill_id = :b AND id = :a"
        changed = self._write(
            "recording an attempt's detail",
            lambda db, _: int(
                self._x(db, sql, {"detail": detail, "b": backfill_id, "a": attempt_id}).rowcount
            ),
            one_statement=True,
        )
        if not changed:
            raise NotFoundError(f"backfill {backfill_id!r} has no attempt {attempt_id}")

    def record_offset_reset(self, record: Mapping[str, Any]) -> None:
        """Records one consumer group offset reset (``OFFSET_RESET_KEYS``); recording the same
        ``reset_id`` again changes nothing."""
        require_keys(record, OFFSET_RESET_KEYS, "offset reset")
        values = {k: record[k] for k in OFFSET_RESET_KEYS}
        self._write(
            "recording an offset reset",
            lambda db, _: self._x(db, _INSERT_RESET, values),
            one_statement=True,
        )

    def offset_resets(self, group: str, topic: str | None = None) -> list[OffsetReset]:
        """The group's offset resets (of one topic, or all), oldest first."""
        # The cast types the parameter: Postgres cannot infer the type of a bare ``$2 IS NULL``.
        sql = (
            "SELECT * FROM offset_resets WHERE group_id = :g AND "
            "(CAST(:topic AS TEXT) IS NULL OR topic = :topic) ORDER BY created_at, reset_id"
        )
        return self._read(
            "reading offset resets",
            lambda db: [
                OffsetReset.from_row(r) for r in self._rows(db, sql, {"g": group, "topic": topic})
            ],
        )

    # -- costs (schema version 6; see .cost_records) --------------------------------------------
    def record_cost_samples(self, project: str, samples: Sequence[Mapping[str, Any]]) -> None:
        """Keeps the sample runs (``COST_SAMPLE_KEYS``) of one ``backfill estimate`` of
        ``project``, in one step."""
        rows = sample_rows(project, samples)
        if rows:
            # A retry after an unknown COMMIT outcome may record the samples twice; the medians
            # read from them do not change.
            self._write(
                "recording cost samples", lambda db, _: self._many(db, _INSERT_SAMPLE, rows)
            )

    def cost_history(
        self, project: str, models: Sequence[str], backfills: int = 20
    ) -> list[CostMeasure]:
        """The measurements of ``models``: the done attempts of their tasks in ``project``'s
        ``backfills`` most recent backfills (newest backfill first), then the sample runs of
        ``backfill estimate`` (newest first)."""
        if not models:
            return []
        names = {f"m{i}": m for i, m in enumerate(models)}
        marks = ", ".join(":" + k for k in names)
        params = {"project": project, "n": int(backfills), **names}
        runs = self._read(
            "reading cost history",
            lambda db: self._x(db, _RUNS.format(models=marks), params).fetchall(),
        )
        samples = self._read(
            "reading cost samples",
            lambda db: self._x(db, _SAMPLES.format(models=marks), params).fetchall(),
        )
        return history(runs, samples)


@dataclass(frozen=True)
class Finishing:
    """One attempt's end on its way into the ledger (:meth:`SqlLedger.finish`), with what every
    backend derives from it alike: the task's new state and the stored fingerprint."""

    claim: Claim
    backfill_id: str
    worker: str
    end: TaskEnd

    @property
    def task_id(self) -> int:
        return self.claim.task.task_id

    @property
    def target(self) -> TaskState:
        return finish_target(self.end.ok, self.end.retry_in)

    @property
    def outcome(self) -> FinishOutcome:
        return self.target.value  # type: ignore[return-value]  # done, pending or failed

    @property
    def fingerprint(self) -> str | None:
        """The task's fingerprint as the ledger stores it (its one encoding, on every backend)."""
        fp = self.end.fingerprint
        return None if fp is None else fp.encode()

    @property
    def bug(self) -> str:
        """The message of a finish that finds its task not running (a bug if reached)."""
        return (
            f"task {self.task_id} of {self.backfill_id} is not running; it cannot become "
            f"{self.target}"
        )


def _kept_values(kept: KeptVersion, kind: str) -> dict[str, Any]:
    """The parameters inserting ``kept`` (``:pid``, ``:b``, ...); InvalidInputError unless it is
    a new kept version of ``kind``."""
    if not isinstance(kept, KeptVersion):
        raise InvalidInputError(f"kept version {kept!r}: expected a KeptVersion")
    if kept.kind != kind:
        raise InvalidInputError(
            f"kept version {kept.publication_id}: kind {kept.kind!r}; expected {kind!r} here"
            + (" (record_rollback records rollbacks)" if kind == "publish" else "")
        )
    if kind == "rollback" and not kept.rolls_back:
        raise InvalidInputError(
            f"rollback {kept.publication_id}: rolls_back {kept.rolls_back!r}; expected the id "
            "of the publication it took back"
        )
    if kept.rolled_back_by is not None or kept.dropped_at is not None:
        raise InvalidInputError(
            f"kept version {kept.publication_id}: rolled_back_by {kept.rolled_back_by!r}, "
            f"dropped_at {kept.dropped_at!r}; a new one has neither (record_rollback and "
            "mark_dropped set them)"
        )
    return {
        "pid": kept.publication_id,
        "b": kept.backfill_id,
        "kind": kept.kind,
        "rolls_back": kept.rolls_back,
        "taken": kept.rolls_back,
        "published_at": kept.published_at,
        "keep_until": kept.keep_until,
        "kept_models": kept.models_json(),
    }


def _cols(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in TASK_COLUMNS.split(","))


def late_report(ok: bool, seconds: float) -> str:
    """What a worker that lost its lease reported, kept on its abandoned attempt."""
    return (
        f"; reported {'success' if ok else 'failure'} after {seconds:.1f}s, after losing the lease"
    )


def log_dropped(backfill_id: str, task_id: int, worker: str, *, expired: bool) -> None:
    """Logs that a claim dropped ``worker``'s lease on a task (expired, or its process gone)."""
    log.warning(
        "backfill %s: task %s: worker %s lost its lease (%s); the task is claimable again",
        backfill_id,
        task_id,
        worker,
        "expired" if expired else "process gone",
    )


def log_lost(backfill_id: str, claim: Claim, worker: str) -> None:
    """Logs that ``claim``'s attempt ended after its lease was lost (its result is not used)."""
    log.warning(
        "backfill %s: task %s attempt %d of worker %s ended after its lease "
        "was lost; its result is not used",
        backfill_id,
        claim.task.task_id,
        claim.attempt,
        worker,
    )
