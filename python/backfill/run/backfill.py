"""``Backfill``: a plan recorded in the ledger and run, concurrently and resumably.

>>> bf = project.backfill(project.plan("fct_daily_sales+", "2026-08-01", "2026-10-29"),
...                       reason="discount bug fixed")              # doctest: +SKIP
>>> bf.run(concurrency=8).ok                                        # doctest: +SKIP
>>> backfill.Backfill.resume(bf.id, project=project).run()          # after a crash

A worker claims ready tasks (every dependency done) from the ledger with a lease, runs up to
``concurrency`` of them in threads through the engine, renews its leases while they run, and
records each attempt. A failed task is retried with exponential backoff when its failure is
transient (a lock, a conflict, an I/O error) up to ``max_attempts``; a task that fails for good
blocks only its downstream tasks, independent ones carry on, and the backfill ends ``failed``.
Several workers (threads or processes) may run one backfill; each keeps going until every task
is done or failed or blocked, so a task whose worker died is claimed again when its lease ends.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._stamps import who
from ..calendar import partitions as calendar_partitions
from ..engines import Area, Engine, Part
from ..engines.registry import engine_for
from ..errors import ConflictError, InvalidInputError
from ..windows import check_specs, parse_duration
from .ledger import (
    AttemptRecord,
    BackfillExistsError,
    LedgerBackend,
    TaskRow,
    TaskState,
    ledger_for,
)
from .limits import RunLimits
from .runner import Runner, RunOptions
from .status import BackfillStatus, ModelStatus, TaskEvent, backfill_status

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project
    from ..plan import Plan

log = logging.getLogger(__name__)

__all__ = [
    "Backfill",
    "BackfillStatus",
    "CreateOptions",
    "ModelStatus",
    "RunOptions",
    "SqlChangedError",
    "TaskEvent",
]


_B = TypeVar("_B", bound="Backfill")
_ID_RE = re.compile(r"bf_[A-Za-z0-9_]{1,57}")


def _new_id() -> str:
    # 32 random bits: tests and orchestrators create many backfills within one second in one
    # ledger, and 16 bits collided (a birthday clash surfaced as BackfillExistsError in CI)
    now = dt.datetime.now(dt.timezone.utc)
    return f"bf_{now:%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


class SqlChangedError(ConflictError):
    """A model's SQL changed since its backfill was planned; ``models`` names them."""

    def __init__(self, message: str, models: Sequence[str]) -> None:
        super().__init__(message)
        self.models = list(models)


def sql_hash(text: str | None) -> str:
    """The short hash of a model's SQL that a backfill records per model (to tell a resumed
    backfill, or a cost measured then, that the SQL has changed since)."""
    return hashlib.sha256((text or "").encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CreateOptions:
    """What :meth:`Backfill.create` records besides the plan (see there); checked when made,
    so nothing is recorded with a bad one."""

    reason: str
    direct: bool = False
    lint: bool = True
    backfill_id: str | None = None
    windows: str | list[str] | None = None
    budget: str | float | None = None
    costs: Mapping[str, float] | None = None
    force: str | None = None
    allow_overlap: str | None = None

    def __post_init__(self) -> None:
        allow_overlap, backfill_id, reason = self.allow_overlap, self.backfill_id, self.reason
        if allow_overlap is not None and (
            not isinstance(allow_overlap, str) or not allow_overlap.strip()
        ):
            raise InvalidInputError(
                f"allow_overlap {allow_overlap!r}: say why two backfills "
                "may write the same partitions"
            )
        if backfill_id is not None and not _ID_RE.fullmatch(backfill_id):
            raise InvalidInputError(
                f"backfill_id {backfill_id!r}: expected 'bf_' followed by "
                "letters, digits or '_' (at most 60 characters)"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInputError(
                "a backfill needs a reason (who reads the changelog will ask "
                "why the past changed), e.g. reason='discount bug fixed'"
            )


class Backfill:
    """A backfill recorded in the ledger. Create with :meth:`Project.backfill`; reopen with
    :meth:`Backfill.resume` (or :meth:`Backfill.open` to only look)."""

    def __init__(
        self, project: Project, backfill_id: str, *, ledger: LedgerBackend, engine: Engine
    ) -> None:
        self.project = project
        self.id = backfill_id
        self.ledger = ledger
        self.engine = engine
        rec = ledger.backfill(backfill_id)
        self.mode: str = rec.mode
        self.reason: str = rec.reason
        self._area: Area | None = None

    # -- creation ------------------------------------------------------------------------------
    @classmethod
    def create(
        cls: type[_B],
        project: Project,
        plan: Plan,
        *,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
        **options: Any,
    ) -> _B:
        """Records ``plan`` as a new backfill in ``ledger`` (default: the project's), to run
        through ``engine`` (default: the project's). The options are the fields of
        :class:`CreateOptions` (``reason`` is required), given as keywords.

        ``backfill_id`` (default: a fresh ``bf_<time>_<random>``) lets an orchestrator derive a
        deterministic id from its run, so that a retried planning step finds the backfill it
        already recorded. ``direct`` writes the published tables (initial builds); ``lint``
        (default True) refuses a plan whose models' lint finds errors.

        ``windows`` (default: the project's ``window:``) bound when tasks are claimed;
        ``budget`` ("3h") bounds its engine time, and needs ``costs`` (seconds per partition by
        model, e.g. from :func:`~backfill.run.estimate.estimate`): a plan estimated above the
        budget is refused unless ``force`` gives a reason.

        A plan writing a (model, partition) that an open backfill of the project writes too (see
        :mod:`.ledger.overlap`) is refused with :class:`~.ledger.OverlapError` naming it, its
        owner and the overlap, unless ``allow_overlap`` says why (recorded in the options)."""
        opts = CreateOptions(**options)
        reason, lint, allow_overlap = opts.reason, opts.lint, opts.allow_overlap
        errors = [str(f) for f in plan.errors(include_checks=lint)]
        if errors:
            raise InvalidInputError(
                "the plan has errors; fix them first:\n  " + "\n  ".join(errors)
            )
        ledger = ledger or ledger_for(project)
        engine = engine or engine_for(project)
        # A landing model has no SQL: its tasks read from Kafka (meta "landing").
        missing = [
            m.model
            for m in plan.models
            if not project.models[m.model].sql and "landing" not in project.models[m.model].meta
        ]
        if missing:
            raise InvalidInputError(f"models without SQL cannot run: {', '.join(missing)}")
        tasks = [plan.task(i) for i in range(plan.task_count)]
        options = _options(project, tasks, opts)
        if allow_overlap is not None:
            found = ledger.overlaps(project.name, tasks)
            options["allow_overlap"] = {
                "reason": allow_overlap.strip(),
                "overlaps": [o.to_dict() for o in found],
            }
        settings = project.settings
        record = {
            "id": opts.backfill_id or _new_id(),
            "project": project.name,
            "project_root": str(settings.root) if settings else None,
            "selection": plan.select,
            "exclude": plan.exclude,
            "start": plan.start.isoformat(),
            "end": plan.end.isoformat(),
            "as_of": plan.as_of.isoformat(),
            "reason": reason.strip(),
            "mode": "direct" if opts.direct else "audit",
            "engine": repr(engine),
            # the engine's type, which cost history is kept by (a DuckDB plan must not be
            # estimated from Spark's times)
            "engine_type": engine.name,
            "plan": plan.to_json(tasks=False, indent=None),
            "models": json.dumps(
                {m.model: sql_hash(project.models[m.model].sql) for m in plan.models}
            ),
            "created_by": who(),
            "options": json.dumps(options, sort_keys=True) if options else None,
        }
        try:
            ledger.create_backfill(record, tasks, check_overlap=allow_overlap is None)
        except BackfillExistsError:
            if opts.backfill_id is not None:
                raise  # the caller's id: an orchestrator's retry must see that it is taken
            # a generated id that clashed: nothing was written, so a fresh id is safe
            record["id"] = _new_id()
            ledger.create_backfill(record, tasks, check_overlap=allow_overlap is None)
        log.info(
            "recorded backfill %s: %s, %d tasks (%s)",
            record["id"],
            plan.select,
            len(tasks),
            record["mode"],
        )
        return cls(project, str(record["id"]), ledger=ledger, engine=engine)

    @classmethod
    def open(
        cls: type[_B],
        backfill_id: str | None = None,
        *,
        project: Project,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
    ) -> _B:
        """The backfill ``backfill_id`` (default: the latest) of ``project``, from ``ledger``
        (default: the project's)."""
        ledger = ledger or ledger_for(project, must_exist=True)
        if backfill_id is None:
            backfill_id = ledger.latest()
            if backfill_id is None:
                raise InvalidInputError(f"no backfills recorded in {ledger!r}")
        ledger.backfill(backfill_id)  # raises NotFoundError naming recent ids
        return cls(project, backfill_id, ledger=ledger, engine=engine or engine_for(project))

    @classmethod
    def resume(
        cls: type[_B],
        backfill_id: str,
        *,
        project: Project,
        engine: Engine | None = None,
        ledger: LedgerBackend | None = None,
        accept_changed_sql: str | None = None,
    ) -> _B:
        """Reopens a backfill to run what is not done: failed tasks get fresh attempts, tasks of a
        dead worker are claimed again when its lease ends. Call ``.run()`` on the result.
        Refuses when a model's SQL changed since the backfill was planned (:meth:`check_sql`),
        unless ``accept_changed_sql`` says why running the rest with the new SQL is right."""
        bf = cls.open(backfill_id, project=project, engine=engine, ledger=ledger)
        rec = bf.ledger.backfill(backfill_id)
        if not rec.status.runnable:
            raise InvalidInputError(f"backfill {backfill_id} is {rec.status}; nothing to resume")
        bf.check_sql(accept_changed_sql)  # before anything changes: a refused resume is a no-op
        reset = bf.ledger.reset_failed(backfill_id)
        if reset:
            log.info("backfill %s: %d failed task(s) will be retried", backfill_id, reset)
        return bf

    def changed_sql(self) -> list[str]:
        """Models with tasks left to run whose SQL differs from the SQL the backfill was planned
        with (or last accepted with :meth:`check_sql`)."""
        rec = self.ledger.backfill(self.id)
        hashes = {
            **rec.models,
            **rec.options.get("accepted_sql", {}),
        }
        left = {t.model for t in self.ledger.tasks(self.id) if t.status != TaskState.DONE}
        return [
            m
            for m, h in hashes.items()
            if m in left and m in self.project.models and sql_hash(self.project.models[m].sql) != h
        ]

    def check_sql(self, accept_changed_sql: str | None = None) -> None:
        """Refuses (:class:`SqlChangedError`, naming the models) to run tasks of a model whose
        SQL changed since the backfill was planned: its partitions would mix two versions.
        ``accept_changed_sql`` (the reason) records the change as intended, so the rest runs
        with the current SQL."""
        changed = self.changed_sql()
        if not changed:
            return
        if accept_changed_sql is None or not str(accept_changed_sql).strip():
            raise SqlChangedError(
                f"backfill {self.id}: the SQL of {', '.join(changed)} changed since it was "
                "planned, so its partitions would mix two versions. Restore the planned SQL and "
                f"resume; or discard it (backfill discard {self.id}) and plan a new backfill "
                "with the current SQL; or, when the change is meant (a fix for a failed task), "
                "resume with accept_changed_sql='why' (--accept-changed-sql REASON)",
                changed,
            )
        opts = self.ledger.backfill(self.id).options
        accepted = {
            **opts.get("accepted_sql", {}),
            **{m: sql_hash(self.project.models[m].sql) for m in changed},
        }
        reasons = [
            *opts.get("accepted_sql_reasons", []),
            {"models": changed, "reason": str(accept_changed_sql).strip(), "by": who()},
        ]
        self.ledger.set_options(
            self.id, {**opts, "accepted_sql": accepted, "accepted_sql_reasons": reasons}
        )
        log.warning(
            "backfill %s: SQL of %s changed since it was planned; the rest runs the "
            "current SQL (%s)",
            self.id,
            ", ".join(changed),
            accept_changed_sql,
        )

    def set_budget(self, budget: str | float) -> None:
        """Gives the backfill a new budget of engine time ("3h", or seconds) for what is left;
        the engine time it spent so far counts against it."""
        opts = self.ledger.backfill(self.id).options
        self.ledger.set_options(self.id, {**opts, "budget_seconds": parse_duration(budget)})

    def __repr__(self) -> str:
        return f"<Backfill {self.id} ({self.mode}): {self.reason!r}>"

    def __str__(self) -> str:
        return str(self.status())

    def _repr_html_(self) -> str | None:
        return self.status()._repr_html_()

    # -- inspection ----------------------------------------------------------------------------
    def status(self, now: dt.datetime | None = None) -> BackfillStatus:
        return backfill_status(self.ledger, self.id, now=now)

    def tasks(self) -> list[TaskRow]:
        return self.ledger.tasks(self.id)

    def attempts(self) -> list[AttemptRecord]:
        return self.ledger.attempts(self.id)

    def partitions(self) -> dict[str, list[Part]]:
        """Model -> the partitions the backfill rebuilds, in time order (empty: the whole
        table), from its tasks: what the audit compares and publish swaps."""
        out: dict[str, list[Part]] = {}
        for t in self.ledger.tasks(self.id):
            m = self.project.models[t.model]
            parts = out.setdefault(t.model, [])
            if t.start is None or t.end is None or m.strategy == "full" or not m.event_time:
                continue
            if m.grain:
                parts.extend(
                    (p.label, p.start, p.end)
                    for p in calendar_partitions(m.grain, t.start, t.end, tz=m.tz)
                )
            else:
                parts.append((t.label, t.start, t.end))
        return {k: sorted(set(v), key=lambda p: p[1]) for k, v in out.items()}

    @property
    def area(self) -> Area:
        """Where this backfill writes, and the periods it rebuilds per model (those of
        :meth:`partitions`; none for a model rebuilt whole)."""
        if self._area is None:
            periods = {
                model: [(s, e) for _, s, e in parts] for model, parts in self.partitions().items()
            }
            self._area = Area(None if self.mode == "direct" else self.id, periods)
        return self._area

    # -- running -------------------------------------------------------------------------------
    def run(self, concurrency: int | RunOptions = 4, **options: Any) -> BackfillStatus:
        """Runs the backfill's remaining tasks with up to ``concurrency`` threads (times the
        engine's ``capabilities.task_group``, claimed in rounds: dbt runs them together in few
        invocations); returns the final status (``.ok`` false when a task failed).
        ``backoff`` seconds before the 2nd attempt, doubling after. Safe to call from several
        processes at once.

        Claims only inside the backfill's windows (``windows`` replaces them) and within its
        budget (:mod:`.limits`). Outside a window it waits (``clock.sleep``, at most
        ``max_wait`` at a time, so a pause or cancel is seen) or, with ``exit_outside_window``,
        returns. While the backfill is paused (``backfill pause``, from any process) its
        running tasks finish and it waits, reading the ledger every ``held_poll`` seconds,
        until it is resumed or cancelled; with ``exit_when_held`` it returns instead. It
        returns when the backfill is cancelled (after its running tasks finish) and when the
        budget leaves no room for the next task. The returned status's ``held`` says why it
        returned before the end.

        ``stop`` (see :mod:`.stop`; the CLI requests it on SIGINT and SIGTERM) ends the run
        early: nothing more is claimed, running tasks get ``grace`` seconds to finish, then are
        interrupted (their attempts recorded as interrupted, their tasks pending again, their
        leases released); a second request interrupts them at once. The backfill is then
        ``interrupted`` (unless another worker still runs it) and a resume runs the rest.

        The options are the fields of :class:`~.runner.RunOptions` (``max_attempts`` 3,
        ``lease_seconds`` 60, ``poll`` 0.05 s, ``on_event`` a callback per
        :class:`~.status.TaskEvent``, ``clock`` for tests...), given as keywords or as one
        ``RunOptions`` in place of ``concurrency``."""
        return Runner(self, RunOptions.of(concurrency, **options)).run()


def _options(
    project: Project, tasks: Sequence[Mapping[str, Any]], opts: CreateOptions
) -> dict[str, Any]:
    """The run options recorded with a backfill (checked; nothing is recorded when bad)."""
    out: dict[str, Any] = {}
    settings = project.settings
    windows, budget, costs, force = opts.windows, opts.budget, opts.costs, opts.force
    specs = windows if windows is not None else (settings.windows if settings else None)
    if specs:
        out["windows"] = check_specs(specs, "window")
    if costs:
        out["costs"] = {str(k): float(v) for k, v in costs.items()}
    if budget is not None:
        out["budget_seconds"] = parse_duration(budget)
        unknown = sorted({str(t["model"]) for t in tasks} - set(out.get("costs", {})))
        if unknown:
            raise InvalidInputError(
                f"budget {budget!r}: no cost known for {', '.join(unknown)};"
                " estimate the plan first (backfill estimate, or costs=)"
            )
        limits = RunLimits.from_options(out)
        total = sum(limits.costs[str(t["model"])] * int(t["partitions"]) for t in tasks)
        out["estimate_seconds"] = total
        limits.refuse_over_budget(total, force)
        if force and total > out["budget_seconds"]:
            out["forced_reason"] = force.strip()
    return out
