"""``LedgerBackend``: what runners, orchestrators, audit and publish call on a ledger.

>>> ledger = open_ledger("sqlite:////shared/backfill/ledger.sqlite")   # doctest: +SKIP

Two backends over one SQL base (:class:`~backfill.run.ledger.sql.SqlLedger`): SQLite
(:class:`~backfill.run.ledger.sqlite.SqliteLedger`), one file that every worker
on ONE machine opens (SQLite's locking is not safe over NFS or other network file systems), and
Postgres (:class:`~backfill.run.ledger.postgres.PostgresLedger`, ``postgresql://`` URLs), one
database that workers on many hosts (Airflow's Celery or Kubernetes executors) share.

A new backend passes ``tests/python/conformance/test_ledger.py`` (add it to the factories there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from .overlap import Overlap
from .records import (
    AttemptRecord,
    AuditRecord,
    BackfillRecord,
    Claim,
    CostMeasure,
    KeptVersion,
    OffsetReset,
    PublicationRecord,
    TaskEnd,
    TaskRow,
)
from .states import BackfillState

__all__ = ["FinishOutcome", "LedgerBackend"]

#: What :meth:`LedgerBackend.finish` reports: the task's new state, or ``"lost"`` when the
#: attempt no longer held the task's lease (another worker owns the task now).
FinishOutcome = Literal["done", "pending", "failed", "lost"]


@runtime_checkable
class LedgerBackend(Protocol):
    """The ledger operations the runner, the Airflow integration, status, audit and publish use.

    Guarantees every backend gives (the conformance suite checks them):

    * Every method is atomic: it commits all of its writes or none.
    * States move only along :mod:`.states`; the check and the write are one step in the
      database, so a concurrent writer cannot slip in between. A move the lifecycle does not
      have raises :class:`~.states.IllegalTransitionError` and changes nothing.
    * Exactly once: ``claim``/``claim_task`` hand a task to one worker with a lease; while the
      lease is held (renewed by ``renew``, ended by ``finish``) nobody else gets the task. A lease
      that expired, or whose worker is a dead process on this host, is dropped at the next claim:
      its attempt becomes ``abandoned`` and the task is claimable again. A task becomes ``done``
      once, by the attempt that held its lease.
    * Failures of the storage raise :class:`~.records.LedgerError` naming the ledger; no
      driver exception (``sqlite3.Error``, ...) reaches the caller.
    """

    # -- backfills ------------------------------------------------------------------------------
    def create_backfill(
        self,
        record: Mapping[str, Any],
        tasks: Sequence[Mapping[str, Any]],
        *,
        check_overlap: bool = False,
    ) -> None:
        """Records a backfill (``record``: the ``backfills`` columns, status ``pending``) and its
        tasks (``task_id``, ``model``, ``start``, ``end``, ``label``, ``partitions``, ``wave``,
        ``depends_on``), all pending, in one step. :class:`~.records.BackfillExistsError` when
        the id is taken (nothing is written). With ``check_overlap``,
        :class:`~.overlap.OverlapError` (nothing written) when an open backfill of the same
        project writes a partition of the same model (:meth:`overlaps`); check and write are
        one step, so of two such backfills recorded at the same time one is refused."""

    def overlaps(self, project: str, tasks: Sequence[Mapping[str, Any]]) -> list[Overlap]:
        """The open backfills of ``project`` (pending, running, failed or done) writing a
        partition of a model that ``tasks`` write too, per backfill and model."""

    def backfill(self, backfill_id: str) -> BackfillRecord:
        """The backfill's record. :class:`~backfill.errors.NotFoundError` naming recent ids when
        there is none."""

    def backfills(self, limit: int = 50) -> list[BackfillRecord]:
        """The ``limit`` most recently created backfills, newest first."""

    def latest(self) -> str | None:
        """The id of the most recently created backfill, or None."""

    def set_status(
        self, backfill_id: str, status: BackfillState | str, *, finished: bool = False
    ) -> None:
        """Moves the backfill to ``status`` (stamping ``finished_at`` when ``finished``) if the
        lifecycle allows it from its current state, else raises IllegalTransitionError and
        changes nothing. Publishing is :meth:`record_publication`'s alone."""

    # -- operator controls (any process) ---------------------------------------------------------
    def set_paused(self, backfill_id: str, paused: bool, by: str) -> None:
        """Pauses (``paused``) a pending, running, interrupted or failed backfill -- claims return
        nothing and ``claim_task`` raises :class:`~.records.BackfillHeldError`, while running
        tasks finish -- or resumes a paused one. IllegalTransitionError naming the state (and
        nothing changed) for a finished backfill, or one paused already / not paused."""

    def cancel(self, backfill_id: str, reason: str, by: str) -> None:
        """Moves the backfill to ``cancelled`` with ``reason`` (``cancel_reason``,
        ``cancelled_by``): nothing more of it is claimed; it may still be discarded.
        IllegalTransitionError for a published, discarded or cancelled one (nothing changed);
        InvalidInputError for an empty reason."""

    def set_options(self, backfill_id: str, options: Mapping[str, Any]) -> None:
        """Replaces the backfill's run options (``options`` of its record): windows, budget,
        costs. A create may give them as the record's optional ``options`` key (JSON text)."""

    def ready(self, backfill_id: str, limit: int) -> list[TaskRow]:
        """Up to ``limit`` tasks ``claim`` could take now (pending, due, dependencies done), in
        its order, without claiming them (empty while paused or cancelled): a runner bound by a
        window or budget picks the ones that fit and claims them with ``claim_task``."""

    # -- tasks, attempts, leases ----------------------------------------------------------------
    def tasks(self, backfill_id: str) -> list[TaskRow]:
        """The backfill's tasks by ``task_id``, with their dependencies."""

    def attempts(self, backfill_id: str) -> list[AttemptRecord]:
        """Every attempt of the backfill's tasks, in the order they started."""

    def claim(self, backfill_id: str, worker: str, limit: int, lease_seconds: float) -> list[Claim]:
        """Leases up to ``limit`` ready tasks (pending, past their retry time, every dependency
        done) to ``worker`` for ``lease_seconds``, in wave then task order; each gets a new
        running attempt. Drops dead leases first (see the class doc). Claims nothing while the
        backfill is paused or cancelled."""

    def claim_task(
        self, backfill_id: str, task_id: int, worker: str, lease_seconds: float
    ) -> Claim | TaskRow:
        """Leases exactly task ``task_id`` (pending or failed) to ``worker``; returns its row
        instead when it is done. :class:`~.records.TaskBusyError` while a live worker holds it,
        :class:`~backfill.errors.ConflictError` when a dependency is not done,
        :class:`~backfill.errors.NotFoundError` for an unknown task."""

    def renew(
        self, backfill_id: str, worker: str, task_ids: Sequence[int], lease_seconds: float
    ) -> int:
        """Extends ``worker``'s leases on ``task_ids`` to ``lease_seconds`` from now and returns
        how many it extended. Leases the worker no longer holds are left alone (renewing never
        takes a task back): fewer than ``len(task_ids)`` tells the worker it lost a task, so it
        must not record that task's result."""

    def finish(
        self,
        claim: Claim,
        backfill_id: str,
        worker: str,
        end: TaskEnd,
    ) -> FinishOutcome:
        """Ends ``claim``'s attempt as ``end`` says and releases its lease: the task becomes
        ``done`` (ok), ``pending`` for ``end.retry_in`` seconds from the end it records (a
        failure to retry) or ``failed``; returns that state.
        When the attempt lost its lease meanwhile it changes no task (the attempt stays
        ``abandoned``) and returns ``"lost"``."""

    def reset_failed(self, backfill_id: str) -> int:
        """Makes the backfill's failed tasks pending with their attempt count reset (a resume);
        returns how many."""

    def live_workers(self, backfill_id: str) -> set[str]:
        """Workers holding an unexpired lease on one of the backfill's tasks (minus processes
        of this host known dead)."""

    # -- audits and publications ----------------------------------------------------------------
    def record_audit(
        self,
        backfill_id: str,
        audit_id: str,
        created_at: str,
        created_by: str,
        models: Sequence[Mapping[str, Any]],
    ) -> None:
        """Records one audit, a row per model (``model``, ``passed``,
        ``published_fingerprints``: label -> PartitionFingerprint, ``result``: JSON-able), in
        one step."""

    def audits(self, backfill_id: str) -> list[AuditRecord]:
        """The backfill's audit rows, oldest first."""

    def record_publication(
        self,
        backfill_id: str,
        publication: Mapping[str, Any],
        kept: KeptVersion | None = None,
    ) -> None:
        """Records a publication (``publication_id``, ``published_at``, ``published_by``,
        ``note``, ``forced_reason``, ``models``) and moves the backfill from done to published
        in one step; IllegalTransitionError (nothing recorded) unless it is done. ``kept``: what
        the publication kept of the version it replaced, recorded in the same step (a retry
        after an unknown commit outcome records neither twice); InvalidInputError (nothing
        recorded) unless it is a ``publish`` of the same publication id and backfill."""

    def publications(self, backfill_id: str | None = None) -> list[PublicationRecord]:
        """Publications (of one backfill, or all), oldest first."""

    # -- kept versions and rollbacks (schema version 7; see backfill.versions) -------------------
    def record_rollback(self, kept: KeptVersion) -> None:
        """Records a rollback (``kept``: a ``rollback`` kept version, ``rolls_back`` naming the
        publication it took back) and marks that publication rolled back by it, in one step;
        the backfill's status does not change. :class:`~backfill.errors.NotFoundError` when the
        publication taken back has no kept version, :class:`~backfill.errors.ConflictError` when
        it was rolled back already (of two rollbacks of one publication recorded at the same
        time, one is refused), InvalidInputError for a kept version that is not a rollback;
        nothing recorded then."""

    def kept_version(self, publication_id: str) -> KeptVersion:
        """What the publication or rollback ``publication_id`` kept.
        :class:`~backfill.errors.NotFoundError` when none is recorded under that id."""

    def kept_versions(self, backfill_id: str | None = None) -> list[KeptVersion]:
        """The kept versions (of one backfill's publications and rollbacks, or all), oldest
        first (by ``published_at``, then id)."""

    def mark_dropped(self, publication_id: str, dropped_at: str) -> None:
        """Records that what ``publication_id`` kept was dropped at ``dropped_at`` (ISO 8601
        UTC); once: a later call keeps the first time. :class:`~backfill.errors.NotFoundError`
        for an unknown id."""

    # -- replays from Kafka (schema version 4; see .replay_records) ------------------------------
    def record_attempt_detail(self, backfill_id: str, attempt_id: int, detail: str) -> None:
        """Keeps ``detail`` (JSON text: the log positions a landing attempt read) with the
        attempt; ``attempts()`` returns it as ``detail``."""

    def record_offset_reset(self, record: Mapping[str, Any]) -> None:
        """Records a consumer group offset reset (``reset_id``, ``group_id``, ``topic``,
        ``created_at``, ``created_by``, ``target``, ``offsets_old``, ``offsets_new``: JSON,
        ``undoes``); the same ``reset_id`` again changes nothing."""

    def offset_resets(self, group: str, topic: str | None = None) -> list[OffsetReset]:
        """The group's offset resets (of one topic, or all), oldest first."""

    # -- costs (schema version 6; see .cost_records) --------------------------------------------
    def cost_history(
        self, project: str, models: Sequence[str], backfills: int = 20
    ) -> list[CostMeasure]:
        """What ``models`` of ``project`` measured: every done attempt of their tasks in the
        project's ``backfills`` most recent backfills (newest backfill first; ``sql_hash`` as
        that backfill recorded it), then the sample runs of ``backfill estimate``, newest
        first."""

    def record_cost_samples(self, project: str, samples: Sequence[Mapping[str, Any]]) -> None:
        """Keeps the sample runs (``COST_SAMPLE_KEYS`` of :mod:`.cost_records`) of one
        estimate of ``project`` in one step; :meth:`cost_history` returns them."""

    def close(self) -> None:
        """Releases this handle's connections (of the calling thread); the ledger stays."""
