"""The consumers' changelog: the rows a publish writes (one per changed (model, partition,
measure) with old/new values and delta, plus one per model summing it up; each with the
publication id, backfill id, reason, note, forced reason, when and who) and ``Changelog``, what
``project.changelog()`` reads back from the engine. Forward-only changes and delivery records
are rows of the same table, told apart by :func:`row_kind`.

Measure values are stored exactly (integers and decimals as the audit summed them; see
``CHANGELOG_SCALE``) with their ``value_type``, and read back as int, Decimal at their scale, or
float. Every changed partition has its rows, so each entry also lists, per model and measure, the
partitions that moved most (largest ``|delta|``), as the audit report does."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._numbers import delta, from_json, pct, to_kind, typed, value_type
from .._secrets import mask_text
from .._tables import RowTable
from ..engines import CHANGELOG_COLUMNS, Engine, Part, PublishedVersion
from ..engines.registry import engine_for
from ..errors import InvalidInputError, NotFoundError
from ..model.landing import landing_models
from .changelog_format import html_fragment, render

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..run.ledger import AuditRecord

__all__ = [
    "FORWARD_PREFIX",
    "ROLLBACK_PREFIX",
    "Changelog",
    "EntryHead",
    "changelog",
    "changelog_rows",
    "delivery_row",
    "forward_row",
    "row_kind",
]

#: publication ids of forward-only changes start with this (those of publishes with ``pub_``)
FORWARD_PREFIX = "fwd_"
#: publication ids of rollbacks start with this
ROLLBACK_PREFIX = "rb_"
#: the row counts and the measure columns (rows_old .. value_type), unused by forward and
#: delivery rows
_NO_COUNTS = (None,) * 11
#: how many partitions an entry lists per model and measure as those that moved most
TOP_PARTITIONS = 5


@dataclasses.dataclass(frozen=True)
class EntryHead:
    """What every changelog row of one publication repeats: its id, the backfill, who published
    it when, why, the note and the forced reason (None when the gates passed)."""

    pub_id: str
    backfill_id: str
    reason: str
    when: dt.datetime
    who: str
    note: str
    forced: str | None

    def columns(self, model: str) -> tuple[Any, ...]:
        """The leading changelog columns (publication_id .. model) of a row about ``model``."""
        return (
            self.pub_id,
            self.backfill_id,
            self.when,
            self.who,
            self.reason,
            self.note,
            self.forced,
            model,
        )


def changelog_rows(
    entry: EntryHead, audit: AuditRecord, parts: Sequence[Part]
) -> list[tuple[Any, ...]]:
    """The changelog rows of one model of a publication, from its recorded audit."""
    res = audit.result
    head = entry.columns(res["model"])
    rows: list[tuple[Any, ...]] = []
    first = parts[0][1] if parts else None
    last = parts[-1][2] if parts else None
    rows.append(
        (
            *head,
            None,
            first,
            last,
            res["partitions_total"],
            sum(p["rows_old"] for p in res["partitions"]),
            sum(p["rows_new"] for p in res["partitions"]),
            res["rows_added"],
            res["rows_removed"],
            res["rows_changed"],
            None,
            None,
            None,
            None,
            None,
            None,
        )
    )
    kinds: dict[str, str] = res.get("measure_kinds", {})
    types: dict[str, str] = {}
    for measure, (old_j, new_j) in res["totals"].items():
        old, new = from_json(old_j), from_json(new_j)
        kind = kinds.get(measure) or (
            "float" if isinstance(old, float) or isinstance(new, float) else "decimal"
        )
        old, new = to_kind(old, kind), to_kind(new, kind)
        o, n = old if old is not None else 0, new if new is not None else 0
        types[measure] = value_type(kind, (old, new))
        rows.append(
            (
                *head,
                None,
                first,
                last,
                res["partitions_total"],
                None,
                None,
                None,
                None,
                None,
                measure,
                old,
                new,
                delta(o, n),
                pct(o, n),
                types[measure],
            )
        )
    for p in res["partitions"]:
        if p["identical"]:
            continue
        start = dt.datetime.fromisoformat(p["start"]) if p["start"] else None
        end = dt.datetime.fromisoformat(p["end"]) if p["end"] else None
        base = (
            *head,
            p["label"],
            start,
            end,
            1,
            p["rows_old"],
            p["rows_new"],
            p["added"],
            p["removed"],
            p["changed"],
        )
        if not p["measures"]:
            rows.append((*base, None, None, None, None, None, None))
        for measure, (old, new, d, pc) in p["measures"].items():
            rows.append(
                (
                    *base,
                    measure,
                    from_json(old),
                    from_json(new),
                    from_json(d),
                    pc,
                    types.get(measure),
                )
            )
    return rows


def forward_row(
    fwd_id: str, when: dt.datetime, who: str, reason: str, note: str, model: str, start: dt.datetime
) -> tuple[Any, ...]:
    """The changelog row of a forward-only change of ``model`` from ``start``."""
    return (fwd_id, None, when, who, reason, note, None, model, None, start, None, 0, *_NO_COUNTS)


def delivery_row(
    pub_id: str,
    backfill_id: str | None,
    when: dt.datetime,
    who: str,
    channel: str,
    consumer: str,
    ok: bool,
    detail: str,
) -> tuple[Any, ...]:
    """The changelog row recording one delivery (or failed delivery) of a change to a consumer."""
    return (
        pub_id,
        backfill_id,
        when,
        who,
        "delivered" if ok else "failed",
        detail,
        None,
        None,
        f"{channel} {consumer}",
        None,
        None,
        None,
        *_NO_COUNTS,
    )


def row_kind(row: Mapping[str, Any]) -> str:
    """Which kind of changelog row ``row`` is (the table's columns are shared by all kinds):

    * ``publication``: a publish (``pub_...``): per model, per measure and per changed partition;
    * ``rollback``: a publication taken back (``rb_...``), rows as a publication's with old and
      new swapped (``reason`` names the publication taken back);
    * ``forward``: a forward-only change (``fwd_...``): a model changed from ``period_start`` on,
      history before it deliberately not rebuilt (no backfill id);
    * ``delivery``: telling a consumer about a publication or forward change (no model;
      ``partition`` is "CHANNEL CONSUMER", ``reason`` is "delivered" or "failed", ``note`` the
      target, attempts and error), written after the change itself.
    """
    if row["model"] is None:
        return "delivery"
    pid = str(row["publication_id"])
    if pid.startswith(ROLLBACK_PREFIX):
        return "rollback"
    return "forward" if pid.startswith(FORWARD_PREFIX) else "publication"


def _iso(value: Any) -> str | None:
    return None if value is None else str(value)


def _values(r: Mapping[str, Any]) -> dict[str, Any]:
    """old, new, delta, pct of a measure row, as its value_type says (exact or float)."""
    t = r.get("value_type")
    return {
        "old": typed(r["value_old"], t),
        "new": typed(r["value_new"], t),
        "delta": typed(r["delta"], t),
        "pct": r["pct_delta"],
        "type": t,
    }


def _top(moved: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partitions that moved most: largest |delta| first, ties in partition order."""
    nonzero = sorted((m for m in moved if m["delta"]), key=lambda m: str(m["partition"]))
    return sorted(nonzero, key=lambda m: abs(m["delta"]), reverse=True)[:TOP_PARTITIONS]


class Changelog:
    """Publications and forward-only changes from ``backfill_changelog``, newest first, each with
    the deliveries that told consumers about it. ``.rows`` is the full table; ``str()`` tells each
    entry's models, periods, measure deltas, reason, note, when, who; ``.format(...)`` renders it
    as text, markdown, html or json (``backfill changelog --format``)."""

    def __init__(self, rows: RowTable, kept: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.rows = rows
        #: per publication id: whether and until when it can be rolled back, rows kept apart
        self.kept = dict(kept or {})

    def __len__(self) -> int:
        return len(self.publications())

    def publications(self) -> list[dict[str, Any]]:
        """One dict per publication or forward change (``kind``), newest first."""
        out: dict[str, dict[str, Any]] = {}
        deliveries: dict[str, list[dict[str, Any]]] = {}
        for r in self.rows.to_pylist():
            kind = row_kind(r)
            if kind == "delivery":
                channel, _, consumer = str(r["partition"]).partition(" ")
                # Masked again as read: a row written before webhooks were masked holds the
                # whole URL (a credential), as a consumer named by it or in the detail.
                deliveries.setdefault(r["publication_id"], []).append(
                    {
                        "at": _iso(r["published_at"]),
                        "channel": channel,
                        "consumer": mask_text(consumer, hide_paths=True),
                        "ok": r["reason"] == "delivered",
                        "detail": None
                        if r["note"] is None
                        else mask_text(str(r["note"]), hide_paths=True),
                    }
                )
                continue
            p = out.setdefault(
                r["publication_id"],
                {
                    "kind": kind,
                    "publication_id": r["publication_id"],
                    "backfill_id": r["backfill_id"],
                    "published_at": _iso(r["published_at"]),
                    "published_by": r["published_by"],
                    "reason": r["reason"],
                    "note": r["note"],
                    "forced_reason": r["forced_reason"],
                    "models": {},
                },
            )
            mod = p["models"].setdefault(
                r["model"],
                {
                    "period": None,
                    "partitions": 0,
                    "changed_partitions": [],
                    "totals": {},
                    "rows": {},
                },
            )
            if kind == "forward":
                mod["period"] = [_iso(r["period_start"]), None]
            elif r["partition"] is None:
                mod["period"] = [_iso(r["period_start"]), _iso(r["period_end"])]
                mod["partitions"] = r["partitions"]
                if r["measure"] is None:
                    mod["rows"] = {k: r[f"rows_{k}"] for k in ("added", "removed", "changed")}
                else:
                    mod["totals"][r["measure"]] = _values(r)
            else:
                if r["partition"] not in mod["changed_partitions"]:
                    mod["changed_partitions"].append(r["partition"])
                if r["measure"] is not None:
                    mod.setdefault("moved", {}).setdefault(r["measure"], []).append(
                        {"partition": r["partition"], **_values(r)}
                    )
        for pid, p in out.items():
            p["deliveries"] = sorted(deliveries.get(pid, []), key=lambda d: str(d["at"]))
            if pid in self.kept:
                p["rollback"] = dict(self.kept[pid])
            for mod in p["models"].values():
                moved = mod.pop("moved", {})
                mod["top_partitions"] = {m: _top(v) for m, v in moved.items() if _top(v)}
        return sorted(out.values(), key=lambda p: str(p["published_at"]), reverse=True)

    def to_dict(self) -> list[dict[str, Any]]:
        return self.publications()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> Any:
        return self.rows.to_pandas()

    def format(self, fmt: str = "text") -> str:
        """The changelog as ``text`` (``str()``), ``markdown``, ``html`` (a whole page) or
        ``json``."""
        return render(self.publications(), fmt)

    def __str__(self) -> str:
        return render(self.publications(), "text")

    def __repr__(self) -> str:
        return f"<Changelog {len(self)} entries, {self.rows.num_rows} rows>"

    def _repr_html_(self) -> str | None:
        pubs = self.publications()
        if len(pubs) > 200:
            return None
        return html_fragment(pubs)


def changelog(
    project: Project,
    *,
    backfill_id: str | None = None,
    engine: Engine | None = None,
    since: dt.datetime | dt.date | str | None = None,
    model: str | None = None,
) -> Changelog:
    """The publications and forward-only changes recorded in the engine's changelog (newest
    first): only ``backfill_id``'s, only those at or after ``since`` (a date or date-time; naive
    means UTC), only those touching ``model``."""
    if model is not None and model not in _model_names(project):
        raise NotFoundError(
            f"model {model!r} is not in {project.name}; models: {', '.join(_model_names(project))}"
        )
    cutoff = _since(since)
    own = engine is None
    engine = engine or engine_for(project)
    try:
        rows = engine.changelog_rows(project, backfill_id)
        versions = engine.published_versions(project)
    finally:
        if own:
            engine.close()  # an engine made here: the warehouse is free for others again
    names = [n for n, _ in CHANGELOG_COLUMNS]
    records = [dict(zip(names, r, strict=True)) for r in rows]
    if cutoff is not None:
        keep = {
            r["publication_id"]
            for r in records
            if row_kind(r) != "delivery" and _aware(r["published_at"]) >= cutoff
        }
        records = [r for r in records if r["publication_id"] in keep]
    if model is not None:
        keep = {r["publication_id"] for r in records if r["model"] == model}
        records = [
            r for r in records if r["publication_id"] in keep and r["model"] in (None, model)
        ]
    table = [tuple(r[n] for n in names) for r in records]
    return Changelog(
        RowTable(names, table, caption="backfill_changelog" if table else ""),
        kept_states(versions, dt.datetime.now(dt.timezone.utc)),
    )


def kept_states(
    versions: Sequence[PublishedVersion], now: dt.datetime
) -> dict[str, dict[str, Any]]:
    """Per publication the warehouse recorded: whether and until when it can be rolled back
    (``state``), ``keep_until`` and the rows it keeps apart (``rows_kept``)."""
    taken_back = {v.rolls_back: v.publication_id for v in versions if v.rolls_back}
    out = {}
    for v in versions:
        if v.publication_id in taken_back:
            state = f"rolled back by {taken_back[v.publication_id]}"
        elif v.keep_until is None:
            state = "kept nothing: cannot be rolled back"
        elif now >= dt.datetime.fromisoformat(v.keep_until):
            state = f"kept until {v.keep_until} (expired)"
        else:
            state = f"can be rolled back until {v.keep_until}"
        out[v.publication_id] = {
            "state": state,
            "keep_until": v.keep_until,
            "rows_kept": sum(m.rows for m in v.models),
        }
    return out


def _model_names(project: Project) -> list[str]:
    """The names the changelog's rows carry: the project's models, and those of its landing
    sources (``kafka:<topic>`` per topic its Kafka sources read: ``backfill replay reset-group``
    records offsets under it)."""
    names = sorted({n for s in landing_models(project).values() for n in s.changelog_names})
    return [*project.models, *names]


def _aware(value: Any) -> dt.datetime:
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _since(value: dt.datetime | dt.date | str | None) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInputError(
                f"since {value!r} is not an ISO date or date-time "
                "(e.g. 2026-12-01 or 2026-12-01T08:00:00+01:00)"
            ) from None
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    return _aware(value)
