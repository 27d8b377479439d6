"""The Postgres ledger's hottest statement, a task's end (one per task), run through libpq's
prepared-statement call directly.

Every task ends with one ``finish`` statement, so its client-side cost bounds how many tasks a
worker process can end per second of CPU. Through a psycopg cursor a statement costs about
0.17 ms of client CPU even when the server has it prepared (cursor set-up, parameter adaptation
by type, result loaders); libpq's ``PQexecPrepared`` with text parameters costs about 0.04 ms.
The statement is prepared once per connection (named; psycopg's own prepared statements are
named ``_pg3_*``, so the names never meet) and its parameters are sent as text of unknown type:
the server types them from the columns and functions they meet, as it does psycopg's strings.

Errors leave as psycopg's: :class:`psycopg.OperationalError` for a lost connection (so the
ledger's retry loop treats it like any other), the SQLSTATE's class otherwise.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

__all__ = ["FLOAT8", "INT4", "INT8", "TEXT", "execute_prepared", "positional"]

_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
# connection -> the names prepared on it (a new connection, e.g. after a restart, has none)
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
_NAMED = re.compile(rb"%\((\w+)\)s")


def positional(sql: bytes, names: Sequence[str]) -> bytes:
    """``sql`` with its ``%(name)s`` placeholders as libpq's ``$n``, numbered by ``names``."""
    index = {n.encode(): i + 1 for i, n in enumerate(names)}
    used = set(_NAMED.findall(sql))
    if used - set(index):
        raise ValueError(f"placeholders without a position: {sorted(used - set(index))}")
    return _NAMED.sub(lambda m: b"$%d" % index[m.group(1)], sql)


def _check(conn: psycopg.Connection[Any], res: pq.abc.PGresult) -> None:
    if res.status in _OK:
        return
    if conn.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(
            conn.pgconn.get_error_message().strip() or "the connection was lost"
        )
    raise error_from_result(res, encoding=conn.info.encoding)


#: type oids for :func:`execute_prepared` (a parameter the statement does not use, or uses only
#: where any type fits, needs one)
TEXT, INT4, INT8, FLOAT8 = 25, 23, 20, 701


def execute_prepared(
    conn: psycopg.Connection[Any],
    name: bytes,
    sql: bytes,
    params: Sequence[object],
    types: Sequence[int],
) -> list[tuple[bytes | None, ...]]:
    """Runs ``sql`` (``$n`` placeholders of the type oids ``types``) as the prepared statement
    ``name`` of ``conn`` with ``params`` (None -> NULL, else their ``str``); returns the rows
    as text bytes (in the connection's encoding, ``conn.info.encoding``)."""
    done = _PREPARED.get(conn)
    if done is None:
        done = _PREPARED[conn] = set()
    pg = conn.pgconn
    if name not in done:
        _check(conn, pg.prepare(name, sql, list(types)))
        done.add(name)
    encoding = conn.info.encoding  # the client encoding's Python codec (UTF-8 as a rule)
    values: list[bytes | None] = [None if p is None else str(p).encode(encoding) for p in params]
    res = pg.exec_prepared(name, values)  # type: ignore[arg-type]  # None is NULL
    _check(conn, res)
    return [tuple(res.get_value(r, c) for c in range(res.nfields)) for r in range(res.ntuples)]
