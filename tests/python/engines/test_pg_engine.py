"""The PostgreSQL engine beyond the conformance suite: settings, bad input, strategies (merge,
full, view), task failures, concurrent first tasks, fingerprints, Arrow streams, the demo.
Everything runs against the session's throwaway server (``pg_server``)."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import tomllib

import backfill
from backfill.engines import PUBLISHED, Area, Column, ColumnKind, TaskFailure
from backfill.engines.postgres import PostgresConnectionError, PostgresEngine, mask_url
from backfill.engines.postgres.sql import DIALECT
from backfill.engines.sql.core import fingerprint_parts, fingerprint_where
from backfill.model.files import ProjectError
from pg_engine_support import ensure_entry_point, subprocess_env

ROOT = Path(__file__).resolve().parents[3]
UTC = dt.timezone.utc
AS_OF = "2026-06-01"


def day(d: int) -> dt.datetime:
    return dt.datetime(2026, 1, d, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _entry_point() -> None:
    ensure_entry_point()


# -- settings and bad input ---------------------------------------------------------------------
def _yml(tmp_path: Path, engine: str) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "m.sql").write_text("select 1 as x\n", encoding="utf-8")
    (tmp_path / "backfill.yml").write_text(f"name: p\nengine: {engine}\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ("{type: postgres}", "needs url"),
        ("{type: postgres, url: 'mysql://u@h/db'}", "must start with postgresql://"),
        ("{type: postgres, url: 'postgresql://u:pw@h:5432'}", "names no database"),
        ("{type: postgres, url: 'postgresql://u:pw@h:port/db'}", "malformed port"),
        ("{type: postgres, url: 'postgresql://u@h/db', schema: 'a; drop'}", "plain identifier"),
        ("{type: postgres, url: 'postgresql://u@h/db', pool: 3}", "unknown engine setting 'pool'"),
        ("{type: postgres, url: 'postgresql://u@h/db', pool_size: 0}", "pool_size 0 must be"),
    ],
)
def test_bad_engine_settings_are_refused_with_the_password_masked(
    tmp_path: Path, engine: str, message: str
) -> None:
    root = _yml(tmp_path, engine)
    with pytest.raises(ProjectError, match=re.escape(message)) as err:
        backfill.Project.load(root)
    assert "pw" not in str(err.value)


def test_settings_and_entry_point(tmp_path: Path, pg_server: Any) -> None:
    url = pg_server.create_database("settings")
    root = _yml(tmp_path, f"{{type: postgres, url: '{url}', schema: pub, pool_size: 3}}")
    settings = backfill.Project.load(root).settings
    assert settings is not None
    assert (settings.engine.type, settings.engine.schema) == ("postgres", "pub")
    assert dict(settings.engine.options) == {"url": url, "pool_size": 3}
    engine = backfill.engines.registry.engine_for(backfill.Project.load(root))
    assert isinstance(engine, PostgresEngine) and engine.db.pool_size == 3
    engine.close()
    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert (
        points["backfill.engines"]["postgres"]
        == "backfill.engines.postgres:PostgresEngine.from_settings"
    )


def test_mask_url() -> None:
    assert (
        mask_url("postgresql://me:s3cret@db:5432/x?sslmode=require")
        == "postgresql://me:***@db:5432/x?sslmode=require"
    )
    assert "s3cret" not in mask_url("postgresql://me@db/x?password=s3cret")


def test_unusable_warehouses_fail_before_anything_is_written(pg_server: Any) -> None:
    url = pg_server.create_database("perm")
    with pytest.raises(PostgresConnectionError, match=r"nope.*does not exist"):
        PostgresEngine(url.rsplit("/", 1)[0] + "/nope")
    down = f"postgresql://backfill:hunter2@127.0.0.1:{_free_port()}/x"
    with pytest.raises(PostgresConnectionError) as err:
        PostgresEngine(down, connect_timeout=2)
    assert "backfill:***@127.0.0.1" in str(err.value) and "hunter2" not in str(err.value)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE weak LOGIN PASSWORD 'hunter2'")
    weak = url.replace("backfill@", "weak:hunter2@")
    with pytest.raises(PostgresConnectionError, match=r"weak:\*\*\*@.*may not create schemas"):
        PostgresEngine(weak)
    # a wrong password: the cluster trusts local users, except this one (its own hba line)
    hba = Path(pg_server.data) / "pg_hba.conf"
    hba.write_text("host all pwuser 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE pwuser LOGIN PASSWORD 'right'")
        conn.execute("SELECT pg_reload_conf()")
    with pytest.raises(PostgresConnectionError, match="may not create schemas"):
        PostgresEngine(url.replace("backfill@", "pwuser:right@"))  # in, but without grants
    with pytest.raises(
        PostgresConnectionError,
        match=r"pwuser:\*\*\*@.*password authentication "
        "failed",
    ) as err:
        PostgresEngine(url.replace("backfill@", "pwuser:wrong@"))
    assert "wrong" not in str(err.value)
    with psycopg.connect(url, autocommit=True) as conn:
        schemas = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'audit%'"
        ).fetchone()
    assert schemas == (0,)


def _free_port() -> int:
    from pg_support import free_port

    return free_port()


# -- a small project with every strategy --------------------------------------------------------
MODELS = {
    "ev_latest": 'select id, updated_at, v from {{ source("raw", "events") }} e\n'
    "where updated_at >= {{ start }} and updated_at < {{ end }}",
    "ev_daily": "select cast(updated_at as date) as day, count(*) as n, sum(v) as v\n"
    'from {{ source("raw", "events") }} e\n'
    "where updated_at >= {{ start }} and updated_at < {{ end }} group by 1",
    "ev_total": 'select count(*) as days, sum(v) as v from {{ ref("ev_daily") }} d',
    "ev_view": 'select day, v from {{ ref("ev_daily") }} d where n > 0',
}
YML = """name: events
engine: {{type: postgres, url: "{url}", schema: pub}}
state: .backfill
sources:
  raw:
    events: {{grain: day, tz: UTC, event_time: updated_at}}
models:
  defaults: {{grain: day, tz: UTC, begin: "2026-01-01"}}
  ev_latest: {{strategy: merge, unique_key: id, event_time: updated_at}}
  ev_daily: {{event_time: day}}
  ev_total: {{grain: null, strategy: full}}
  ev_view: {{grain: null, strategy: view}}
"""


@pytest.fixture()
def events(tmp_path: Path, pg_server: Any) -> tuple[backfill.Project, str]:
    url = pg_server.create_database("events")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA raw; CREATE TABLE raw.events (id int, updated_at timestamp, "
            "v numeric(10, 2))"
        )
        conn.execute(
            "INSERT INTO raw.events SELECT g, TIMESTAMP '2026-01-01' + g * INTERVAL "
            "'5 hours', g * 1.25 FROM generate_series(0, 17) g"
        )  # 1-4 Jan
    (tmp_path / "models").mkdir()
    for name, sql in MODELS.items():
        (tmp_path / "models" / f"{name}.sql").write_text(sql + "\n", encoding="utf-8")
    (tmp_path / "backfill.yml").write_text(YML.format(url=url), encoding="utf-8")
    project = backfill.Project.load(tmp_path)
    plan = project.plan("*", "2026-01-01", "2026-01-05", as_of=AS_OF)
    assert project.backfill(plan, reason="build", direct=True).run(concurrency=4).ok
    return project, url


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_merge_full_and_view_through_audit_and_publish(
    events: tuple[backfill.Project, str],
) -> None:
    project, url = events
    assert _rows(url, "SELECT days, v FROM pub.ev_total") == [(4, Decimal("191.25"))]
    assert _rows(url, "SELECT relkind FROM pg_class WHERE relname = 'ev_view'") == [("v",)]
    with psycopg.connect(url, autocommit=True) as conn:  # id 2 changes and moves to 3 Jan
        conn.execute(
            "UPDATE raw.events SET v = 100, updated_at = TIMESTAMP '2026-01-03 12:00' WHERE id = 2"
        )
    plan = project.plan("*", "2026-01-03", "2026-01-04", as_of=AS_OF)
    bf = project.backfill(plan, reason="id 2 corrected")
    assert bf.run(concurrency=4, backoff=0.0).ok
    engine = bf.engine
    # the merge preview keeps the published keys the backfill did not produce
    with engine.stream(project, "ev_latest", bf.area, [(day(3), day(4))], preview=True) as s:
        preview = backfill.ArrowTable.from_arrow(s).to_pylist()
    assert sorted(r["id"] for r in preview) == [2, 10, 11, 12, 13, 14]
    bf.audit()
    bf.publish("id 2 corrected")
    latest = _rows(url, "SELECT id, updated_at, v FROM pub.ev_latest ORDER BY id")
    assert [r[0] for r in latest] == list(range(18))  # still one row per key
    assert latest[2] == (2, dt.datetime(2026, 1, 3, 12), Decimal("100.00"))
    total = _rows(url, "SELECT days, v FROM pub.ev_total")[0]
    assert total == _rows(url, "SELECT count(*), sum(v) FROM pub.ev_daily")[0]
    assert _rows(url, "SELECT sum(v) FROM pub.ev_view") == _rows(
        url, "SELECT sum(v) FROM pub.ev_daily"
    )
    assert _rows(url, "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'audit%'") == [(0,)]


def test_task_failures_are_permanent_or_transient(
    events: tuple[backfill.Project, str], tmp_path: Path
) -> None:
    project, url = events
    engine = backfill.engines.registry.engine_for(project)
    try:
        bad = project.models["ev_daily"].sql or ""
        (tmp_path / "models" / "ev_daily.sql").write_text(
            bad.replace("updated_at < {{ end }}", "updated_at < {{ end }} + interval '1 day'")
        )
        wide = backfill.Project.load(tmp_path)
        with pytest.raises(TaskFailure, match="outside the task's period") as err:
            engine.run_task(wide, "ev_daily", day(1), day(2), Area("bf_fail", {}))
        assert not err.value.transient
        (tmp_path / "models" / "ev_daily.sql").write_text(bad.replace("count(*)", "count(nope)"))
        broken = backfill.Project.load(tmp_path)
        with pytest.raises(TaskFailure, match=r"SQL error.*nope") as err:
            engine.run_task(broken, "ev_daily", day(1), day(2), Area("bf_fail", {}))
        assert not err.value.transient
        # a lock held elsewhere past lock_timeout: transient
        with psycopg.connect(url) as holder:
            holder.execute("LOCK TABLE pub.ev_daily IN ACCESS EXCLUSIVE MODE")
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "ALTER DATABASE " + url.rsplit("/", 1)[1] + " SET lock_timeout = '200ms'"
                )
            engine.close()  # new sessions read the setting
            with pytest.raises(TaskFailure) as err:
                engine.run_task(project, "ev_daily", day(1), day(2), PUBLISHED)
            assert err.value.transient, str(err.value)
    finally:
        engine.close()


def test_concurrent_first_tasks_of_one_model_all_land(
    events: tuple[backfill.Project, str],
) -> None:
    project, _ = events
    engine = PostgresEngine(_url(project), schema="pub", pool_size=8)
    area = Area("bf_race", {"ev_daily": [(day(1), day(5))]})
    errors: list[BaseException] = []

    def task(d: int) -> None:
        try:
            engine.run_task(project, "ev_daily", day(d), day(d + 1), area)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=task, args=(d,)) for d in (1, 2, 3, 4) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    parts = [(f"d{d}", day(d), day(d + 1)) for d in range(1, 5)]
    assert engine.fingerprints(project, "ev_daily", area, parts) == engine.fingerprints(
        project, "ev_daily", PUBLISHED, parts
    )
    engine.drop_area("bf_race")
    engine.close()


def _url(project: backfill.Project) -> str:
    assert project.settings is not None
    return str(project.settings.engine.options["url"])


def test_fingerprints_ignore_column_and_row_order_and_mark_nulls(pg_server: Any) -> None:
    url = pg_server.create_database("fp")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (x int, y text, t timestamp)")
        conn.execute(
            "INSERT INTO a VALUES (1, 'p', '2026-01-01 01:00'), (2, NULL, "
            "'2026-01-02 01:00'), (3, '', '2026-01-02 02:00')"
        )
        conn.execute("CREATE TABLE b AS SELECT t, y, x FROM a ORDER BY x DESC")
        cols = [
            Column("x", "integer", ColumnKind.INTEGER),
            Column("y", "text", ColumnKind.STRING),
            Column("t", "timestamp without time zone", ColumnKind.TIMESTAMP),
        ]
        parts = [("d1", day(1), day(2)), ("d2", day(2), day(3)), ("d3", day(3), day(4))]

        def run(sql: str) -> list[tuple[Any, ...]]:
            return conn.execute(sql).fetchall()

        fa = fingerprint_parts(DIALECT, run, "a", cols, ("t", None), parts)
        assert fa == fingerprint_parts(DIALECT, run, "b", cols, ("t", None), parts)
        assert [fa[k].rows for k in ("d1", "d2", "d3")] == [1, 2, 0]
        conn.execute("UPDATE b SET y = '' WHERE x = 2")  # NULL and '' differ
        assert fingerprint_where(DIALECT, run, "a", cols) != fingerprint_where(
            DIALECT, run, "b", cols
        )


def test_stream_sends_only_the_periods_as_typed_arrow(
    events: tuple[backfill.Project, str],
) -> None:
    project, _ = events
    engine = backfill.engines.registry.engine_for(project)
    try:
        cols = {c.name: c.kind for c in engine.columns(project, "ev_daily", PUBLISHED) or []}
        assert cols == {"day": ColumnKind.DATE, "n": ColumnKind.INTEGER, "v": ColumnKind.DECIMAL}
        with engine.stream(
            project, "ev_latest", PUBLISHED, [(day(2), day(3))], utc_column="__utc"
        ) as s:
            table = backfill.ArrowTable.from_arrow(s)
            rows = table.to_pylist()
        assert sorted(r["id"] for r in rows) == [5, 6, 7, 8, 9]
        assert all(isinstance(r["v"], Decimal) for r in rows)
        assert all(r["__utc"] == r["updated_at"].replace(tzinfo=UTC) for r in rows)
        with engine.stream(project, "ev_total", PUBLISHED, None) as s:  # sum(): unconstrained
            total = backfill.ArrowTable.from_arrow(s).to_pylist()
        assert total == [{"days": 4, "v": Decimal("191.25")}]
        with engine.stream(project, "ev_daily", PUBLISHED, []) as s:
            assert backfill.ArrowTable.from_arrow(s).to_pylist() == []
        with (
            pytest.raises(backfill.NotFoundError),
            engine.stream(project, "ev_daily", Area("bf_none", {}), None),
        ):
            pass
    finally:
        engine.close()


# -- the demo -------------------------------------------------------------------------------------
def test_demo_on_postgres_tells_the_duckdb_story(pg_server: Any, tmp_path: Path) -> None:
    url = pg_server.create_database("demo")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill.cli",
            "demo",
            "--engine",
            "postgres",
            "--url",
            url,
            "--dir",
            str(tmp_path / "demo"),
            "--orders-per-day",
            "30",
            "--concurrency",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert re.findall(r"^== (\d)\. ", out, flags=re.M) == [str(i) for i in range(1, 10)]
    assert "89 days to rebuild" in out and "gates passed" in out
    # the same figures as the DuckDB demo of the same shop (tests/python/cli/test_demo.py)
    assert "revenue: 909,515.41 -> 892,558.21 (-1.86%)" in out
    assert "revenue: 943,778.27 -> 926,821.07 (-1.80%)" in out
    assert "revenue_7d: 6,816,944.80 -> 6,698,244.40 (-1.74%)" in out
    assert "note:   Revenue from 1 Aug 2026 was overstated" in out
    # and the same message to consumers
    assert "\n    revenue: 909,515.41 -> 892,558.21 (-1.9%)\n" in out.split("== 9. ", 1)[1]
    assert _rows(url, "SELECT DISTINCT model FROM shop.backfill_changelog ORDER BY 1") == [
        ("fct_daily_sales",),
        ("fct_monthly_sales",),
        ("fct_sales_7d",),
    ]
    assert _rows(url, "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'audit_%'") == [(0,)]


def test_a_demo_that_starts_over_drops_only_the_shops_published_tables(pg_server: Any) -> None:
    from backfill.examples.shop import postgres as shop_pg

    url = pg_server.create_database("demo_again")
    keep = ("CREATE TABLE shop.customers (id int)", "CREATE TABLE shop.fct_daily_sales (d date)")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA shop")
        for sql in keep:
            conn.execute(sql)
    # a database that does not exist, and a password in the URL that must not be shown
    bad = url.replace("@", ":s3cret@", 1).rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(backfill.BackfillError) as e:
        shop_pg.drop_published(bad, "shop")
    assert "s3cret" not in str(e.value)
    assert _rows(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'shop'") == [(2,)]
    shop_pg.drop_published(url, "shop")  # the shop's table goes, a table of someone else stays
    assert _rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'shop'") == [
        ("customers",)
    ]
