"""Key-range bisection in backfill.diff_tables: seeded random tables (values changed in a few key
ranges, keys on one side only, keys moving between partitions, NULL keys; integer, string with
non-ASCII text under a non-bytewise Postgres collation, date, timestamp and composite keys; with
and without partitions) in DuckDB, PostgreSQL and Parquet give exactly the result of
backfill.diff over the same rows read whole into Arrow, and bisection streams far fewer rows than
the differing partition holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import backfill
from backfill.audit.crossdiff import DiffProgress
from backfill.engines.locations import open_table
from backfill.errors import InvalidInputError

UTC = dt.timezone.utc
DAY0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
DAYS = 6
# Strings whose bytewise order differs from a linguistic collation's ("Z" < "a" < "é" bytewise;
# "a" < "é" < "Z" in en-US), NUL-free as Postgres needs.
WORDS = ["a", "Z", "é", "ß", "日本", "Ab", "ab", "a b", "z|~", "ÿ", "Ω", "e\u0301", "", "😀"]


@dataclasses.dataclass
class Shape:
    """A table's key: (name, Arrow type, DuckDB type, PostgreSQL type) per key column and how
    to draw row i's key."""

    name: str
    key: list[tuple[str, pa.DataType, str, str]]
    draw: Any  # (rng, i) -> tuple of key values


SHAPES = {
    "integer": Shape("integer", [("id", pa.int64(), "BIGINT", "bigint")], lambda r, i: (i * 3,)),
    "string": Shape(
        "string",
        # und-x-icu: Postgres's ICU root collation, not bytewise: without COLLATE "C" the
        # ranges would be cut differently on the two engines.
        [("name", pa.string(), "VARCHAR", 'text COLLATE "und-x-icu"')],
        lambda r, i: (f"{r.choice(WORDS)}{i:05d}{r.choice(WORDS)}",),
    ),
    "composite": Shape(
        "composite",
        # few values of the first column: ranges holding one of them are cut by the second
        [
            ("region", pa.string(), "VARCHAR", 'text COLLATE "und-x-icu"'),
            ("n", pa.int32(), "INTEGER", "integer"),
        ],
        lambda r, i: (r.choice(["é", "a", "Z"]), i),
    ),
    "date-decimal": Shape(
        "date-decimal",
        [
            ("d", pa.date32(), "DATE", "date"),
            ("amount_key", pa.decimal128(12, 2), "DECIMAL(12,2)", "numeric(12,2)"),
        ],
        lambda r, i: (dt.date(2020, 1, 1) + dt.timedelta(days=i % 40), Decimal(i).scaleb(-2)),
    ),
    "timestamp": Shape(
        "timestamp",
        [("ts", pa.timestamp("us"), "TIMESTAMP", "timestamp")],
        lambda r, i: (dt.datetime(2023, 1, 1) + dt.timedelta(seconds=i * 7, microseconds=i),),
    ),
}
VALUES = [
    ("at", pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ", "timestamptz"),
    ("qty", pa.int64(), "BIGINT", "bigint"),
    ("price", pa.decimal128(18, 2), "DECIMAL(18,2)", "numeric(18,2)"),
    ("note", pa.string(), "VARCHAR", "text"),
]


def tables(shape: Shape, seed: int, n: int) -> tuple[pa.Table, pa.Table]:
    """(old, new): ``n`` rows over DAYS days; new changes values of the keys in two narrow key
    ranges (positions 40%-41% and 75%-75.5% of the keys), drops a few keys and adds a few,
    moves three keys to another day, and puts a few rows with a NULL key on each side."""
    rng = random.Random(seed)
    old = []
    for i in range(n):
        at = DAY0 + dt.timedelta(seconds=rng.randrange(DAYS * 86400))
        old.append(
            (
                *shape.draw(rng, i),
                at,
                rng.randrange(100),
                Decimal(rng.randrange(10**6)).scaleb(-2),
                rng.choice(["x", "ü", None]),
            )
        )
    width = len(shape.key)
    order = sorted(range(n), key=lambda i: old[i][:width])
    changed = {order[j] for j in range(int(0.40 * n), int(0.41 * n))}
    changed |= {order[j] for j in range(int(0.75 * n), int(0.755 * n))}
    dropped = {order[rng.randrange(n)] for _ in range(3)}
    moved = {order[rng.randrange(n)] for _ in range(3)} - dropped
    new = []
    for i, r in enumerate(old):
        if i in dropped:
            continue
        if i in changed:
            r = (*r[: width + 1], r[width + 1] + 1, *r[width + 2 :])
        if i in moved:
            shift = dt.timedelta(days=2 if r[width] < DAY0 + dt.timedelta(days=3) else -2)
            r = (*r[:width], r[width] + shift, *r[width + 1 :])
        new.append(r)
    extra = tables_extra(shape, rng, n)
    new += extra
    nulls = [(None,) * width + old[0][width:], (None,) * width + old[1][width:]]
    return _arrow(shape, old + nulls[:1]), _arrow(shape, new + nulls)


def tables_extra(shape: Shape, rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Rows whose keys only the new side has."""
    return [
        (*shape.draw(rng, n + j), DAY0 + dt.timedelta(hours=5 * j), 1, Decimal("1.50"), "new")
        for j in range(4)
    ]


def _arrow(shape: Shape, rows: list[tuple[Any, ...]]) -> pa.Table:
    fields = [(n, t) for n, t, _, _ in shape.key + VALUES]
    return pa.table(
        {name: pa.array([r[i] for r in rows], typ) for i, (name, typ) in enumerate(fields)}
    )


def to_duckdb(path: Path, table: pa.Table, shape: Shape) -> str:
    con = duckdb.connect(str(path))
    cols = ", ".join(f'"{n}" {t}' for n, _, t, _ in shape.key + VALUES)
    con.execute(f"CREATE TABLE main.t ({cols})")
    con.register("incoming", table)
    con.execute("INSERT INTO main.t SELECT * FROM incoming")
    con.close()
    return f"duckdb://{path}#main.t"


def to_postgres(url: str, table: pa.Table, shape: Shape) -> str:
    name = f"t_{uuid.uuid4().hex[:8]}"
    cols = ", ".join(f'"{n}" {t}' for n, _, _, t in shape.key + VALUES)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{name} ({cols})")
        with conn.cursor().copy(f"COPY public.{name} FROM STDIN") as copy:
            for r in table.to_pylist():
                copy.write_row(list(r.values()))
    return f"{url}#public.{name}"


def to_parquet(path: Path, table: pa.Table) -> str:
    pq.write_table(table, path)
    return str(path)


def whole(location: str) -> pa.Table:
    """Every row of a side, as the diff reads it (one spelling of UTC)."""
    with open_table(location) as src:
        t = src.arrow(f"SELECT * FROM {src.relation}")
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit, "UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz
        else f
        for f in t.schema
    ]
    return t.cast(pa.schema(fields))


def assert_same_as_arrow_diff(got: Any, a: str, b: str, key: list[str], **kw: Any) -> None:
    want = backfill.diff(whole(a), whole(b), key, **kw)  # measures: the default, as diff_tables
    assert got.summary == want.summary
    assert got.partitions.to_pylist() == want.partitions.to_pylist()
    assert got.columns.to_pylist() == want.columns.to_pylist()
    for name in ("changed_sample", "added_sample", "removed_sample"):
        assert _rows(getattr(got, name)) == _rows(getattr(want, name)), name


def _rows(t: Any) -> list[Any]:
    return sorted(map(repr, t.to_pylist()))


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.create_database("bisect"))


@pytest.mark.parametrize(
    ("shape", "seed", "partitioned"),
    [
        ("integer", 1, True),
        ("string", 2, True),
        ("string", 3, False),
        ("composite", 4, True),
        ("composite", 5, False),
        ("date-decimal", 6, True),
        ("timestamp", 7, False),
    ],
)
def test_duckdb_against_postgres_equals_the_arrow_diff(
    tmp_path: Path, pg_url: str, shape: str, seed: int, partitioned: bool
) -> None:
    s = SHAPES[shape]
    old, new = tables(s, seed, 3000)
    a = to_duckdb(tmp_path / "a.duckdb", old, s)
    b = to_postgres(pg_url, new, s)
    key = [n for n, *_ in s.key]
    part = {"partition_by": "at"} if partitioned else {}
    seen: list[DiffProgress] = []
    got = backfill.diff_tables(
        a, b, key, bisection_threshold=40, bisection_factor=4, progress=seen.append, **part
    )
    assert_same_as_arrow_diff(got, a, b, key, **part)
    # It bisected (several levels) and streamed a small part of the differing segments.
    assert len(got.levels) >= 3, got.levels
    assert got.streamed_ranges
    total = old.num_rows + new.num_rows
    assert sum(got.streamed_rows) < total / 3, (got.streamed_rows, total)
    assert seen[0].stage == "fingerprints" and seen[-1].stage == "done"
    assert seen[-1].rows_streamed == sum(got.streamed_rows)
    # The other way round (Postgres old), and the same rows on both sides: nothing streamed.
    back = backfill.diff_tables(b, a, key, bisection_threshold=40, bisection_factor=4, **part)
    assert_same_as_arrow_diff(back, b, a, key, **part)
    same = backfill.diff_tables(a, to_postgres(pg_url, old, s), key, **part)
    assert same.streamed == [] and same.streamed_ranges == []
    # only the row with a NULL key, which no range holds (the diff counts it apart)
    assert same.streamed_rows == (1, 1) and same.summary.null_keys_old == 1
    assert same.summary.unchanged == old.num_rows - 1


@pytest.mark.parametrize(("shape", "seed"), [("string", 11), ("composite", 12), ("integer", 13)])
def test_parquet_against_duckdb_equals_the_arrow_diff(
    tmp_path: Path, shape: str, seed: int
) -> None:
    s = SHAPES[shape]
    old, new = tables(s, seed, 2500)
    a = to_parquet(tmp_path / "old.parquet", old)
    b = to_duckdb(tmp_path / "b.duckdb", new, s)
    key = [n for n, *_ in s.key]
    for part in ({"partition_by": "at", "grain": "day"}, {}):
        got = backfill.diff_tables(a, b, key, bisection_threshold=50, bisection_factor=8, **part)
        assert_same_as_arrow_diff(got, a, b, key, **part)
        assert got.streamed_ranges and sum(got.streamed_rows) < (old.num_rows + new.num_rows) / 3


def test_bisection_streams_far_fewer_rows_than_the_partition(tmp_path: Path, pg_url: str) -> None:
    """One partition of 20,000 rows with 6 changed values in one place: the default factor
    (32) with a threshold of 200 rows streams a few hundred rows of each side, not 20,000."""
    s = SHAPES["integer"]
    n = 20_000
    rows = [
        (i, DAY0 + dt.timedelta(seconds=i), i % 7, Decimal(i).scaleb(-2), "x") for i in range(n)
    ]
    new = [(*r[:2], r[2] + 1, *r[3:]) if 12_000 <= r[0] < 12_006 else r for r in rows]
    a = to_duckdb(tmp_path / "a.duckdb", _arrow(s, rows), s)
    b = to_postgres(pg_url, _arrow(s, new), s)
    got = backfill.diff_tables(a, b, "id", partition_by="at", bisection_threshold=200)
    assert got.summary.changed == 6 and got.summary.unchanged == n - 6
    assert got.streamed == ["2024-03-01"]
    assert max(got.streamed_rows) <= 400, got.streamed_rows
    assert [lv.differing for lv in got.levels] == [1, 1, 1]
    assert "level 0: 1/1 differ" in str(got) and "transfer" in str(got)
    # Without bisection (a threshold above the partition) the whole partition is streamed.
    plain = backfill.diff_tables(a, b, "id", partition_by="at", bisection_threshold=n)
    assert plain.streamed_rows == (n, n) and plain.summary == got.summary


def test_bad_bisection_options_are_named(tmp_path: Path) -> None:
    s = SHAPES["integer"]
    old, _ = tables(s, 1, 10)
    a = to_duckdb(tmp_path / "a.duckdb", old, s)
    with pytest.raises(InvalidInputError, match="bisection_factor=1: expected a whole number >= 2"):
        backfill.diff_tables(a, a, "id", bisection_factor=1)
    with pytest.raises(InvalidInputError, match="bisection_threshold=0"):
        backfill.diff_tables(a, a, "id", bisection_threshold=0)


def test_a_primary_key_or_unique_index_spares_the_duplicate_scan(
    tmp_path: Path, pg_url: str
) -> None:
    """The key's uniqueness is read from the catalog when a constraint proves it (a primary
    key, a unique index on some of the key's columns); a table without one is scanned."""
    s = SHAPES["composite"]
    old, _ = tables(s, 21, 50)
    plain = to_postgres(pg_url, old, s)
    keyed = to_postgres(pg_url, old, s)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE UNIQUE INDEX ON {keyed.rsplit('#', 1)[1]} (n)")
        conn.execute(f"CREATE UNIQUE INDEX ON {plain.rsplit('#', 1)[1]} (n) WHERE n > 5")
    duck = to_duckdb(tmp_path / "a.duckdb", old, s)
    con = duckdb.connect(duck[len("duckdb://") :].split("#")[0])
    con.execute("CREATE TABLE main.pk (region VARCHAR, n INTEGER, PRIMARY KEY (region, n))")
    con.close()
    pk = duck.replace("#main.t", "#main.pk")
    for location, unique in ((plain, False), (keyed, True), (duck, False), (pk, True)):
        with open_table(location) as src:
            assert src.unique(["region", "n"]) is unique, location
            assert src.unique(["region"]) is False


def test_the_cli_shows_progress_and_the_descent(tmp_path: Path, pg_url: str) -> None:
    """``backfill diff`` of two warehouses with ``--progress`` (stderr is a pipe here): a line
    per step (segments, each level of key ranges, rows streamed) on stderr; ``--json`` has the
    levels and the rows streamed, the same as diff_tables'."""
    import json
    import subprocess
    import sys

    s = SHAPES["integer"]
    old, new = tables(s, 31, 1500)
    a = to_duckdb(tmp_path / "a.duckdb", old, s)
    b = to_postgres(pg_url, new, s)
    exe = str(Path(sys.executable).parent / "backfill")
    args = [exe, "diff", a, b, "--key", "id", "--partition-by", "at"]
    args += ["--bisection-threshold", "40", "--bisection-factor", "4"]
    r = subprocess.run([*args, "--json", "--progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    got = json.loads(r.stdout)
    want = backfill.diff_tables(
        a, b, "id", partition_by="at", bisection_threshold=40, bisection_factor=4
    )
    assert got["summary"] == want.summary.to_dict()
    assert got["streamed_rows"] == list(want.streamed_rows)
    assert [lv["checked"] for lv in got["levels"]] == [lv.checked for lv in want.levels]
    lines = r.stderr.strip().splitlines()
    assert "segments fingerprinted" in lines[0] and "done" in lines[-1], r.stderr
    assert any("key ranges, level 2" in line for line in lines), r.stderr
    assert f"{sum(want.streamed_rows):,} rows streamed" in lines[-1]
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert quiet.stderr == "" and "pushdown: level 0" in quiet.stdout, quiet.stderr


_MANY_RANGES = """
import json, sys
import duckdb
import backfill

rows = ("SELECT i AS id, TIMESTAMP '2024-01-01' + to_days(CAST(i // 4000 AS INTEGER)) AS happened, "
        "CAST(i % 97 AS BIGINT) AS v FROM range(400000) r(i)")
for name, v in (("a", "v"), ("b", "CASE WHEN id % 10 = 3 THEN v + 1 ELSE v END")):
    con = duckdb.connect(f"{sys.argv[1]}/{name}.duckdb")
    con.execute(f"CREATE TABLE t AS SELECT id, happened, {v} AS v FROM ({rows})")
    con.close()
got = backfill.diff_tables(
    f"duckdb://{sys.argv[1]}/a.duckdb#main.t", f"duckdb://{sys.argv[1]}/b.duckdb#main.t",
    "id", partition_by="happened", bisection_threshold=1000,
)
print(json.dumps({"changed": got.summary.changed, "unchanged": got.summary.unchanged,
                  "levels": [[lv.checked, lv.differing] for lv in got.levels]}))
"""


def test_a_level_of_thousands_of_ranges_plans_in_bounded_memory(tmp_path: Path) -> None:
    """10% of the rows changed everywhere: 100 differing days cut into 3,200 ranges, which all
    differ. Planning that level's scan on DuckDB once took over 20 GB (its filter pushdown
    inlined the segment's CASE into every comparison of a (segment, key) search) and the
    machine killed the process; here it runs with its data segment capped at 4 GB."""
    import json
    import resource
    import subprocess
    import sys

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (4 << 30, 4 << 30))

    done = subprocess.run(
        [sys.executable, "-c", _MANY_RANGES, str(tmp_path)],
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["changed"] == 40_000 and got["unchanged"] == 360_000
    assert got["levels"] == [[100, 100], [3200, 3200]]
