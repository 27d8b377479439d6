"""Helpers for the tests of the PostgreSQL engine: the shop on a throwaway server, and the
``postgres`` engine entry point for a checkout whose installed metadata predates it.

Entry points come from the installed package's metadata (written at ``pip install``); until the
package is reinstalled, :func:`ensure_entry_point` adds a one-line distribution on ``sys.path``
that registers it (and returns the folder, for a subprocess's ``PYTHONPATH``). Once the installed
metadata has it, it does nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backfill.engines import engine_types

_SHIM: Path | None = None
ENTRY = "postgres = backfill.engines.postgres:PostgresEngine.from_settings"


def ensure_entry_point() -> Path | None:
    """Makes ``open_engine`` find the ``postgres`` type in this process; returns the folder
    to put on a subprocess's PYTHONPATH (None when the installed metadata has it)."""
    global _SHIM
    if _SHIM is None and "postgres" in engine_types():
        return None
    if _SHIM is None:
        base = Path(tempfile.mkdtemp(prefix="backfill-ep-"))
        info = base / "backfill_postgres_engine-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: backfill-postgres-engine\nVersion: 0.0\n"
        )
        (info / "entry_points.txt").write_text(f"[backfill.engines]\n{ENTRY}\n")
        _SHIM = base
        sys.path.append(str(base))
    return _SHIM


def subprocess_env() -> dict[str, str]:
    """The environment of a ``backfill`` subprocess that must find the postgres engine."""
    env = dict(os.environ)
    shim = ensure_entry_point()
    if shim is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(shim)) if p)
    return env


@dataclass
class PgShop:
    """The shop built once (with the bug) in the database ``template`` of a throwaway server;
    :meth:`copy` gives a test its own database (``CREATE DATABASE ... TEMPLATE``, a file copy
    in the server: fast) and project files naming it."""

    server: Any
    root: Path
    template: str
    url: str

    def copy(self, dest: Path) -> tuple[Path, str]:
        import psycopg

        name = f"shop_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            # A template must have no other sessions.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "datname = %s AND pid <> pg_backend_pid()",
                [self.template],
            )
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        url = self.server.url(name)
        shutil.copytree(self.root, dest, ignore=shutil.ignore_patterns(".backfill"))
        yml = dest / "backfill.yml"
        yml.write_text(yml.read_text(encoding="utf-8").replace(self.url, url), encoding="utf-8")
        return dest, url


#: the shop's models with partitioned tables (the conformance suite's postgres-partitioned case):
#: the backfilled days exchange whole day, week and month partitions, and copy days inside a
#: month (clean_orders) or a week (fct_sales_7d's days after the backfill's last whole week);
#: timestamptz (the clean models) and date (the facts) event times
TABLE_PARTITIONS = {
    "clean_orders": "month",
    "clean_order_items": "day",
    "fct_daily_sales": "day",
    "fct_monthly_sales": "month",
    "fct_sales_7d": "week",
}


def partition_tables(root: Path, layout: dict[str, str]) -> None:
    """Gives the models of ``layout`` their ``table_partitions`` in ``root``'s backfill.yml."""
    yml = root / "backfill.yml"
    text = yml.read_text(encoding="utf-8")
    for model, grain in layout.items():
        text, n = re.subn(
            rf"^  {model}: {{", f"  {model}: {{table_partitions: {grain}, ", text, flags=re.M
        )
        assert n == 1, f"{model} is not configured in {yml}"
    yml.write_text(text, encoding="utf-8")


def build_pg_shop(
    server: Any,
    base: Path,
    *,
    orders_per_day: int = 12,
    table_partitions: dict[str, str] | None = None,
) -> PgShop:
    """The shop (project files in ``base/shop``, data in a new database) built with the bug,
    straight into the published tables (partitioned as ``table_partitions`` says)."""
    from backfill.examples.shop import postgres as shop_pg
    from shop_support import build

    ensure_entry_point()
    url = server.create_database("shop_built")
    root = shop_pg.create(base / "shop", url, orders_per_day=orders_per_day)
    if table_partitions:
        partition_tables(root, table_partitions)
    build(root)
    return PgShop(server, root, url.rsplit("/", 1)[1], url)
