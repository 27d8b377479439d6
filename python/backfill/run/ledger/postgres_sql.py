"""The Postgres ledger's statements (see :mod:`.postgres`).

Every status write lists the states it may start from, derived from :mod:`.states`
(``status IN (...)``), so check and change are one step in the database. Each write that must
land whole is ONE statement (data-modifying CTEs), which is one transaction and one round trip;
``ledger_fail`` (a function of the ledger's schema, :mod:`.schema`) aborts a statement whose
own check fails. The statements both backends share are :mod:`.sql`'s.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from .postgres_fast import FLOAT8, INT4, INT8, TEXT, positional
from .records import iso_utc
from .sql import TASK_COLUMNS
from .states import (
    ATTEMPT_TRANSITIONS,
    TASK_TRANSITIONS,
    AttemptState,
    BackfillState,
    TaskState,
    sources,
)

__all__ = [
    "CLAIMED_BY_TOKEN",
    "CLAIM_ONE",
    "CLAIM_PARAMS",
    "CLAIM_TASK",
    "CLAIM_TASK_PARAMS",
    "CLAIM_TASK_PREPARED",
    "CLAIM_TASK_TYPES",
    "CLAIM_TYPES",
    "COPY_DEPS",
    "COPY_TASKS",
    "DROP_DEAD",
    "DROP_EXPIRED",
    "FINISH_PARAMS",
    "FINISH_TYPES",
    "LOCAL_WORKERS",
    "NOW",
    "NO_FLOOR",
    "TASK_COLUMNS",
    "claim",
    "finish",
    "task_copy_row",
]

E = TypeVar("E", bound=enum.Enum)

#: The database's clock as the ledger's stamps (ISO 8601 UTC with milliseconds, like utcnow()).
NOW = "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"+00:00\"')"


def _in(states: Iterable[E]) -> str:
    # Literals, not parameters: the enums' values are fixed, and the planner can match them
    # against the partial index of ready tasks.
    return "(" + ", ".join(f"'{s.value}'" for s in states) + ")"


T, A = TaskState, AttemptState

COPY_TASKS = (
    b'COPY tasks (backfill_id, task_id, model, start, "end", label, partitions, wave, '
    b"status) FROM STDIN"
)
COPY_DEPS = b"COPY task_deps (backfill_id, task_id, dep_id) FROM STDIN"


def _drop(which: str) -> bytes:
    """Ends the leases of ``which`` (a condition on ``leases``; params: b and its own): their
    attempts become abandoned, their tasks pending. Returns (task_id, worker, expired)."""
    return f"""
WITH dead AS (
    DELETE FROM leases WHERE backfill_id = %(b)s AND ({which})
    RETURNING task_id, worker, attempt_id, expires_at < clock_timestamp() AS expired),
abandoned AS (
    UPDATE attempts a SET status = '{A.ABANDONED.value}', finished_at = {NOW},
        error = 'worker ' || dead.worker || ' lost its lease'
    FROM dead WHERE a.id = dead.attempt_id
        AND a.status IN {_in(sources(ATTEMPT_TRANSITIONS, A.ABANDONED))}
    RETURNING a.id),
freed AS (
    UPDATE tasks t SET status = '{T.PENDING.value}' FROM dead
    WHERE t.backfill_id = %(b)s AND t.task_id = dead.task_id
        AND t.status IN {_in(sources(TASK_TRANSITIONS, T.PENDING, among=[T.RUNNING]))}
    RETURNING t.task_id)
SELECT task_id, worker, expired FROM dead ORDER BY task_id""".encode()


#: Expired leases (params: b): a range of the index of expiries (schema version 9). The
#: statement's clock, not clock_timestamp(): a volatile function is no index bound, and the leases
#: table (a row per task in flight, and one dead row per task ended since the last VACUUM) would
#: be read whole.
DROP_EXPIRED = _drop("expires_at < statement_timestamp()")
#: Expired leases and those of dead processes of this host (params: b, dead): rare, so it may
#: read every lease of the backfill.
DROP_DEAD = _drop("expires_at < clock_timestamp() OR worker = ANY(%(dead)s::text[])")

#: The workers of this host holding leases of the backfill (params: b, host).
LOCAL_WORKERS = (
    b"SELECT DISTINCT worker FROM leases "
    b"WHERE backfill_id = %(b)s AND starts_with(worker, %(host)s)"
)

#: Where a claim's scan of the pending tasks starts (params: b, gen, fw, ft): the floor (fw, ft)
#: the claimer saw when the backfill's requeue count (schema.py's requeues) was ``gen``, or the
#: first task when the count has changed since (a task went back to pending, perhaps below the
#: floor). Every task below a floor was not pending then, and none became pending again while
#: the count stays: the scan skips the index entries of the tasks claimed before, which VACUUM
#: alone removes (a btree entry of a tuple that is no longer pending stays until then; a claim
#: starting at the first one walked every task claimed since the last VACUUM). One row: the
#: count now (gen), and the bound (w, t).
_BOUND = """
bound AS MATERIALIZED (
    SELECT gen, CASE WHEN gen = %(gen)s::bigint THEN %(fw)s::integer ELSE -2147483648 END AS w,
        CASE WHEN gen = %(gen)s::bigint THEN %(ft)s::integer ELSE -2147483648 END AS t
    FROM (SELECT coalesce(max(count), 0) AS gen FROM requeues WHERE backfill_id = %(b)s) r),
"""
#: A row comparison of bound's values: an index bound (the btree starts there).
_FLOOR = "(t.wave, t.task_id) >= ((SELECT w FROM bound), (SELECT t FROM bound))"

_READY = f"""
    SELECT t.task_id FROM tasks t
    WHERE t.backfill_id = %(b)s AND t.status = '{T.PENDING.value}' AND {_FLOOR}
        AND t.not_before <= extract(epoch FROM clock_timestamp())
        AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p
                        ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id
                        WHERE d.backfill_id = t.backfill_id AND d.task_id = t.task_id
                            AND p.status <> '{T.DONE.value}')
        -- paused or cancelled: running tasks finish, nothing new starts
        AND EXISTS (SELECT 1 FROM backfills b WHERE b.id = %(b)s AND b.paused_at IS NULL
                    AND b.status <> '{BackfillState.CANCELLED.value}')
        -- an expired lease first goes (DROP_EXPIRED): its task may come before these. One
        -- probe of the index of expiries (the statement's clock: a bound of the index); the
        -- caller sweeps and claims again when it is there.
        AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.backfill_id = %(b)s
                        AND l.expires_at < statement_timestamp())
    ORDER BY t.wave, t.task_id LIMIT %(n)s
    FOR UPDATE OF t SKIP LOCKED"""


def _start(ready: str, from_states: list[TaskState], *, floor: bool = False) -> bytes:
    """Marks the ``ready`` tasks running, inserts their attempts and leases (tagged with the
    call's token), and returns their rows with attempt ids: one statement. (The update looks
    the ready ids up by primary key, ``= ANY(ARRAY(...))``: joined to the CTE instead, a fresh
    table's estimates made the planner scan every pending task.) With ``floor``, each row also
    carries the next floor: the requeue count and the first task pending in the statement's
    snapshot (locked by another claimer, waiting or ready) at or above this one's floor."""
    cols = ", ".join(f"t.{c.strip()}" for c in TASK_COLUMNS.split(","))
    first = (
        f"""
first AS (
    SELECT t.wave, t.task_id FROM tasks t
    WHERE t.backfill_id = %(b)s AND t.status = '{T.PENDING.value}' AND {_FLOOR}
    ORDER BY t.wave, t.task_id LIMIT 1),"""
        if floor
        else ""
    )
    floor_columns = (
        ", (SELECT gen FROM bound) AS floor_gen, (SELECT wave FROM first) AS floor_wave, "
        "(SELECT task_id FROM first) AS floor_task"
        if floor
        else ""
    )
    return f"""
WITH {_BOUND if floor else ""}ready AS ({ready}),{first}
started AS (
    UPDATE tasks t SET status = '{T.RUNNING.value}', attempts = t.attempts + 1, not_before = 0,
        started_at = {NOW}, error = NULL
    WHERE t.backfill_id = %(b)s AND t.task_id = ANY(ARRAY(SELECT task_id FROM ready))
        AND t.status IN {_in(sources(TASK_TRANSITIONS, T.RUNNING, among=from_states))}
    RETURNING {cols}, t.started_at),
attempt AS (
    INSERT INTO attempts (backfill_id, task_id, attempt, worker, status, started_at)
    SELECT %(b)s, task_id, attempts, %(w)s, '{A.RUNNING.value}', started_at FROM started
    RETURNING id, task_id),
leased AS (
    INSERT INTO leases (backfill_id, task_id, worker, attempt_id, expires_at, claim_token)
    SELECT %(b)s, task_id, %(w)s, id, clock_timestamp() + make_interval(secs => %(secs)s),
        %(tok)s FROM attempt)
SELECT s.*, a.id AS attempt_id{floor_columns} FROM started s JOIN attempt a USING (task_id)
ORDER BY s.wave, s.task_id""".encode()


#: The parameters of :func:`claim`'s statement, in the order of its ``$n`` placeholders, and
#: their types.
CLAIM_PARAMS = ("b", "w", "secs", "tok", "gen", "fw", "ft")
CLAIM_TYPES = (TEXT, TEXT, FLOAT8, TEXT, INT8, INT4, INT4)


@functools.cache
def claim(limit: int) -> tuple[bytes, bytes]:
    """(name, statement) of the prepared statement that claims up to ``limit`` ready tasks
    (params: :data:`CLAIM_PARAMS`, as ``$n``). Each row: the task's columns, its started_at,
    the attempt's id and the next floor (floor_gen, floor_wave, floor_task).

    The limit is written into the statement, one statement per claim size: with ``LIMIT $n``
    the planner prices a generic plan as if it fetched a tenth of the pending tasks, so Postgres
    planned this statement again on every claim (0.47 ms of the server's CPU, more than running
    it). A literal limit keeps the generic plan, planned once per connection."""
    if limit <= 0:
        raise ValueError(f"claim limit {limit}: expected a positive number of tasks")
    sql = _start(_READY.replace("%(n)s", str(int(limit))), [T.PENDING], floor=True)
    return b"backfill_claim_%d" % limit, positional(sql, CLAIM_PARAMS)


#: The floor of a claimer that has none: the scan starts at the first task.
NO_FLOOR = {"gen": -1, "fw": 0, "ft": 0}
CLAIM_ONE = _start("SELECT %(t)s::integer AS task_id", [T.PENDING, T.FAILED])

# claim_task's common case in one statement (params as CLAIM_ONE): task t when the backfill is
# neither paused nor cancelled (its row share-locked, so a pause waits for this claim, as in
# SqlLedger._refuse_held) and every dependency is done. No row: the caller takes the general
# path, which says why (done, held, busy, waiting, unknown) and drops dead leases.
CLAIM_TASK = _start(
    f"""SELECT %(t)s::integer AS task_id
    WHERE EXISTS (SELECT 1 FROM backfills b WHERE b.id = %(b)s AND b.paused_at IS NULL
                  AND b.status <> '{BackfillState.CANCELLED.value}' FOR SHARE)
        AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p
                        ON p.backfill_id = d.backfill_id AND p.task_id = d.dep_id
                        WHERE d.backfill_id = %(b)s AND d.task_id = %(t)s
                            AND p.status <> '{T.DONE.value}')""",
    [T.PENDING, T.FAILED],
)

#: CLAIM_TASK as a prepared statement: (name, statement with ``$n`` placeholders of
#: :data:`CLAIM_TASK_PARAMS`, of the types :data:`CLAIM_TASK_TYPES`).
CLAIM_TASK_PARAMS = ("b", "t", "w", "secs", "tok")
CLAIM_TASK_TYPES = (TEXT, INT4, TEXT, FLOAT8, TEXT)
CLAIM_TASK_PREPARED = (b"backfill_claim_task", positional(CLAIM_TASK, CLAIM_TASK_PARAMS))

CLAIMED_BY_TOKEN = f"""
SELECT {", ".join(f"t.{c.strip()}" for c in TASK_COLUMNS.split(","))}, l.attempt_id
FROM leases l JOIN tasks t ON t.backfill_id = l.backfill_id AND t.task_id = l.task_id
WHERE l.claim_token = %(tok)s ORDER BY t.wave, t.task_id""".encode()

#: the parameters of :func:`finish`'s statement, in the order of its ``$n`` placeholders
FINISH_PARAMS = (
    "b",
    "t",
    "w",
    "a",
    "ended",
    "secs",
    "rows",
    "del",
    "fp",
    "err",
    "retry",
    "target",
    "late",
    "bug",
)
FINISH_TYPES = (
    TEXT,
    INT8,
    TEXT,
    INT8,
    TEXT,
    FLOAT8,
    INT8,
    INT8,
    TEXT,
    TEXT,
    FLOAT8,
    TEXT,
    TEXT,
    TEXT,
)


@functools.cache
def finish(target: TaskState) -> tuple[bytes, bytes]:
    """(name, statement) of the prepared statement that ends an attempt (params:
    :data:`FINISH_PARAMS`, as ``$n``). Lands only if the attempt still holds the task's lease;
    otherwise only notes the late report on the abandoned attempt. Returns one row: 1 when it
    held the lease, else 0. Built once per target: it runs once per task."""
    # One instant for the end, cut to the millisecond the stamps show: the attempt's (and the
    # task's) finished_at, and a retry due that instant + its delay (so the recorded gap before
    # the next attempt, whose claim compares not_before with its own clock, is never shorter).
    # The statement's start is that instant, the same wherever it is read in the statement.
    end = "date_trunc('milliseconds', statement_timestamp())"
    stamp = NOW.replace("clock_timestamp()", end)
    sets = {
        T.DONE: f"rows_written = %(rows)s, fingerprint = %(fp)s, finished_at = {stamp}, "
        "error = NULL",
        T.PENDING: f"not_before = extract(epoch FROM {end}) + %(retry)s, error = %(err)s",
        T.FAILED: f"error = %(err)s, finished_at = {stamp}",
    }[target]
    ended = sources(ATTEMPT_TRANSITIONS, A.DONE)  # the same sources for DONE and FAILED
    sql = f"""
WITH held AS (
    DELETE FROM leases WHERE backfill_id = %(b)s AND task_id = %(t)s AND worker = %(w)s
        AND attempt_id = %(a)s RETURNING 1),
attempt AS (
    UPDATE attempts SET status = %(ended)s, finished_at = {stamp}, seconds = %(secs)s,
        rows_written = %(rows)s, rows_deleted = %(del)s, fingerprint = %(fp)s, error = %(err)s
    WHERE id = %(a)s AND status IN {_in(ended)} AND EXISTS (SELECT 1 FROM held) RETURNING 1),
task AS (
    UPDATE tasks SET status = %(target)s, {sets}
    WHERE backfill_id = %(b)s AND task_id = %(t)s
        AND status IN {_in(sources(TASK_TRANSITIONS, target, among=[T.RUNNING]))}
        AND EXISTS (SELECT 1 FROM held) RETURNING 1),
late AS (
    UPDATE attempts SET error = coalesce(error, '') || %(late)s
    WHERE id = %(a)s AND status = '{A.ABANDONED.value}' AND NOT EXISTS (SELECT 1 FROM held)
    RETURNING 1)
SELECT CASE WHEN (SELECT count(*) FROM held) = 0 THEN 0
            WHEN (SELECT count(*) FROM task) = 1 AND (SELECT count(*) FROM attempt) = 1 THEN 1
            ELSE ledger_fail(%(bug)s) END"""
    return f"backfill_finish_{target.value}".encode(), positional(sql.encode(), FINISH_PARAMS)


def task_copy_row(bid: str, t: Mapping[str, Any]) -> tuple[Any, ...]:
    """A task of a new backfill as :data:`COPY_TASKS` takes it."""
    return (
        bid,
        t["task_id"],
        t["model"],
        iso_utc(t["start"]),
        iso_utc(t["end"]),
        t["label"],
        t["partitions"],
        t["wave"],
        TaskState.PENDING.value,
    )
