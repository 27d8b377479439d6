"""backfill.diff_tables across DuckDB and PostgreSQL: random tables (composite keys, keys only on
one side, changed values in a few partitions, a whole partition missing) give the result of
backfill.diff over the same rows read whole into Arrow; only differing partitions are streamed;
bad input gets one clear error."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest

import backfill
from backfill.errors import InvalidInputError

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 3, 1, tzinfo=UTC)


def _rows(seed: int, n: int = 400) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(old, new) rows (region, id, at, amount, x, note) over 10 days: new changes values in
    days 2 and 5, drops day 7 whole, adds keys and removes keys in day 3."""
    rng = random.Random(seed)
    old = []
    for i in range(n):
        at = DAY0 + dt.timedelta(seconds=rng.randrange(10 * 86400))
        amount = None if rng.random() < 0.1 else Decimal(rng.randrange(-(10**6), 10**6)).scaleb(-2)
        x = None if rng.random() < 0.1 else rng.uniform(-1e6, 1e6)
        old.append((rng.choice("ab"), i, at, amount, x, rng.choice(["", "é|~", None, "z"])))
    new = []
    for r in old:
        day = (r[2] - DAY0).days
        if day == 7 or (day == 3 and r[1] % 5 == 0):
            continue
        if day in (2, 5) and r[1] % 4 == 0:
            r = (*r[:3], (r[3] or Decimal(0)) + 1, r[4], r[5])
        new.append(r)
    new += [
        ("c", n + i, DAY0 + dt.timedelta(days=3, hours=i), Decimal("1.5"), 2.0, "new")
        for i in range(5)
    ]
    return old, new


SCHEMA = pa.schema(
    [
        ("region", pa.string()),
        ("id", pa.int64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(18, 2)),
        ("x", pa.float64()),
        ("note", pa.string()),
    ]
)


def _duckdb(path: Path, rows: list[tuple[Any, ...]]) -> str:
    table = pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA
    )
    con = duckdb.connect(str(path))
    con.register("incoming", table)
    con.execute("CREATE TABLE main.sales AS SELECT * FROM incoming")
    con.close()
    return f"duckdb://{path}#main.sales"


def _postgres(url: str, rows: list[tuple[Any, ...]]) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        name = f"sales_{uuid.uuid4().hex[:6]}"
        conn.execute(
            f"CREATE TABLE public.{name} (region text, id bigint, at timestamptz, "
            "amount numeric(18,2), x double precision, note text)"
        )
        with conn.cursor().copy(f"COPY public.{name} FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
    return f"{url}#public.{name}"


def _whole(location: str) -> Any:
    from backfill.engines.locations import open_table

    with open_table(location) as src:
        table = src.arrow(f"SELECT * FROM {src.relation}")
    # The same rows as Arrow, with one spelling of UTC (DuckDB says Etc/UTC).
    return table.cast(table.schema.set(2, pa.field("at", pa.timestamp("us", tz="UTC"))))


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.create_database("xdiff"))


@pytest.mark.parametrize("seed", [1, 2])
def test_equals_the_arrow_diff_of_the_same_rows(tmp_path: Path, pg_url: str, seed: int) -> None:
    old, new = _rows(seed)
    a = _duckdb(tmp_path / "a.duckdb", old)
    b = _postgres(pg_url, new)
    key = ["region", "id"]
    got = backfill.diff_tables(a, b, key, partition_by="at", grain="day", measures=[])
    want = backfill.diff(_whole(a), _whole(b), key, partition_by="at", measures=[])
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert got.columns.to_pylist() == want.columns.to_pylist()
    assert got.changed_sample.to_pylist() == want.changed_sample.to_pylist()
    assert got.streamed == ["2024-03-03", "2024-03-04", "2024-03-06", "2024-03-08"]
    assert got.snapshots["b"].startswith("PostgreSQL REPEATABLE READ")
    # the same rows on both sides: nothing streamed, identical
    same = backfill.diff_tables(a, _postgres(pg_url, old), key, partition_by="at")
    assert same.identical and same.streamed == [] and same.summary.unchanged == len(old)


def test_bad_input_names_it(tmp_path: Path, pg_url: str) -> None:
    old, _ = _rows(3, 50)
    a = _duckdb(tmp_path / "a.duckdb", old)
    dup = _postgres(pg_url, old + old[:1])
    with pytest.raises(InvalidInputError, match=r"not unique in b .*region='a'|not unique in b"):
        backfill.diff_tables(a, dup, ["region", "id"])
    with pytest.raises(backfill.BackfillError, match="no such table"):
        backfill.diff_tables(a, f"{pg_url}#public.nope", ["id"])
    with pytest.raises(InvalidInputError, match="cannot connect"):
        backfill.diff_tables(a, "postgresql://nobody@127.0.0.1:1/x#public.t", ["id"])
    with pytest.raises(InvalidInputError, match="no DuckDB file"):
        backfill.diff_tables(f"duckdb://{tmp_path}/none.duckdb#main.t", a, ["id"])


def test_parquet_against_postgres_as_one_segment(tmp_path: Path, pg_url: str) -> None:
    """Without partition_by the table is one segment: streamed whole when it differs."""
    import pyarrow.parquet as pq

    old, new = _rows(4, 120)
    path = tmp_path / "old.parquet"
    pq.write_table(
        pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in old], SCHEMA), path
    )
    b = _postgres(pg_url, new)
    key = ["region", "id"]
    got = backfill.diff_tables(str(path), b, key, measures=[])
    want = backfill.diff(_whole(str(path)), _whole(b), key, measures=[])
    assert got.summary == want.summary and got.streamed == ["all"]
    assert got.columns.to_pylist() == want.columns.to_pylist()
    assert backfill.diff_tables(str(path), _postgres(pg_url, old), key).streamed == []


def test_the_cli_compares_two_warehouses_in_a_new_process(tmp_path: Path, pg_url: str) -> None:
    """``backfill diff LOCATION LOCATION`` as users run it (the installed console script):
    exit 1 with the same counts as diff_tables when the tables differ, 0 when they are the same,
    2 with one line (no traceback, no password) for a side it cannot reach."""
    import json
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "backfill")
    old, new = _rows(5, 200)
    a = _duckdb(tmp_path / "a.duckdb", old)
    b = _postgres(pg_url, new)
    args = ["diff", a, b, "--key", "region", "--key", "id", "--partition-by", "at"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([exe, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert "Traceback" not in r.stderr, r.stderr
        return r

    r = run(*args, "--json")
    assert r.returncode == 1, r.stderr
    got = json.loads(r.stdout)
    want = backfill.diff_tables(a, b, ["region", "id"], partition_by="at")
    assert got["summary"] == want.summary.to_dict()
    assert got["streamed"] == want.streamed and got["segments"] == len(want.segments)
    assert got["snapshots"]["b"].startswith("PostgreSQL REPEATABLE READ")
    text = run(*args)
    assert text.returncode == 1 and f"{len(want.streamed)} streamed" in text.stdout
    same = run("diff", a, _postgres(pg_url, old), "--key", "region", "--key", "id")
    assert same.returncode == 0, same.stdout + same.stderr
    bad = run("diff", a, "postgresql://me:s3cret@127.0.0.1:1/x#public.t", "--key", "id")
    assert bad.returncode == 2 and "cannot connect" in bad.stderr, bad.stderr
    assert "s3cret" not in bad.stderr + bad.stdout
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
