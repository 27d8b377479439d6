"""Holding and stopping a backfill from any process: pause, lift the pause, cancel.

>>> pause_backfill(ledger, "bf_20261201_120000_ab12")                # doctest: +SKIP
>>> cancel_backfill(ledger, "bf_20261201_120000_ab12", "wrong period")  # doctest: +SKIP

Only the ledger changes (not the warehouse), so these run beside busy runners: a paused backfill's
running tasks finish and nothing new starts; runners wait until the pause is lifted. Each records
who acted; a move the backfill's state does not allow raises (nothing changes).
"""

from __future__ import annotations

from .._stamps import who
from .ledger import LedgerBackend

__all__ = ["cancel_backfill", "pause_backfill", "unpause_backfill"]


def pause_backfill(ledger: LedgerBackend, backfill_id: str) -> None:
    """Pauses ``backfill_id``: running tasks finish, nothing new starts."""
    ledger.backfill(backfill_id)  # NotFoundError naming recent ids
    ledger.set_paused(backfill_id, True, who())


def unpause_backfill(ledger: LedgerBackend, backfill_id: str) -> None:
    """Lifts the pause of ``backfill_id``: waiting runners carry on by themselves."""
    ledger.backfill(backfill_id)
    ledger.set_paused(backfill_id, False, who())


def cancel_backfill(ledger: LedgerBackend, backfill_id: str, reason: str) -> None:
    """Cancels ``backfill_id`` for ``reason``: nothing more runs; its audit area stays until it
    is discarded."""
    ledger.backfill(backfill_id)
    ledger.cancel(backfill_id, reason, who())
