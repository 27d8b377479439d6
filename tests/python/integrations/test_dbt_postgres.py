"""The dbt engine on a dbt-postgres warehouse: the dbt shop's raw data in a throwaway Postgres
database, built by dbt; a backfill through dbt writes into its audit area only, audits, and
publishes tables equal to what a plain ``dbt run`` of the fixed project builds (in a schema of
its own, the oracle), with the work schemas dropped afterwards."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.examples import dbt_shop
from backfill.examples.shop import postgres as shop_pg
from backfill.integrations.dbt.invoke import invoke
from backfill.integrations.dbt.profile import GENERATED_TARGET, read_profile, write_profile
from dbt_support import AS_OF, MODELS

pytest.importorskip("dbt.adapters.postgres", reason="dbt-postgres is not installed")

# A smaller shop than the DuckDB tests' (two dbt builds of it, batch by batch, set the cost)
FIRST, LAST = dt.date(2026, 7, 28), dt.date(2026, 8, 10)
BUILD_START, BUILD_END = "2026-07-28", "2026-08-11"
PERIOD = ("2026-08-01", "2026-08-11")  # the bug's whole span in this shop (from 1 August)
DAYS = 10
BACKFILLED = ("fct_daily_sales", "fct_monthly_sales", "fct_sales_7d")
PROFILE = """dbt_shop:
  target: dev
  outputs:
    dev:
      type: postgres
      host: {host}
      port: {port}
      user: {user}
      password: ""
      dbname: {dbname}
      schema: main
      threads: 4
"""


# dbt-postgres runs a microbatch batch as a MERGE on unique_key (dbt-duckdb deletes the batch's
# period and inserts): it refuses a microbatch model without one. The shop's keys:
KEYS = {
    "models/clean/clean_orders.sql": "'order_id'",
    "models/clean/clean_order_items.sql": "['order_id', 'line_no']",
    "models/marts/fct_daily_sales.sql": "'sales_date'",
    "fixes/fct_daily_sales.sql": "'sales_date'",
    "models/marts/fct_monthly_sales.sql": "'sales_month'",
    "models/marts/fct_region_orders.sql": "['order_date', 'region']",
}


# dbt-postgres renders a ref filtered to the batch as ``(select ...) _dbt_et_filter_subq_x``,
# so an alias after the ref is a syntax error there (dbt-duckdb takes it): wrap the ref.
ALIASED_REF = re.compile(r'(\{\{ ref\("[^"]+"\) \}\}) ([a-z])\b')


def _for_postgres(root: Path) -> None:
    """The dbt shop's models as dbt-postgres needs them: unique keys, wrapped aliased refs."""
    for name, key in KEYS.items():
        path = root / name
        text = path.read_text()
        assert 'incremental_strategy="microbatch",' in text, name
        text = text.replace(
            'incremental_strategy="microbatch",',
            f'incremental_strategy="microbatch", unique_key={key},',
        )
        path.write_text(ALIASED_REF.sub(r"(select * from \1) \2", text))
    sales_7d = root / "models" / "marts" / "fct_sales_7d.sql"
    sales_7d.write_text(ALIASED_REF.sub(r"(select * from \1) \2", sales_7d.read_text()))


def _dbt(root: Path, schema: str, *args: str) -> None:
    """``dbt ARGS`` with the project's target, writing into ``schema``."""
    base = root / ".test_profiles" / schema
    profiles = write_profile(read_profile(root), base, schema=schema)
    res = invoke(
        list(args),
        project_dir=root,
        profiles_dir=profiles,
        target=GENERATED_TARGET,
        target_path=base / "target",
        check=False,
    )
    assert res.success, f"dbt {' '.join(args)} failed: {res.exception or res.errors}"


def _differs(url: str, a: str, b: str) -> dict[str, int]:
    """model -> rows in one of schemas ``a``, ``b`` and not the other (as multisets)."""
    with psycopg.connect(url) as db:
        return {
            m: int(
                db.execute(
                    f"SELECT (SELECT count(*) FROM (SELECT * FROM {a}.{m} EXCEPT ALL "
                    f"SELECT * FROM {b}.{m}) x) + (SELECT count(*) FROM (SELECT * FROM {b}.{m} "
                    f"EXCEPT ALL SELECT * FROM {a}.{m}) y)"
                ).fetchone()[0]
            )  # type: ignore[index]
            for m in MODELS
        }


def _schemas(url: str) -> list[str]:
    with psycopg.connect(url) as db:
        return [
            r[0]
            for r in db.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'audit%' ORDER BY 1"
            )
        ]


@pytest.fixture
def pg_dbt_shop(pg_server: Any, tmp_path: Path) -> tuple[Path, str]:
    """The dbt shop on Postgres, built with the bug into ``main``; also the fixed project built
    from scratch into ``oracle``. Returns (project, database URL)."""
    root = dbt_shop.create(tmp_path / "shop", orders_per_day=12, first=FIRST, last=LAST)
    url = pg_server.create_database("dbt_shop")
    shop_pg.load_raw(root / "warehouse.duckdb", url)
    (root / "warehouse.duckdb").unlink()  # nothing may read it: the warehouse is Postgres
    _for_postgres(root)
    host, port = pg_server.host, pg_server.port
    (root / "profiles.yml").write_text(
        PROFILE.format(host=host, port=port, user="backfill", dbname=url.rsplit("/", 1)[1])
    )
    fixed = (root / "fixes" / "fct_daily_sales.sql").read_text()
    model = root / "models" / "marts" / "fct_daily_sales.sql"
    buggy = model.read_text()
    model.write_text(fixed)
    _dbt(root, "oracle", "seed")
    _dbt(root, "oracle", "run", "--event-time-start", BUILD_START, "--event-time-end", BUILD_END)
    model.write_text(buggy)
    _dbt(root, "main", "seed")
    _dbt(root, "main", "run", "--event-time-start", BUILD_START, "--event-time-end", BUILD_END)
    return root, url


def test_a_backfill_through_dbt_postgres_publishes_what_dbt_builds(
    pg_dbt_shop: tuple[Path, str],
) -> None:
    root, url = pg_dbt_shop
    before = _differs(url, "main", "oracle")
    assert before["fct_daily_sales"] > 0 and before["clean_orders"] == 0  # the bug is published
    dbt_shop.fix(root)
    p = backfill.Project.from_dbt(root)
    engine = backfill.engines.registry.engine_for(p)
    assert type(engine.warehouse).__name__ == "PostgresEngine"  # type: ignore[attr-defined]
    plan = p.plan("fct_daily_sales+", *PERIOD, propagate="clip", as_of=AS_OF)
    assert [(m.model, m.tasks) for m in plan.models] == [
        ("fct_daily_sales", DAYS),
        ("fct_sales_7d", 1),
        ("fct_monthly_sales", 1),
    ]
    bf = p.backfill(plan, reason="discount bug fixed")
    status = bf.run(concurrency=4, backoff=0.0)
    assert status.ok, str(status)
    # nothing published yet: the backfill wrote into its audit area only
    assert _differs(url, "main", "oracle") == before
    assert f"audit_{bf.id}" in _schemas(url)
    with psycopg.connect(url) as db:
        new_rows = db.execute(f'SELECT count(*) FROM "audit_{bf.id}".fct_daily_sales').fetchone()
    assert new_rows == (DAYS,)  # only the backfilled days, not the seeded copy of the rest
    report = bf.audit()
    assert report.passed, str(report)
    assert len(report["fct_daily_sales"].differing) == DAYS
    pub = bf.publish("revenue from 1 August about 2% lower")
    assert sorted(pub.models) == sorted(BACKFILLED)
    # every table equals dbt's build of the fixed project; audit and work schemas are gone
    assert _differs(url, "main", "oracle") == dict.fromkeys(MODELS, 0)
    assert _schemas(url) == []
    assert p.changelog().publications()[0]["backfill_id"] == bf.id


def test_a_postgres_target_gives_the_warehouse_url_and_missing_settings_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backfill.integrations.dbt.manifest import DbtError

    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\n")
    profile = (
        "p:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
        "      host: db.example\n      user: ana\n      password: \"{{ env_var('PW') }}\"\n"
        "      dbname: shop\n      schema: marts\n"
    )
    (tmp_path / "profiles.yml").write_text(profile)
    monkeypatch.setenv("PW", "p@ss/word")
    got = read_profile(tmp_path)
    assert (got.kind, got.schema, got.path) == ("postgres", "marts", None)
    assert got.url == "postgresql://ana:p%40ss%2Fword@db.example:5432/shop"
    (tmp_path / "profiles.yml").write_text(
        profile.replace("      host: db.example\n", "").replace("{{ env_var('PW') }}", "x")
    )
    with pytest.raises(DbtError, match="needs host"):
        read_profile(tmp_path)
