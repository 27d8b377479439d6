"""What every ledger backend hands out and raises, independent of how it stores them.

The records callers get are frozen dataclasses, their JSON columns decoded once, here, when a
row is read: :class:`BackfillRecord` (its run ``options`` and ``models`` as dicts),
:class:`TaskRow`, :class:`Claim`, :class:`AttemptRecord`, :class:`AuditRecord`,
:class:`PublicationRecord`, :class:`KeptVersion` (its ``models`` as
:class:`~backfill.versions.KeptModel`), :class:`OffsetReset` and :class:`CostMeasure`. Statuses
are the enums of :mod:`.states`; stamps (``created_at``, ``finished_at``...) are ISO 8601 UTC
text on every backend, as stored (Postgres stamps them from its own clock in the same form).
:func:`utcnow` and :func:`new_worker_id` make the stamps and worker ids every backend stores;
:func:`worker_dead` tells a dead worker on this host from its id. The errors are the project's
own (:mod:`backfill.errors`), so callers never see a driver's exception.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ..._stamps import utcnow
from ...errors import BackfillError, ConflictError, InvalidInputError, NotFoundError
from ...fingerprints import PartitionFingerprint, TaskFingerprint
from ...versions import KeptModel, decode_models, encode_models
from .states import AttemptState, BackfillState, TaskState

__all__ = [
    "AUDIT_KEYS",
    "BACKFILL_KEYS",
    "KEPT_KINDS",
    "PUBLICATION_KEYS",
    "TASK_KEYS",
    "AttemptRecord",
    "AuditRecord",
    "BackfillCancelledError",
    "BackfillExistsError",
    "BackfillHeldError",
    "BackfillPausedError",
    "BackfillRecord",
    "Claim",
    "CostMeasure",
    "KeptVersion",
    "LedgerError",
    "OffsetReset",
    "PublicationRecord",
    "RecordFields",
    "TaskBusyError",
    "TaskEnd",
    "TaskRow",
    "check_backfill_input",
    "held_error",
    "iso_utc",
    "lease_end_text",
    "new_worker_id",
    "parse_stamp",
    "require_keys",
    "stored_fingerprints",
    "stored_task_fingerprint",
    "task_row",
    "utcnow",
    "worker_dead",
]

# What the protocol's mappings carry (see LedgerBackend); every backend checks them alike.
BACKFILL_KEYS = (
    "id",
    "project",
    "project_root",
    "selection",
    "exclude",
    "start",
    "end",
    "as_of",
    "reason",
    "mode",
    "engine",
    "plan",
    "models",
    "created_by",
)
#: optional in a backfill record: run options (JSON text: windows, budget, costs) or None, and
#: the engine's type (``Engine.name``), which cost history is kept by
OPTIONAL_BACKFILL_KEYS = ("options", "engine_type")
TASK_KEYS = ("task_id", "model", "start", "end", "label", "partitions", "wave", "depends_on")
AUDIT_KEYS = ("model", "passed", "published_fingerprints", "result")
PUBLICATION_KEYS = (
    "publication_id",
    "published_at",
    "published_by",
    "note",
    "forced_reason",
    "models",
)
#: what a kept version records: a publish, or a rollback (which takes a publication back)
KEPT_KINDS = ("publish", "rollback")


class LedgerError(BackfillError):
    """The ledger's storage failed (locked beyond the busy timeout, disk I/O, a file written by a
    newer version); the message names the ledger and what failed."""


class TaskBusyError(ConflictError):
    """The task is running in another live worker (its lease is held); try again later."""


class BackfillHeldError(ConflictError):
    """The backfill is paused or cancelled: nothing of it may be claimed now."""


class BackfillPausedError(BackfillHeldError):
    """The backfill is paused: nothing of it is claimed until ``backfill resume``; try later."""


class BackfillCancelledError(BackfillHeldError):
    """The backfill is cancelled: nothing more of it runs, is audited or published."""


class BackfillExistsError(ConflictError):
    """A backfill with that id is recorded already."""


@dataclass(frozen=True)
class TaskRow:
    """One task of a backfill as the ledger holds it."""

    task_id: int
    model: str
    start: dt.datetime | None
    end: dt.datetime | None
    label: str
    partitions: int
    wave: int
    status: TaskState
    attempts: int
    rows_written: int | None
    fingerprint: TaskFingerprint | None
    error: str | None
    depends_on: tuple[int, ...] = ()

    @property
    def partition_fingerprints(self) -> dict[str, PartitionFingerprint] | None:
        """label -> fingerprint of the partitions the task's ``fingerprint`` lists; None when
        it lists none (an audit then scans)."""
        parts = None if self.fingerprint is None else self.fingerprint.partitions
        return None if parts is None else dict(parts)


@dataclass(frozen=True)
class TaskEnd:
    """How an attempt ended, as ``finish`` records it: ``ok`` with the rows it wrote and deleted
    and the task's fingerprint (``WriteResult.task_fingerprint``), or a failure with its
    ``error``, to retry ``retry_in`` seconds after the end the ledger records (None: the task
    fails). The delay, not an instant: the ledger adds it to the very stamp it writes as the
    attempt's end, in its own clock, so the recorded gap before the next attempt is never
    shorter than the delay (an instant from the worker's clock, read before the ledger's
    stamp, came out a millisecond short)."""

    ok: bool
    seconds: float
    rows: int | None = None
    deleted: int | None = None
    fingerprint: TaskFingerprint | None = None
    error: str | None = None
    retry_in: float | None = None

    @classmethod
    def success(
        cls,
        seconds: float,
        rows: int | None,
        deleted: int | None,
        fingerprint: TaskFingerprint | None,
    ) -> TaskEnd:
        return cls(True, seconds, rows, deleted, fingerprint)

    @classmethod
    def failure(cls, seconds: float, error: str | None, retry_in: float | None = None) -> TaskEnd:
        if retry_in is None:
            return cls(False, seconds, error=error)
        if not retry_in >= 0:
            raise InvalidInputError(f"retry_in {retry_in!r}: expected seconds >= 0 or None")
        # Whole milliseconds, rounded up: the ledger's stamps are, so a delay added to the
        # end's stamp stays at least ``retry_in`` in the stamps users read.
        return cls(False, seconds, error=error, retry_in=math.ceil(retry_in * 1000) / 1000)


@dataclass(frozen=True)
class Claim:
    """A task leased to one worker: ``attempt`` is its 1-based attempt number and
    ``attempt_id`` identifies the attempt (and so the lease) that ``finish`` ends."""

    task: TaskRow
    attempt: int
    attempt_id: int


def task_row(r: Sequence[Any], deps: Sequence[int] = ()) -> TaskRow:
    """A :class:`TaskRow` from the stored columns ``task_id, model, start, end, label,
    partitions, wave, status, attempts, rows_written, fingerprint, error`` (bounds as ISO
    text), in that order."""

    def ts(value: str | None) -> dt.datetime | None:
        return None if value is None else dt.datetime.fromisoformat(value)

    return TaskRow(
        r[0],
        r[1],
        ts(r[2]),
        ts(r[3]),
        r[4],
        r[5],
        r[6],
        TaskState(r[7]),
        r[8],
        r[9],
        stored_task_fingerprint(r[10]),
        r[11],
        tuple(sorted(deps)),
    )


def stored_task_fingerprint(text: str | None) -> TaskFingerprint | None:
    """A task's or attempt's ``fingerprint`` column as a value (None stays None)."""
    return None if text is None else TaskFingerprint.decode(text)


def stored_fingerprints(fingerprints: Mapping[str, PartitionFingerprint]) -> str:
    """An audit's ``published_fingerprints`` as the ledger keeps them: JSON text of label ->
    ``"rows:digest"``."""
    wrong = {
        label: fp for label, fp in fingerprints.items() if not isinstance(fp, PartitionFingerprint)
    }
    if wrong:
        raise InvalidInputError(
            f"published fingerprints {wrong!r}: expected label -> PartitionFingerprint"
        )
    return json.dumps({label: fp.encode() for label, fp in fingerprints.items()})


def new_worker_id() -> str:
    """``host:pid:token`` — the host and pid let a worker on the same host see a dead one."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def worker_dead(worker: str) -> bool:
    """True when ``worker`` (a :func:`new_worker_id`) is a process of this host that is gone.
    A worker on another host is never known dead here: only its lease's expiry tells."""
    host, _, rest = worker.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except (ProcessLookupError, OverflowError):  # no such process (none can have that pid)
        return True
    except PermissionError:  # alive, under another user
        return False
    return False


def require_keys(mapping: Mapping[str, Any], keys: Sequence[str], what: str) -> None:
    """InvalidInputError naming the keys ``mapping`` lacks (a caller's bug, said plainly rather
    than as a database binding error)."""
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise InvalidInputError(
            f"{what} lacks {', '.join(missing)} (expected keys: {', '.join(keys)})"
        )


def check_backfill_input(record: Mapping[str, Any], tasks: Sequence[Mapping[str, Any]]) -> None:
    """Checks a ``create_backfill`` call before anything is written: the keys, unique task ids,
    and dependencies among the backfill's own tasks."""
    require_keys(record, BACKFILL_KEYS, "backfill record")
    ids: set[int] = set()
    for t in tasks:
        require_keys(t, TASK_KEYS, f"task {t.get('task_id')!r} of backfill {record['id']}")
        if t["task_id"] in ids:
            raise InvalidInputError(
                f"backfill {record['id']}: task id {t['task_id']!r} appears "
                "twice; expected unique task ids"
            )
        ids.add(t["task_id"])
    unknown = sorted({d for t in tasks for d in t["depends_on"] if d not in ids})
    if unknown:
        raise InvalidInputError(
            f"backfill {record['id']}: tasks depend on task ids {unknown} "
            "that are not among its tasks"
        )


def iso_utc(value: object) -> str | None:
    """A task bound as stored: ISO 8601 in UTC (None stays None)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat()
    raise InvalidInputError(f"task bound {value!r}: expected a datetime or None")


class RecordFields:
    """Read access by field name, ``rec["status"]`` as ``rec.status``: the records were dicts
    before they were typed, and code written against them (``bf.attempts()``,
    ``ledger.backfill(id)``) keeps working. JSON fields read decoded either way."""

    def __getitem__(self, name: str) -> Any:
        if name not in self.keys():
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self.keys() else default

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.keys()}


def _json(text: str | None, default: Any) -> Any:
    return default if text is None or text == "" else json.loads(text)


Rec = TypeVar("Rec")


def _known_columns(cls: type[Rec], row: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of ``row`` that ``cls`` has (a ledger of an older version lacks some)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {k: v for k, v in row.items() if k in names}


@dataclass(frozen=True)
class BackfillRecord(RecordFields):
    """A backfill as the ledger holds it; ``options`` (run options: windows, budget, costs,
    accepted SQL) and ``models`` (model -> SQL hash when recorded) decoded."""

    id: str
    project: str
    project_root: str | None
    selection: str
    exclude: str | None
    start: str
    end: str
    as_of: str | None
    reason: str
    mode: str
    engine: str
    plan: str  # the plan's JSON, as recorded
    models: dict[str, Any]
    created_by: str
    created_at: str
    status: BackfillState
    updated_at: str
    finished_at: str | None = None
    paused_at: str | None = None
    paused_by: str | None = None
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: the engine's type (``Engine.name``: duckdb, spark...); None when not recorded (schema 8)
    engine_type: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BackfillRecord:
        values = _known_columns(cls, row)
        values["status"] = BackfillState(row["status"])
        values["models"] = _json(row["models"], {})
        values["options"] = _json(row.get("options"), {})
        return cls(**values)

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


@dataclass(frozen=True)
class AttemptRecord(RecordFields):
    """One attempt of a task; ``detail`` is what a landing attempt read (decoded), or None."""

    id: int
    backfill_id: str
    task_id: int
    attempt: int
    worker: str
    status: AttemptState
    started_at: str
    finished_at: str | None
    seconds: float | None
    rows_written: int | None
    rows_deleted: int | None
    fingerprint: TaskFingerprint | None
    error: str | None
    detail: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AttemptRecord:
        values = _known_columns(cls, row)
        values["status"] = AttemptState(row["status"])
        values["fingerprint"] = stored_task_fingerprint(row["fingerprint"])
        values["detail"] = _json(row.get("detail"), None)
        return cls(**values)


@dataclass(frozen=True)
class AuditRecord(RecordFields):
    """One model's row of an audit: ``result`` (the audit of the model, with its
    ``audit_id``) and ``published_fingerprints`` (label -> fingerprint) decoded."""

    id: int
    backfill_id: str
    model: str
    created_at: str
    created_by: str
    passed: bool
    published_fingerprints: dict[str, PartitionFingerprint]
    result: dict[str, Any]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AuditRecord:
        values = _known_columns(cls, row)
        values["passed"] = bool(row["passed"])
        values["published_fingerprints"] = {
            label: PartitionFingerprint.decode(text)
            for label, text in _json(row["published_fingerprints"], {}).items()
        }
        values["result"] = _json(row["result"], {})
        return cls(**values)

    @property
    def audit_id(self) -> str | None:
        found = self.result.get("audit_id")
        return None if found is None else str(found)

    @property
    def audit_fingerprints(self) -> dict[str, PartitionFingerprint]:
        """label -> fingerprint of each partition of the audit area as the audit saw it (kept
        in ``result``): publish refuses an area that changed since."""
        return {
            label: PartitionFingerprint.decode(text)
            for label, text in self.result["audit_fingerprints"].items()
        }

    @property
    def versions(self) -> dict[str, str]:
        """The versions the audit's fingerprints are of (``"published"``, ``"area"``: see
        ``Engine.version``); empty when the engine names none (or an older audit)."""
        found = self.result.get("versions") or {}
        return {str(k): str(v) for k, v in found.items()}


@dataclass(frozen=True)
class PublicationRecord(RecordFields):
    """A publication: ``models`` maps each published model to its changed partition labels."""

    id: int
    backfill_id: str
    published_at: str
    published_by: str
    note: str | None
    forced_reason: str | None
    publication_id: str | None
    models: dict[str, Any]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PublicationRecord:
        recorded = _json(row["models"], {})
        return cls(
            id=row["id"],
            backfill_id=row["backfill_id"],
            published_at=row["published_at"],
            published_by=row["published_by"],
            note=row["note"],
            forced_reason=row["forced_reason"],
            publication_id=recorded.get("publication_id"),
            models=recorded.get("models", {}),
        )


def parse_stamp(value: object, what: str) -> dt.datetime:
    """``value`` (ISO 8601 text with a UTC offset, as the ledger stores stamps) as an aware
    datetime; InvalidInputError naming ``what`` and the value otherwise."""
    try:
        when = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise InvalidInputError(
            f"{what} {value!r}: expected ISO 8601 text with a UTC offset, e.g. "
            "'2026-08-03T00:00:00+00:00'"
        )
    return when


@dataclass(frozen=True)
class KeptVersion(RecordFields):
    """What one publication (``kind`` ``"publish"``) or rollback (``"rollback"``, taking back
    the publication ``rolls_back``) kept of the version it replaced, per model (``models``, see
    :mod:`backfill.versions`), and until when: ``keep_until`` (None: nothing was kept, ``keep:
    0``). ``rolled_back_by`` is the rollback that took it back (None: none did); ``dropped_at``
    when what it kept was dropped (its retention ended). Stamps are ISO 8601 UTC text."""

    publication_id: str
    backfill_id: str
    kind: str
    rolls_back: str | None
    published_at: str
    keep_until: str | None
    models: tuple[KeptModel, ...]
    rolled_back_by: str | None = None
    dropped_at: str | None = None

    def __post_init__(self) -> None:
        pid = self.publication_id
        for name in ("publication_id", "backfill_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidInputError(f"kept version {pid!r}: {name} {value!r} is not an id")
        if self.kind not in KEPT_KINDS:
            raise InvalidInputError(
                f"kept version {pid}: kind {self.kind!r} is not one of {', '.join(KEPT_KINDS)}"
            )
        if (self.kind == "rollback") != (self.rolls_back is not None):
            raise InvalidInputError(
                f"kept version {pid}: a {self.kind} "
                + (
                    "names the publication it takes back (rolls_back)"
                    if self.kind == "rollback"
                    else f"takes nothing back, yet rolls_back is {self.rolls_back!r}"
                )
            )
        if self.rolls_back == pid:
            raise InvalidInputError(f"kept version {pid}: a rollback cannot take back itself")
        parse_stamp(self.published_at, f"kept version {pid}: published_at")
        for name in ("keep_until", "dropped_at"):
            value = getattr(self, name)
            if value is not None:
                parse_stamp(value, f"kept version {pid}: {name}")
        models = tuple(self.models)
        wrong = [m for m in models if not isinstance(m, KeptModel)]
        if wrong:
            raise InvalidInputError(
                f"kept version {pid}: models {wrong!r}: expected KeptModel values "
                "(backfill.versions)"
            )
        object.__setattr__(self, "models", models)  # a list given becomes the tuple it holds

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KeptVersion:
        values = _known_columns(cls, row)
        values["models"] = decode_models(row["models"], f"kept version {row['publication_id']}")
        return cls(**values)

    def models_json(self) -> str:
        """``models`` as the ledger stores them (:func:`backfill.versions.encode_models`)."""
        return encode_models(self.models)

    def expired(self, now: dt.datetime) -> bool:
        """True when what was kept is past its retention at ``now`` (an aware datetime), or
        nothing was kept (``keep_until`` None). Whether it was dropped is ``dropped_at``."""
        if not isinstance(now, dt.datetime) or now.tzinfo is None:
            raise InvalidInputError(
                f"now {now!r}: expected an aware datetime, e.g. datetime.now(timezone.utc)"
            )
        if self.keep_until is None:
            return True
        return now >= parse_stamp(self.keep_until, f"kept version {self.publication_id}")

    def model(self, name: str) -> KeptModel:
        """What was kept of model ``name``; NotFoundError naming the models kept otherwise."""
        for m in self.models:
            if m.model == name:
                return m
        kept = ", ".join(m.model for m in self.models) or "none"
        raise NotFoundError(
            f"{self.kind} {self.publication_id} kept nothing of model {name!r}; it kept: {kept}"
        )

    def __str__(self) -> str:
        what = (
            f"rollback {self.publication_id} of {self.rolls_back}"
            if self.kind == "rollback"
            else f"publication {self.publication_id}"
        )
        text = f"{what} (backfill {self.backfill_id}, {self.published_at}): "
        if self.keep_until is None:
            text += "kept nothing (keep: 0)"
        else:
            names = ", ".join(m.model for m in self.models) or "no model"
            text += f"kept {names} until {self.keep_until}"
        if self.dropped_at is not None:
            text += f"; dropped at {self.dropped_at}"
        if self.rolled_back_by is not None:
            text += f"; rolled back by {self.rolled_back_by}"
        return text


@dataclass(frozen=True)
class OffsetReset(RecordFields):
    """A consumer group offset reset; ``offsets_old``/``offsets_new``: partition -> offset."""

    reset_id: str
    group_id: str
    topic: str
    created_at: str
    created_by: str
    target: str
    offsets_old: dict[int, int]
    offsets_new: dict[int, int]
    undoes: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> OffsetReset:
        values = _known_columns(cls, row)
        for key in ("offsets_old", "offsets_new"):
            values[key] = {int(p): int(o) for p, o in _json(row[key], {}).items()}
        return cls(**values)


@dataclass(frozen=True)
class CostMeasure(RecordFields):
    """What a model measured once: ``source`` is ``"run"`` (a done attempt of a backfill's
    task) or ``"sample"`` (``backfill estimate``); ``sql_hash`` the model's SQL hash then (None
    when not recorded); ``wall_seconds`` the attempt's duration from its stamps (None for
    samples); ``backfill_id`` None for samples. ``engine_type`` is the engine that measured it
    (None: not recorded, before schema 8); ``start``/``end`` the period it wrote (ISO text;
    None for samples and unpartitioned models), ``label`` its first partition's label, and
    ``partition_rows`` label -> rows of each partition when the engine counted them in the write
    (from the attempt's fingerprint; None otherwise)."""

    source: str
    model: str
    partitions: int
    seconds: float | None
    wall_seconds: float | None
    rows: int | None
    sql_hash: str | None
    backfill_id: str | None
    finished_at: str | None
    engine_type: str | None = None
    start: str | None = None
    end: str | None = None
    label: str | None = None
    partition_rows: dict[str, int] | None = None


def held_error(
    backfill_id: str, status: str, paused_at: object | None, paused_by: str | None
) -> BackfillHeldError | None:
    """The error saying why nothing of the backfill may be claimed now, or None. Its class tells
    a caller whether to wait (paused) or give up (cancelled)."""
    if status == BackfillState.CANCELLED:
        return BackfillCancelledError(
            f"backfill {backfill_id} is cancelled; nothing more of it runs"
        )
    if paused_at is not None:
        return BackfillPausedError(
            f"backfill {backfill_id} is paused (by {paused_by} at "
            f"{str(paused_at)[:19]}); resume it with: backfill resume "
            f"{backfill_id}"
        )
    return None


def lease_end_text(expires: object) -> str:
    """A lease's expiry as ``HH:MM:SS`` UTC: epoch seconds (SQLite) or a datetime (Postgres)."""
    if isinstance(expires, dt.datetime):
        when = expires.astimezone(dt.timezone.utc)
    else:
        when = dt.datetime.fromtimestamp(float(str(expires)), dt.timezone.utc)
    return f"{when:%H:%M:%S}"
