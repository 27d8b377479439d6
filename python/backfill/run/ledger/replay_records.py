"""What the ledger keeps about replays from Kafka (schema version 4): the log positions each
attempt of a landing task read (``attempts.detail``, JSON) and every consumer group offset reset
with the offsets it replaced (``offset_resets``), so that an audit can say which log positions
produced which raw rows and a reset can be undone. :class:`~.sql.SqlLedger` runs the statements;
:class:`~.records.OffsetReset` is what ``offset_resets`` returns.
"""

from __future__ import annotations

__all__ = ["OFFSET_RESET_KEYS"]

#: The columns of one offset reset (``offsets_old``/``offsets_new``: JSON partition -> offset;
#: ``undoes``: the reset_id this one restored, or None).
OFFSET_RESET_KEYS = (
    "reset_id",
    "group_id",
    "topic",
    "created_at",
    "created_by",
    "target",
    "offsets_old",
    "offsets_new",
    "undoes",
)
