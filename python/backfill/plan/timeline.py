"""The plan's timeline: one SVG bar per model from its first task's start to its last task's end
(in the schedule), for ``Plan._repr_html_``."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .costs import format_seconds

if TYPE_CHECKING:  # pragma: no cover
    from .plan import ModelSummary

__all__ = ["timeline_svg"]


def timeline_svg(ms: list[ModelSummary]) -> str:
    """One bar per model from its first task's start to its last task's end."""
    span = max((m.sched_end for m in ms), default=0.0)
    if not ms or span <= 0:
        return ""
    label_w, bar_w, row_h = 170, 420, 18
    height = row_h * len(ms) + 22
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + bar_w + 10}' "
        f"height='{height}' font-family='sans-serif' font-size='11'>"
    ]
    for i, m in enumerate(ms):
        y = i * row_h + 4
        x = label_w + bar_w * m.sched_start / span
        w = max(1.0, bar_w * (m.sched_end - m.sched_start) / span)
        parts.append(f"<text x='0' y='{y + 11}'>{html.escape(m.model)}</text>")
        parts.append(
            f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{row_h - 5}' fill='#4e79a7'>"
            f"<title>{html.escape(m.model)}: {m.tasks} tasks, "
            f"{format_seconds(m.sched_start)} to {format_seconds(m.sched_end)}</title></rect>"
        )
    axis_y = row_h * len(ms) + 16
    parts.append(f"<text x='{label_w}' y='{axis_y}'>0</text>")
    parts.append(
        f"<text x='{label_w + bar_w}' y='{axis_y}' text-anchor='end'>"
        f"{html.escape(format_seconds(span))}</text></svg>"
    )
    return "".join(parts)
