"""Publish, discard and the consumers' changelog.

>>> bf.publish(note="revenue from 1 Aug was overstated by ~2%")     # doctest: +SKIP
>>> print(project.changelog())                                       # doctest: +SKIP

``publish`` swaps every backfilled partition of every model of the backfill into the published
tables in ONE DuckDB transaction (delete the periods, insert them from the audit area; ``merge``
models upsert on their unique key, ``full`` models replace the table), together with the rows of
the ``backfill_changelog`` table. Readers use snapshot isolation, so a query sees either all the
old versions or all the new ones, never fct_daily_sales new and fct_monthly_sales old.

It refuses (``ConflictError``) when:

* the latest audit failed a gate, unless ``force_reason`` says why it is right anyway (recorded);
* there is no audit, or the backfill's tasks changed its audit area since (re-run -> re-audit);
* the published tables changed since the audit (someone else published over the same periods):
  the fingerprints recorded at audit time are compared inside the publishing transaction, so
  nothing can slip in between the check and the swap. Re-audit, then publish.

``backfill_changelog`` (in the published schema) has one row per changed (model, partition,
measure) with old/new values and delta, plus one row per model (partition NULL) summing it up;
each row carries the publication id, backfill id, reason, note, forced reason, when and who.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from ._arrow import html_table
from ._tables import RowTable
from .audit import _engine, backfill_partitions, fingerprint_model, fingerprints_sql
from .engines.base import Area
from .engines.duckdb import (DuckDBEngine, _in_periods, quote, relation_exists, relation_kind,
                             transaction)
from .errors import ConflictError, InvalidInputError
from .ledger import utcnow

if TYPE_CHECKING:  # pragma: no cover
    from .project import Project
    from .runner import Backfill

log = logging.getLogger(__name__)

__all__ = ["CHANGELOG_TABLE", "Changelog", "Publication", "changelog", "discard_backfill",
           "publish_backfill"]

CHANGELOG_TABLE = "backfill_changelog"
_CHANGELOG_COLUMNS = (
    ("publication_id", "VARCHAR"), ("backfill_id", "VARCHAR"), ("published_at", "TIMESTAMPTZ"),
    ("published_by", "VARCHAR"), ("reason", "VARCHAR"), ("note", "VARCHAR"),
    ("forced_reason", "VARCHAR"), ("model", "VARCHAR"), ("partition", "VARCHAR"),
    ("period_start", "TIMESTAMPTZ"), ("period_end", "TIMESTAMPTZ"), ("partitions", "INTEGER"),
    ("rows_old", "BIGINT"), ("rows_new", "BIGINT"), ("rows_added", "BIGINT"),
    ("rows_removed", "BIGINT"), ("rows_changed", "BIGINT"), ("measure", "VARCHAR"),
    ("value_old", "DOUBLE"), ("value_new", "DOUBLE"), ("delta", "DOUBLE"), ("pct_delta", "DOUBLE"),
)


@dataclass(frozen=True)
class Publication:
    id: str
    backfill_id: str
    published_at: str
    published_by: str
    note: str
    forced_reason: str | None
    models: dict[str, list[str]]  # model -> changed partition labels
    changelog_rows: int

    def __str__(self) -> str:
        changed = {m: p for m, p in self.models.items() if p}
        text = (f"published {self.backfill_id} as {self.id} at {self.published_at} by "
                f"{self.published_by}: {len(self.models)} model(s), "
                f"{sum(len(p) for p in changed.values())} changed partition(s)")
        if self.forced_reason:
            text += f" (FORCED past failed gates: {self.forced_reason})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _latest_audit(bf: Backfill) -> list[dict[str, Any]]:
    rows = bf.ledger.audits(bf.id)
    if not rows:
        raise ConflictError(f"backfill {bf.id} has not been audited; run `backfill audit "
                            f"{bf.id}` (bf.audit()) before publishing")
    latest = json.loads(rows[-1]["result"])["audit_id"]
    out = []
    for r in rows:
        result = json.loads(r["result"])
        if result["audit_id"] == latest:
            out.append({**r, "result": result,
                        "published_fingerprints": json.loads(r["published_fingerprints"])})
    return out


def _check_fresh(engine: DuckDBEngine, project: Project, bf: Backfill, model: str,
                 parts: Sequence[tuple[str, dt.datetime, dt.datetime]],
                 audit: dict[str, Any]) -> None:
    now_new = fingerprint_model(engine, project, model, bf.area, parts)
    if now_new != audit["result"]["audit_fingerprints"]:
        raise ConflictError(f"the audit area of {model} changed since the audit (a task ran "
                            f"again); re-audit first: backfill audit {bf.id}")


def _stale(cur: duckdb.DuckDBPyConnection, engine: DuckDBEngine, model: str, event_time: str | None,
           parts: Sequence[tuple[str, dt.datetime, dt.datetime]], recorded: dict[str, str]) -> list[str]:
    """Partitions whose published fingerprint differs from ``recorded`` (inside the caller's
    transaction, so the check and the swap see the same snapshot)."""
    pub = engine.published(model)
    if not relation_exists(cur, pub):
        return [lab for lab, fp in recorded.items() if not fp.startswith("0:")]
    now = fingerprints_sql(cur, engine, pub, event_time, parts)
    return [lab for lab in recorded if now.get(lab) != recorded[lab]]


def _changelog_rows(pub_id: str, bf: Backfill, rec: dict[str, Any], when: dt.datetime, who: str,
                    note: str, forced: str | None, audit: dict[str, Any],
                    parts: Sequence[tuple[str, dt.datetime, dt.datetime]]) -> list[tuple[Any, ...]]:
    res = audit["result"]
    head = (pub_id, bf.id, when, who, rec["reason"], note, forced, res["model"])
    rows: list[tuple[Any, ...]] = []
    first = parts[0][1] if parts else None
    last = parts[-1][2] if parts else None
    rows.append((*head, None, first, last, res["partitions_total"],
                 sum(p["rows_old"] for p in res["partitions"]),
                 sum(p["rows_new"] for p in res["partitions"]), res["rows_added"],
                 res["rows_removed"], res["rows_changed"], None, None, None, None, None))
    for measure, (old, new) in res["totals"].items():
        o, n = float(old or 0), float(new or 0)
        rows.append((*head, None, first, last, res["partitions_total"], None, None, None, None,
                     None, measure, old, new, n - o, (n - o) / abs(o) * 100 if o else None))
    for p in res["partitions"]:
        if p["identical"]:
            continue
        start = dt.datetime.fromisoformat(p["start"]) if p["start"] else None
        end = dt.datetime.fromisoformat(p["end"]) if p["end"] else None
        base = (*head, p["label"], start, end, 1, p["rows_old"], p["rows_new"], p["added"],
                p["removed"], p["changed"])
        if not p["measures"]:
            rows.append((*base, None, None, None, None, None))
        for measure, (old, new, delta, pct) in p["measures"].items():
            rows.append((*base, measure, old, new, delta, pct))
    return rows


def publish_backfill(bf: Backfill, note: str, force_reason: str | None = None) -> Publication:
    """Publishes ``bf`` (see the module doc); returns the :class:`Publication`."""
    from .runner import _who

    if not isinstance(note, str) or not note.strip():
        raise InvalidInputError("publish needs a note for the consumers' changelog, e.g. "
                                "note='revenue from 1 Aug was overstated by ~2%'")
    if force_reason is not None and (not isinstance(force_reason, str) or not force_reason.strip()):
        raise InvalidInputError(f"force_reason {force_reason!r}: say why publishing past a "
                                "failed gate is right")
    project = bf.project
    rec = bf.ledger.backfill(bf.id)
    if bf.mode != "audit":
        raise InvalidInputError(f"backfill {bf.id} wrote the published tables directly; there "
                                "is nothing to publish")
    if rec["status"] != "done":
        raise InvalidInputError(f"backfill {bf.id} is {rec['status']}; only a finished "
                                "('done') backfill can be published")
    engine = _engine(bf)
    try:
        return _publish(bf, engine, rec, note, force_reason)
    finally:
        engine.close()  # let other processes (readers, runners) open the file


def _publish(bf: Backfill, engine: DuckDBEngine, rec: dict[str, Any], note: str,
             force_reason: str | None) -> Publication:
    from .runner import _who

    project = bf.project
    audits = {a["model"]: a for a in _latest_audit(bf)}
    parts = backfill_partitions(project, bf)
    missing = [m for m in parts if m not in audits]
    if missing:
        raise ConflictError(f"the latest audit of {bf.id} did not cover {', '.join(missing)}; "
                            f"re-audit first: backfill audit {bf.id}")
    failed = [g for a in audits.values() for g in a["result"]["gates"] if not g["passed"]]
    if failed and force_reason is None:
        lines = "\n  ".join(f"{g['model']}: {g['gate']} -- {g['reason']}" for g in failed)
        raise ConflictError(f"backfill {bf.id} failed {len(failed)} gate(s); fix it, or publish "
                            f"with force_reason='why this is right' (--force REASON):\n  {lines}")
    for model, model_parts in parts.items():
        _check_fresh(engine, project, bf, model, model_parts, audits[model])
    order = [m for m in project.topological_order() if m in parts]
    # A view holds no rows: publishing it re-creates it over the published tables with the
    # backfill's definition, rendered before the transaction (a dbt engine compiles it with dbt).
    views = {m: engine.render(project, m, None, None, Area(None)) for m in order
             if project.models[m].strategy == "view"}
    pub_id = f"pub_{uuid.uuid4().hex[:10]}"
    when = dt.datetime.now(dt.timezone.utc)
    who = _who()
    forced = force_reason.strip() if force_reason else None
    log_rows: list[tuple[Any, ...]] = []
    with engine.connect() as cur, transaction(cur):
        # Every check before any swap: a published view reads tables swapped before it.
        for model in order:
            stale = _stale(cur, engine, model, project.models[model].event_time,
                           parts[model], audits[model]["published_fingerprints"])
            if stale:
                raise ConflictError(
                    f"the published {model} changed since the audit of {bf.id} in "
                    f"{len(stale)} partition(s) ({', '.join(stale[:5])}"
                    f"{', ...' if len(stale) > 5 else ''}): someone else published; "
                    f"re-audit first: backfill audit {bf.id}")
        for model in order:
            if model in views:
                _replace_view(cur, engine.published(model), views[model])
            else:
                _swap(cur, engine, bf, model, parts[model])
            log_rows += _changelog_rows(pub_id, bf, rec, when, who, note.strip(), forced,
                                        audits[model], parts[model])
        table = f"{quote(engine.schema)}.{quote(CHANGELOG_TABLE)}"
        cols = ", ".join(f"{quote(n)} {t}" for n, t in _CHANGELOG_COLUMNS)
        cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
        marks = ", ".join("?" for _ in _CHANGELOG_COLUMNS)
        cur.executemany(f"INSERT INTO {table} VALUES ({marks})", log_rows)
    changed = {a["model"]: [p["label"] for p in a["result"]["partitions"] if not p["identical"]]
               for a in audits.values()}
    publication = Publication(pub_id, bf.id, when.isoformat(timespec="seconds"), who,
                              note.strip(), forced, changed, len(log_rows))
    with bf.ledger._tx() as db:
        db.execute("INSERT INTO publications (backfill_id, published_at, published_by, note, "
                   "forced_reason, models) VALUES (?, ?, ?, ?, ?, ?)",
                   (bf.id, publication.published_at, who, publication.note, forced,
                    json.dumps({"publication_id": pub_id, "models": changed})))
    bf.ledger.set_status(bf.id, "published")
    engine.drop_area(bf.id)  # the changelog keeps what changed; the old version is gone
    log.info("%s", publication)
    return publication


def _replace_view(cur: duckdb.DuckDBPyConnection, relation: str, sql: str) -> None:
    if relation_kind(cur, relation) == "table":  # the model was a table, is now a view
        cur.execute(f"DROP TABLE {relation}")
    cur.execute(f"CREATE OR REPLACE VIEW {relation} AS {sql}")


def _swap(cur: duckdb.DuckDBPyConnection, engine: DuckDBEngine, bf: Backfill, model: str,
          parts: Sequence[tuple[str, dt.datetime, dt.datetime]]) -> None:
    m = bf.project.models[model]
    pub, new = engine.published(model), engine.relation(model, bf.area)
    if relation_kind(cur, pub) == "view":  # the model was a view, is now a table
        cur.execute(f"DROP VIEW {pub}")
    if not relation_exists(cur, pub) or m.strategy == "full" or not parts or not m.event_time:
        cur.execute(f"CREATE OR REPLACE TABLE {pub} AS SELECT * FROM {new}")
        return
    old_cols = {r[0] for r in cur.execute(f"DESCRIBE {pub}").fetchall()}
    new_cols = {r[0] for r in cur.execute(f"DESCRIBE {new}").fetchall()}
    if old_cols != new_cols:
        raise ConflictError(f"{model}: the backfill changes its columns ({sorted(new_cols ^ old_cols)}"
                            "); publishing some partitions cannot change a table's schema -- "
                            "rebuild the model with strategy full")
    if m.strategy == "merge" and m.unique_key:
        keys = ", ".join(quote(k) for k in m.unique_key)
        cur.execute(f"DELETE FROM {pub} WHERE ({keys}) IN (SELECT ({keys}) FROM {new})")
    else:
        cur.execute(f"DELETE FROM {pub} WHERE {_in_periods(m.event_time, [(s, e) for _, s, e in parts])}")
    cur.execute(f"INSERT INTO {pub} BY NAME SELECT * FROM {new}")


def discard_backfill(bf: Backfill) -> None:
    """Drops the audit area of an unpublished backfill and marks it discarded."""
    rec = bf.ledger.backfill(bf.id)
    if rec["status"] == "published":
        raise ConflictError(f"backfill {bf.id} is published; discarding it would not undo that "
                            "(backfill the period again to change it)")
    if bf.mode != "audit":
        raise InvalidInputError(f"backfill {bf.id} wrote the published tables directly; there "
                                "is no audit area to discard")
    workers = bf.ledger.live_workers(bf.id)
    if workers:
        raise ConflictError(f"backfill {bf.id} has tasks running (workers "
                            f"{', '.join(sorted(workers))}); stop its runners first")
    bf.engine.drop_area(bf.id)
    bf.engine.close()
    bf.ledger.set_status(bf.id, "discarded", finished=True)
    log.info("discarded backfill %s", bf.id)


# -- the changelog ------------------------------------------------------------------------------
class Changelog:
    """Publications from ``backfill_changelog``, newest first. ``.rows`` is the full table;
    ``str()`` tells each publication's models, periods, measure deltas, reason, note, when, who."""

    def __init__(self, rows: RowTable) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len({r["publication_id"] for r in self.rows.to_pylist()})

    def publications(self) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.rows.to_pylist():
            p = out.setdefault(r["publication_id"], {
                "publication_id": r["publication_id"], "backfill_id": r["backfill_id"],
                "published_at": str(r["published_at"]), "published_by": r["published_by"],
                "reason": r["reason"], "note": r["note"], "forced_reason": r["forced_reason"],
                "models": {}})
            mod = p["models"].setdefault(r["model"], {"period": None, "partitions": 0,
                                                      "changed_partitions": [], "totals": {},
                                                      "rows": {}})
            if r["partition"] is None:
                mod["period"] = [str(r["period_start"]), str(r["period_end"])]
                mod["partitions"] = r["partitions"]
                if r["measure"] is None:
                    mod["rows"] = {k: r[f"rows_{k}"] for k in ("added", "removed", "changed")}
                else:
                    mod["totals"][r["measure"]] = {"old": r["value_old"], "new": r["value_new"],
                                                   "delta": r["delta"], "pct": r["pct_delta"]}
            elif r["partition"] not in mod["changed_partitions"]:
                mod["changed_partitions"].append(r["partition"])
        return list(out.values())

    def to_dict(self) -> list[dict[str, Any]]:
        return self.publications()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        return self.rows.to_pandas()

    def __str__(self) -> str:
        pubs = self.publications()
        if not pubs:
            return "changelog: no publications"
        lines = []
        for p in pubs:
            lines.append(f"{p['published_at'][:19]}  {p['publication_id']} ({p['backfill_id']}) "
                         f"by {p['published_by']}")
            lines.append(f"  reason: {p['reason']}")
            lines.append(f"  note:   {p['note']}")
            if p["forced_reason"]:
                lines.append(f"  FORCED past failed gates: {p['forced_reason']}")
            for model, mod in p["models"].items():
                period = mod["period"] or ["", ""]
                n = len(mod["changed_partitions"])
                text = (f"  {model}: {n} of {mod['partitions']} partition(s) changed "
                        f"in [{period[0][:10]}, {period[1][:10]})")
                for measure, t in mod["totals"].items():
                    if t["delta"]:
                        pct = "" if t["pct"] is None else f" ({t['pct']:+.2f}%)"
                        text += f"; {measure} {t['delta']:+,.2f}{pct}"
                lines.append(text)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Changelog {len(self)} publication(s), {self.rows.num_rows} rows>"

    def _repr_html_(self) -> str | None:
        pubs = self.publications()
        if len(pubs) > 200:
            return None
        e = html.escape
        parts = ["<div class='backfill-changelog'>"]
        for p in pubs:
            rows = [[m, str(len(mod["changed_partitions"])), str(mod["partitions"]),
                     "; ".join(f"{k} {v['delta']:+,.2f}" for k, v in mod["totals"].items()
                               if v["delta"])] for m, mod in p["models"].items()]
            parts.append(f"<p><b>{e(p['published_at'][:19])}</b> {e(p['publication_id'])} by "
                         f"{e(p['published_by'])}: {e(p['reason'])} &mdash; {e(p['note'])}</p>")
            parts.append(html_table(["model", "changed partitions", "partitions", "deltas"], rows))
        parts.append("</div>")
        return "".join(parts)


def changelog(project: Project, *, backfill_id: str | None = None,
              engine: DuckDBEngine | None = None) -> Changelog:
    """The publications recorded in the warehouse's ``backfill_changelog`` (newest first)."""
    from .engines import open_engine

    if engine is None:
        if project.settings is None:
            raise InvalidInputError(f"{project!r} has no engine settings: load it from a "
                                    "project directory (Project.load)")
        opened = open_engine(project.settings.engine)
        if not isinstance(opened, DuckDBEngine):
            raise InvalidInputError(f"the changelog needs the DuckDB engine; got {opened!r}")
        engine = opened
    table = f"{quote(engine.schema)}.{quote(CHANGELOG_TABLE)}"
    names = [n for n, _ in _CHANGELOG_COLUMNS]
    with engine.connect() as cur:
        if not relation_exists(cur, table):
            return Changelog(RowTable(names, []))
        where = "WHERE backfill_id = ?" if backfill_id else ""
        rows = cur.execute(f"SELECT * FROM {table} {where} ORDER BY published_at DESC, "
                           "model, partition NULLS FIRST, measure NULLS FIRST",
                           [backfill_id] if backfill_id else []).fetchall()
    engine.close()
    return Changelog(RowTable(names, rows, caption="backfill_changelog"))

