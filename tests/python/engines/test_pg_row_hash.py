"""The row hash of PostgreSQL's fingerprints is chosen per table from its column types:
``hash_record_extended`` where every type has an extended hash, the text of the row otherwise
(json has none), identically on every path that fingerprints the table; fingerprints recorded
by the text hash of earlier versions still pass publish's re-check."""

from __future__ import annotations

import datetime as dt
from datetime import UTC
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.engines import Column, PublishModel
from backfill.engines.postgres.sql import DIALECT, EXTENDED_HASH_TYPES, extended_hash
from backfill.engines.registry import engine_for
from backfill.engines.sql.core import fingerprint_parts, fingerprint_where
from pg_engine_support import ensure_entry_point

AS_OF = "2026-06-01"


@pytest.fixture(autouse=True)
def _entry_point() -> None:
    ensure_entry_point()


def day(d: int) -> dt.datetime:
    return dt.datetime(2026, 1, d, tzinfo=UTC)


def test_each_type_of_the_record_hash_has_an_extended_hash(pg_server: Any) -> None:
    """Every listed type (and an array of it) hashes by hash_record_extended; json, the reason
    for the text hash, does not."""
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        for t in sorted(EXTENDED_HASH_TYPES):
            conn.execute(f"SELECT hash_record_extended(ROW(NULL::{t}, NULL::{t}[]), 0)")
        with pytest.raises(psycopg.errors.UndefinedFunction, match="extended hash"):
            conn.execute("SELECT hash_record_extended(ROW('{}'::json), 0)")
    assert extended_hash("numeric(18,2)") and extended_hash("timestamp(3) with time zone")
    assert extended_hash("character varying(10)[]") and not extended_hash("json")
    assert not extended_hash("interval") and not extended_hash("my_domain")


def _columns(conn: Any, table: str) -> list[Column]:
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        [table],
    ).fetchall()
    return [Column(str(n), str(t), DIALECT.kind_of(str(t))) for n, t in rows]


def test_int4_and_int8_columns_of_equal_values_fingerprint_alike(pg_server: Any) -> None:
    """hashint8extended hashes an int8 in the int4 range as hashint4extended does, so a
    widened integer column keeps its fingerprints (as the text of the row did); a table with
    a json column keeps the text hash."""
    url = pg_server.create_database("hash")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int4, v numeric(10, 2), at timestamp)")
        conn.execute(
            "INSERT INTO a SELECT g, g * 1.5, TIMESTAMP '2026-01-01' FROM generate_series(1, 50) g"
        )
        conn.execute("CREATE TABLE b (id int8, v numeric(10, 2), at timestamp)")
        conn.execute("INSERT INTO b SELECT * FROM a")
        conn.execute("CREATE TABLE j AS SELECT a.*, '{}'::json AS doc FROM a")

        def run(sql: str) -> list[tuple[Any, ...]]:
            return conn.execute(sql).fetchall()

        ca, cb, cj = (_columns(conn, t) for t in ("a", "b", "j"))
        assert "hash_record_extended" in DIALECT.row_hash(ca, "t")
        assert "hashtextextended" in DIALECT.row_hash(cj, "t")
        assert fingerprint_where(DIALECT, run, "a", ca) == fingerprint_where(DIALECT, run, "b", cb)
        # the text hash still tells NULL from '' (a fingerprint of j is one of its text)
        assert fingerprint_where(DIALECT, run, "j", cj).rows == 50


MODELS = {
    "plain": "select id, note, v, at from {{ source('raw', 'ev') }} e\n"
    "where at >= {{ start }} and at < {{ end }}",
    "with_json": "select id, doc, at from {{ source('raw', 'ev') }} e\n"
    "where at >= {{ start }} and at < {{ end }}",
}
YML = """name: hashes
engine: {{type: postgres, url: "{url}", schema: pub}}
state: .backfill
sources:
  raw:
    ev: {{grain: day, tz: UTC, event_time: at}}
models:
  defaults: {{grain: day, tz: UTC, begin: "2026-01-01", strategy: replace}}
  plain: {{event_time: at, unique_key: id}}
  with_json: {{event_time: at, unique_key: id}}
"""


def _project(tmp_path: Path, url: str) -> backfill.Project:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA raw; CREATE TABLE raw.ev (id int, note text, v numeric(10, 2), "
            "doc json, at timestamp)"
        )
        conn.execute(
            "INSERT INTO raw.ev SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END, "
            "g * 1.25, json_build_object('g', g), TIMESTAMP '2026-01-01' + g * INTERVAL "
            "'3 hours' FROM generate_series(0, 31) g"
        )  # 1-4 Jan
    (tmp_path / "models").mkdir()
    for name, sql in MODELS.items():
        (tmp_path / "models" / f"{name}.sql").write_text(sql + "\n", encoding="utf-8")
    (tmp_path / "backfill.yml").write_text(YML.format(url=url), encoding="utf-8")
    return backfill.Project.load(tmp_path)


def test_a_planted_change_is_found_with_either_hash_and_published(
    pg_server: Any, tmp_path: Path
) -> None:
    url = pg_server.create_database("hashes")
    project = _project(tmp_path, url)
    plan = project.plan("*", "2026-01-01", "2026-01-05", as_of=AS_OF)
    assert project.backfill(plan, reason="build", direct=True).run(concurrency=4).ok
    with psycopg.connect(url, autocommit=True) as conn:  # one row of 3 Jan changes
        conn.execute(
            "UPDATE raw.ev SET note = 'planted', v = 99, doc = '{\"g\": -1}' WHERE id = 17"
        )
    plan = project.plan("*", "2026-01-02", "2026-01-05", as_of=AS_OF)
    bf = project.backfill(plan, reason="planted")
    assert bf.run(concurrency=4, backoff=0.0).ok
    report = bf.audit()
    for model in ("plain", "with_json"):
        differing = [p for p in report[model].partitions if not p.identical]
        # only the changed day differs: the written, the scanned and the audited fingerprints
        # of the unchanged days agree, whichever hash the table's types chose
        assert [(p.label, p.changed) for p in differing] == [("2026-01-03", 1)], model
    bf.publish("planted")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT note, v FROM pub.plain WHERE id = 17").fetchone() == (
            "planted",
            99,
        )
        doc = conn.execute("SELECT doc::text FROM pub.with_json WHERE id = 17").fetchone()
        assert doc == ('{"g": -1}',)


def test_fingerprints_recorded_by_the_text_hash_pass_publishs_recheck(
    pg_server: Any, tmp_path: Path
) -> None:
    """An audit recorded before the record hash (its published fingerprints are of the text
    hash) is published after the upgrade: the re-check accepts the partitions whose text
    fingerprint is the one recorded, and still finds a partition that changed since."""
    url = pg_server.create_database("legacy")
    project = _project(tmp_path, url)
    plan = project.plan("*", "2026-01-01", "2026-01-05", as_of=AS_OF)
    assert project.backfill(plan, reason="build", direct=True).run(concurrency=4).ok
    engine = engine_for(project)
    parts = [(f"2026-01-0{d}", day(d), day(d + 1)) for d in (1, 2, 3, 4)]
    try:
        with engine.connect() as cur:
            rel = engine.published(project, "plain")
            cols = engine._columns(cur, rel) or []
            legacy = DIALECT.legacy_row_hash(cols, "t")
            assert legacy is not None and "hashtextextended" in legacy

            def run(sql: str) -> list[tuple[Any, ...]]:
                return list(cur.execute(sql).fetchall())

            source = DIALECT.qualified(rel)
            recorded = {
                label: fingerprint_where(
                    DIALECT, run, source, cols, DIALECT.in_periods("at", [(s, e)]), row_hash=legacy
                )
                for label, s, e in parts
            }
            now = fingerprint_parts(DIALECT, run, source, cols, ("at", None), parts)
            assert all(now[label] != recorded[label] for label, _, _ in parts if now[label].rows)
            pm = PublishModel("plain", tuple(parts), recorded)
            assert engine._stale(cur, project, pm) == []
            cur.execute(f"UPDATE {source} SET v = v + 1 WHERE id = 17")  # 3 Jan
            assert engine._stale(cur, project, pm) == ["2026-01-03"]
    finally:
        engine.close()
