"""Fingerprints as values: what a task wrote, what an audit saw, what publish re-checks.

>>> day = PartitionFingerprint.of(3, 12)
>>> fp = TaskFingerprint(day, {"2026-08-01": day})
>>> fp.encode()
'3:000000000000000c 2026-08-01=3:000000000000000c'
>>> TaskFingerprint.decode(fp.encode()) == fp
True

* :class:`PartitionFingerprint`: a partition's row count and an order-independent 64-bit digest
  of its rows, computed where the data lives (the engines). Stored as ``"rows:digest"``.
* :class:`TaskFingerprint`: what a task recorded when it wrote its period: the period's
  fingerprint and, when the engine computed them in the same write, its partitions'. Stored as
  ``"rows:digest"`` then ``" label=rows:digest"`` per partition.

The stored text is what the ledger keeps (tasks' and attempts' ``fingerprint``, audits'
``published_fingerprints``); :meth:`~PartitionFingerprint.encode` and
:meth:`~PartitionFingerprint.decode` are its one definition, used by every ledger backend. The
format is that of every ledger file written so far: never change it without a migration.

A base module (it imports no stage), so that the ledger, the engines, audit and publish all
speak of the same type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import InvalidInputError

__all__ = ["PartitionFingerprint", "TaskFingerprint", "recorded_partitions"]

# Engines write 16 hex digits; ledgers written by hand (test fixtures of earlier versions) hold
# shorter digests, which are the same numbers.
_FP = re.compile(r"^(\d+):([0-9a-f]{1,16})$")
#: a task fingerprint's last piece naming the version its write made (no '=': not a partition)
_VERSION = re.compile(r"^@[^=\s]+$")
_FP_FORM = "'<rows>:<hex digest of up to 16 digits>'"


@dataclass(frozen=True, order=True)
class PartitionFingerprint:
    """In-engine fingerprint of a partition: its row count and an order-independent 64-bit
    digest (16 hex digits) of its rows. Equal fingerprints mean equal partitions (up to a hash
    collision). ``str()`` is the stored ``"rows:digest"`` form (:meth:`encode`)."""

    rows: int
    digest: str

    @classmethod
    def empty(cls) -> PartitionFingerprint:
        return cls(0, f"{0:016x}")

    @classmethod
    def of(cls, rows: int, digest: int) -> PartitionFingerprint:
        return cls(int(rows), f"{int(digest) % (1 << 64):016x}")

    @classmethod
    def decode(cls, text: str) -> PartitionFingerprint:
        """The fingerprint of its stored text ``"rows:digest"``; InvalidInputError naming the
        text when it is not of that form."""
        m = _FP.match(text) if isinstance(text, str) else None
        if m is None:
            raise InvalidInputError(f"fingerprint {text!r}: expected {_FP_FORM}")
        return cls.of(int(m.group(1)), int(m.group(2), 16))

    @classmethod
    def total(cls, fingerprints: Iterable[PartitionFingerprint]) -> PartitionFingerprint:
        """The fingerprint of the union of disjoint partitions: counts add and digests (sums of
        row hashes modulo 2^64) add, so one scan of a span checks many partitions at once."""
        rows = digest = 0
        for fp in fingerprints:
            rows += fp.rows
            digest += int(fp.digest, 16)
        return cls.of(rows, digest)

    def encode(self) -> str:
        """The stored text: ``"rows:digest"``."""
        return f"{self.rows}:{self.digest}"

    def __str__(self) -> str:
        return self.encode()


def _partitions_of(pieces: list[str]) -> dict[str, PartitionFingerprint] | None:
    """label -> fingerprint of ``label=rows:digest`` pieces; None when one is not of that form
    or a label repeats."""
    out: dict[str, PartitionFingerprint] = {}
    for piece in pieces:
        label, _, text = piece.rpartition("=")
        if not label or label in out or _FP.match(text) is None:
            return None
        out[label] = PartitionFingerprint.decode(text)
    return out


@dataclass(frozen=True)
class TaskFingerprint:
    """What a task recorded when it wrote its period: ``period``, the fingerprint of all it
    wrote, and ``partitions``, label -> fingerprint of each calendar partition of the period
    when the engine computed them in the write (then an audit need not scan the area); None
    when it did not; ``version``, the version of the area its write made (see
    ``Engine.version``: an Iceberg snapshot id), when the engine names versions. Two task
    fingerprints are equal when they fingerprint the same rows, whatever their versions.
    ``str()`` is the stored text (:meth:`encode`)."""

    period: PartitionFingerprint
    partitions: Mapping[str, PartitionFingerprint] | None = None
    version: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # No partitions and an empty listing are stored alike: keep one value for both.
        parts = None if not self.partitions else dict(self.partitions)
        object.__setattr__(self, "partitions", parts)

    def __hash__(self) -> int:
        return hash((self.period, tuple((self.partitions or {}).items())))

    def encode(self) -> str:
        """The stored text: ``"rows:digest"`` of the period, then ``label=rows:digest`` per
        partition when there are any, then ``@version`` when there is one, separated by
        spaces."""
        return " ".join(
            [
                self.period.encode(),
                *(f"{label}={fp.encode()}" for label, fp in (self.partitions or {}).items()),
                *([f"@{self.version}"] if self.version else []),
            ]
        )

    @classmethod
    def decode(cls, text: str) -> TaskFingerprint:
        """The task fingerprint of its stored text. The period's fingerprint must be
        ``"rows:digest"`` (else InvalidInputError naming the text); partitions that do not list
        as ``label=rows:digest`` adding up to the period's are left out (``partitions`` None:
        an audit then scans the area, as it does for a task that recorded none)."""
        pieces = text.split(" ") if isinstance(text, str) else [text]
        if _FP.match(pieces[0]) is None:
            raise InvalidInputError(
                f"task fingerprint {text!r}: expected {_FP_FORM}, then ' <label>=<rows>:<digest>'"
                " per partition"
            )
        period = PartitionFingerprint.decode(pieces[0])
        version = None
        if len(pieces) > 1 and _VERSION.match(pieces[-1]) is not None:
            version = pieces.pop()[1:]
        parts = _partitions_of(pieces[1:]) if len(pieces) > 1 else None
        if parts is not None and PartitionFingerprint.total(parts.values()) != period:
            parts = None
        return cls(period, parts, version)

    def __str__(self) -> str:
        return self.encode()


def recorded_partitions(text: str | None) -> dict[str, PartitionFingerprint] | None:
    """label -> fingerprint of the partitions a task's stored fingerprint lists (see
    :meth:`TaskFingerprint.decode`); None when it lists none or is not of that form (then the
    audit scans)."""
    if not text or _FP.match(text.split(" ")[0]) is None:
        return None
    parts = TaskFingerprint.decode(text).partitions
    return None if parts is None else dict(parts)
