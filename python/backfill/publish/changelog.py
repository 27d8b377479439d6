"""The consumers' changelog: the rows a publish writes (one per changed (model, partition,
measure) with old/new values and delta, plus one per model summing it up; each with the
publication id, backfill id, reason, note, forced reason, when and who) and ``Changelog``, what
``project.changelog()`` reads back from the engine."""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._arrow import html_table
from .._tables import RowTable
from ..engines import CHANGELOG_COLUMNS, Engine, Part
from ..run import engine_for

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

__all__ = ["Changelog", "changelog", "changelog_rows"]


def changelog_rows(pub_id: str, backfill_id: str, reason: str, when: dt.datetime, who: str,
                   note: str, forced: str | None, audit: dict[str, Any],
                   parts: Sequence[Part]) -> list[tuple[Any, ...]]:
    """The changelog rows of one model of a publication, from its recorded audit."""
    res = audit["result"]
    head = (pub_id, backfill_id, when, who, reason, note, forced, res["model"])
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
              engine: Engine | None = None) -> Changelog:
    """The publications recorded in the engine's changelog (newest first)."""
    if engine is None:
        engine = engine_for(project)
    rows = engine.changelog_rows(project, backfill_id)
    names = [n for n, _ in CHANGELOG_COLUMNS]
    return Changelog(RowTable(names, rows, caption="backfill_changelog" if rows else ""))
