"""Renderings of changelog entries (``Changelog.publications()``) for people: text (the CLI and
``str()``), markdown, an HTML page finance can read, JSON; and the measure line shared with the
consumers' messages (``revenue: 1,234.00 -> 1,209.32 (-2.0%)``), and the lines of the partitions
that moved most. Exact values (integers, decimals) are shown with every digit of their scale."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._arrow import html_table
from .._numbers import fmt
from ..errors import InvalidInputError

__all__ = ["FORMATS", "html_fragment", "measure_line", "moved_lines", "period_text", "render"]

FORMATS = ("text", "markdown", "html", "json")
_COLUMNS = ["model", "period", "changed partitions", "measure", "old", "new", "change"]
_TOP_COLUMNS = ["model", "measure", "partition", "old", "new", "delta", "change"]


def _num(value: Any, sign: bool = False) -> str:
    return "" if value is None else fmt(value, sign=sign)


def _pct(value: Any) -> str:
    return "" if value is None else f"{float(value):+.1f}%"


def measure_line(measure: str, t: Mapping[str, Any]) -> str:
    """``revenue: 1,234.00 -> 1,209.32 (-2.0%)``."""
    pct = f" ({_pct(t['pct'])})" if t.get("pct") is not None else ""
    return f"{measure}: {_num(t['old'])} -> {_num(t['new'])}{pct}"


def moved_lines(mod: Mapping[str, Any], measure: str) -> list[str]:
    """``2026-08-14: 12,345.67 -> 12,099.76 (-245.91, -1.99%)`` for each partition of the model
    whose ``measure`` moved most (largest |delta| first)."""
    out = []
    for t in mod.get("top_partitions", {}).get(measure, []):
        pct = f", {_pct(t['pct'])}" if t.get("pct") is not None else ""
        out.append(
            f"{t['partition']}: {_num(t['old'])} -> {_num(t['new'])} "
            f"({_num(t['delta'], sign=True)}{pct})"
        )
    return out


def period_text(entry: Mapping[str, Any], mod: Mapping[str, Any]) -> str:
    """The period a model's entry covers: the changed partitions' span, or from where a forward
    change applies."""
    period = mod["period"] or ["", ""]
    if entry["kind"] == "forward":
        return f"from {str(period[0])[:10]} on (history before it unchanged)"
    changed = mod["changed_partitions"]
    span = f"[{str(period[0])[:10]}, {str(period[1])[:10]})"
    if not changed:
        return f"{span}: no partition changed"
    first, last = changed[0], changed[-1]
    labels = first if first == last else f"{first} .. {last}"
    return f"{len(changed)} of {mod['partitions']} partition(s) changed: {labels}"


def _changed(mod: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(m, t) for m, t in mod["totals"].items() if t["delta"]]


def _title(entry: Mapping[str, Any]) -> str:
    what = (
        "forward-only change"
        if entry["kind"] == "forward"
        else f"{entry['publication_id']} ({entry['backfill_id']})"
    )
    return f"{str(entry['published_at'])[:19]}  {what} by {entry['published_by']}"


def _delivery_text(d: Mapping[str, Any]) -> str:
    return f"{d['channel']} {d['consumer']}: {'ok' if d['ok'] else 'FAILED'} ({d['detail']})"


def _text(entries: Sequence[Mapping[str, Any]]) -> str:
    if not entries:
        return "changelog: no publications"
    lines = []
    for p in entries:
        if p["kind"] == "forward":
            for model, mod in p["models"].items():
                lines.append(
                    f"{str(p['published_at'])[:19]}  {p['publication_id']} "
                    f"forward-only change of {model} by {p['published_by']}"
                )
                lines.append(f"  {model}: {period_text(p, mod)}")
            lines.append(f"  reason: {p['reason']}")
            lines.append(f"  note:   {p['note']}")
        else:
            lines.append(
                f"{str(p['published_at'])[:19]}  {p['publication_id']} "
                f"({p['backfill_id']}) by {p['published_by']}"
            )
            lines.append(f"  reason: {p['reason']}")
            lines.append(f"  note:   {p['note']}")
            if p.get("rollback"):
                kept = p["rollback"]
                lines.append(f"  rollback: {kept['state']} ({kept['rows_kept']} row(s) kept)")
            if p["forced_reason"]:
                lines.append(f"  FORCED past failed gates: {p['forced_reason']}")
            for model, mod in p["models"].items():
                period = mod["period"] or ["", ""]
                n = len(mod["changed_partitions"])
                text = (
                    f"  {model}: {n} of {mod['partitions']} partition(s) changed "
                    f"in [{str(period[0])[:10]}, {str(period[1])[:10]})"
                )
                for measure, t in _changed(mod):
                    pct = "" if t["pct"] is None else f" ({t['pct']:+.2f}%)"
                    text += f"; {measure} {_num(t['delta'], sign=True)}{pct}"
                lines.append(text)
                for measure in mod["totals"]:
                    top = moved_lines(mod, measure)
                    if top:
                        lines.append(f"    {measure}, the partitions that moved most:")
                        lines += [f"      {line}" for line in top]
        for d in p.get("deliveries", []):
            lines.append(f"  told {_delivery_text(d)}")
    return "\n".join(lines)


def _rows(p: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for model, mod in p["models"].items():
        measures = _changed(mod) or [("", {"old": None, "new": None, "pct": None})]
        for i, (measure, t) in enumerate(measures):
            rows.append(
                [
                    model if i == 0 else "",
                    period_text(p, mod) if i == 0 else "",
                    str(len(mod["changed_partitions"]))
                    if i == 0 and p["kind"] != "forward"
                    else "",
                    measure,
                    _num(t["old"]),
                    _num(t["new"]),
                    _pct(t["pct"]),
                ]
            )
    return rows


def _top_rows(p: Mapping[str, Any]) -> list[list[str]]:
    return [
        [
            model,
            measure,
            str(t["partition"]),
            _num(t["old"]),
            _num(t["new"]),
            _num(t["delta"], sign=True),
            _pct(t["pct"]),
        ]
        for model, mod in p["models"].items()
        for measure, top in mod.get("top_partitions", {}).items()
        for t in top
    ]


def _markdown(entries: Sequence[Mapping[str, Any]]) -> str:
    lines = ["# Changelog", ""]
    if not entries:
        lines.append("No publications.")
    for p in entries:
        lines += [f"## {_title(p)}", "", f"- **Reason:** {p['reason']}", f"- **Note:** {p['note']}"]
        if p["forced_reason"]:
            lines.append(f"- **Forced past failed gates:** {p['forced_reason']}")
        lines += [
            "",
            "| " + " | ".join(_COLUMNS) + " |",
            "|" + "|".join("---" for _ in _COLUMNS) + "|",
        ]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in _rows(p)]
        top = _top_rows(p)
        if top:
            lines += [
                "",
                "Partitions that moved most:",
                "",
                "| " + " | ".join(_TOP_COLUMNS) + " |",
                "|" + "|".join("---" for _ in _TOP_COLUMNS) + "|",
            ]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in top]
        if p.get("deliveries"):
            lines += ["", "Told: " + "; ".join(_delivery_text(d) for d in p["deliveries"])]
        lines.append("")
    return "\n".join(lines)


def html_fragment(entries: Sequence[Mapping[str, Any]]) -> str:
    """The entries as HTML: a heading, reason and note, and a table per entry."""
    e = html.escape
    parts = ["<div class='backfill-changelog'>"]
    for p in entries:
        parts.append(
            f"<h3>{e(_title(p))}</h3><p><b>Reason:</b> {e(str(p['reason']))}<br>"
            f"<b>Note:</b> {e(str(p['note']))}"
        )
        if p["forced_reason"]:
            parts.append(f"<br><b>Forced past failed gates:</b> {e(str(p['forced_reason']))}")
        parts.append("</p>")
        parts.append(html_table(_COLUMNS, _rows(p)))
        top = _top_rows(p)
        if top:
            parts.append(html_table(_TOP_COLUMNS, top, caption="partitions that moved most"))
        if p.get("deliveries"):
            parts.append(
                "<p>Told: " + "; ".join(e(_delivery_text(d)) for d in p["deliveries"]) + "</p>"
            )
    if not entries:
        parts.append("<p>No publications.</p>")
    parts.append("</div>")
    return "".join(parts)


def render(entries: Sequence[Mapping[str, Any]], fmt: str) -> str:
    """``entries`` as ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "text":
        return _text(entries)
    if fmt == "markdown":
        return _markdown(entries)
    if fmt == "html":
        return (
            "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Changelog</title>"
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head>"
            f"<body><h1>Changelog</h1>{html_fragment(entries)}</body></html>"
        )
    if fmt == "json":
        return json.dumps(list(entries), indent=2, default=str)
    raise InvalidInputError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
