"""OpenLineage events for changes to published history (``lineage:`` in ``backfill.yml``;
``pip install backfill[lineage]``).

Per model of a publication, one ``COMPLETE`` run event of the job ``backfill.<model>``:

* run facet ``nominalTime``: the period the backfill rebuilt (its changed partitions' span);
* output dataset ``<schema>.<model>`` with ``lifecycleStateChange: OVERWRITE``, the output facet
  ``subset`` (a ``PartitionSubsetCondition`` listing the changed partitions) and the custom facet
  ``backfill`` (:data:`FACET_SCHEMA_URL`, schema shipped beside this module): per-measure totals
  before/after/delta, the reason, the note, who published, the publication and backfill ids.

A forward-only change gets one event too: ``nominalTime`` starts at the change's first period,
the dataset carries the ``backfill`` facet (``kind: forward``, ``effectiveFrom``) and no lifecycle
change (no data changed). Each transport is tried as a delivery (see :mod:`.notify`); a failure
is recorded, never raised. An http transport is shown as its scheme and host (its URL may carry a
token, like a webhook's), and its API key is masked out of every failure's text.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._secrets import mask_text, mask_webhook
from ..errors import InvalidInputError
from ..model.consumers import LineageSettings
from .notify import Delivery, with_retries

if TYPE_CHECKING:  # pragma: no cover
    from ..model.project import Project

log = logging.getLogger(__name__)

__all__ = ["FACET_SCHEMA", "FACET_SCHEMA_URL", "emit", "events", "require_openlineage"]

FACET_SCHEMA_URL = (
    "https://github.com/backfill/backfill/blob/main/python/backfill/publish/"
    "BackfillChangeDatasetFacet.json"
)
#: the JSON schema of the custom ``backfill`` dataset facet (shipped with the package)
FACET_SCHEMA = Path(__file__).with_name("BackfillChangeDatasetFacet.json")


def require_openlineage() -> None:
    """Raises InvalidInputError (before anything changes) when openlineage-python is missing."""
    try:
        import openlineage.client  # noqa: F401
    except ImportError:
        raise InvalidInputError(
            "backfill.yml has a lineage: section, but openlineage-python is "
            "not installed: pip install 'backfill[lineage]'"
        ) from None


def _iso(value: Any) -> str | None:
    if value in (None, "", "None"):
        return None
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def events(project: Project, settings: LineageSettings, entry: Mapping[str, Any]) -> list[Any]:
    """The run events (openlineage ``RunEvent``) of one changelog entry, one per model."""
    from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import (
        DatasetFacet,
        lifecycle_state_change_dataset,
        nominal_time_run,
    )
    from openlineage.client.generated.base_subset_dataset import (
        OutputSubsetOutputDatasetFacet,
        Partition,
        PartitionSubsetCondition,
    )

    facet_cls = _facet_class(DatasetFacet)
    schema = project.settings.engine.schema if project.settings else "main"
    forward = entry["kind"] == "forward"
    out = []
    for model, mod in entry["models"].items():
        start, end = (mod["period"] or [None, None])[:2]
        changed = list(mod["changed_partitions"])
        facet = facet_cls(
            kind=entry["kind"],
            publicationId=entry["publication_id"],
            backfillId=entry["backfill_id"],
            reason=entry["reason"],
            note=entry["note"],
            publishedBy=entry["published_by"],
            publishedAt=_iso(entry["published_at"]),
            forcedReason=entry.get("forced_reason"),
            changedPartitions=changed,
            effectiveFrom=_iso(start) if forward else None,
            # JSON numbers in the facet (its schema): exact decimals become the nearest double.
            totals={
                m: {
                    "before": _number(t["old"]),
                    "after": _number(t["new"]),
                    "delta": _number(t["delta"]),
                    "pctDelta": t["pct"],
                }
                for m, t in mod["totals"].items()
            },
            producer=settings.producer,
        )
        facets: dict[str, Any] = {"backfill": facet}
        output_facets: dict[str, Any] = {}
        if not forward:
            facets["lifecycleStateChange"] = (
                lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
                    lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange.OVERWRITE,
                    producer=settings.producer,
                )
            )
            event_time = project.models[model].event_time if model in project.models else None
            output_facets["subset"] = OutputSubsetOutputDatasetFacet(
                outputCondition=PartitionSubsetCondition(
                    partitions=[
                        Partition(dimensions={event_time or "partition": label}, identifier=label)
                        for label in changed
                    ]
                ),
                producer=settings.producer,
            )
        nominal = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=str(_iso(start) or _iso(entry["published_at"])),
            nominalEndTime=_iso(end),
            producer=settings.producer,
        )
        out.append(
            RunEvent(
                eventType=RunState.COMPLETE,
                eventTime=str(_iso(entry["published_at"])),
                run=Run(runId=str(uuid.uuid4()), facets={"nominalTime": nominal}),
                job=Job(namespace=settings.namespace, name=f"backfill.{model}"),
                outputs=[
                    OutputDataset(
                        namespace=settings.namespace,
                        name=f"{schema}.{model}",
                        facets=facets,
                        outputFacets=output_facets,
                    )
                ],
                producer=settings.producer,
            )
        )
    return out


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


def _facet_class(base: type[Any]) -> type[Any]:
    """The attrs class of the custom facet (made on first use: openlineage is optional)."""
    global _FACET
    if _FACET is None:
        import attr

        @attr.define
        class BackfillChangeDatasetFacet(base):  # type: ignore[misc]
            kind: str
            publicationId: str
            backfillId: str | None
            reason: str
            note: str
            publishedBy: str
            publishedAt: str | None
            forcedReason: str | None
            changedPartitions: list[str]
            effectiveFrom: str | None
            totals: dict[str, dict[str, float | None]]

            @staticmethod
            def _get_schema() -> str:
                return FACET_SCHEMA_URL + "#/$defs/BackfillChangeDatasetFacet"

        _FACET = BackfillChangeDatasetFacet
    return _FACET


_FACET: type[Any] | None = None


def _transport_config(t: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    if t["type"] == "file":
        return {"type": "file", "log_file_path": t["path"], "append": True}
    if t["type"] == "http":
        cfg: dict[str, Any] = {
            "type": "http",
            "url": t["url"],
            "endpoint": t.get("endpoint", "api/v1/lineage"),
            "timeout": float(t.get("timeout", timeout)),
            # our retries (recorded), not the client's on top of them
            "retry": {"total": 0, "read": 0, "connect": 0},
        }
        if t.get("api_key_env"):  # the key stays out of backfill.yml
            cfg["auth"] = {"type": "api_key", "apiKey": _api_key(t)}
        return cfg
    return {"type": "console"}


def _api_key(t: Mapping[str, Any]) -> str:
    return os.environ.get(t["api_key_env"], "") if t.get("api_key_env") else ""


def _target(t: Mapping[str, Any]) -> str:
    """The transport as a delivery shows it (an http URL as its scheme and host only)."""
    return mask_webhook(str(t["url"])) if t.get("url") else str(t.get("path") or t["type"])


def _scrub(t: Mapping[str, Any]) -> Callable[[str], str]:
    """Masks the transport's URL and API key out of a failure's text."""
    url = str(t.get("url") or "")
    return lambda text: mask_text(text, webhooks=(url,) if url else (), values=(_api_key(t),))


def emit(
    project: Project,
    settings: LineageSettings,
    entry: Mapping[str, Any],
    *,
    retries: int,
    backoff: float,
    timeout: float,
) -> list[Delivery]:
    """Emits the entry's events through every transport; one :class:`Delivery` per transport."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport import get_default_factory

    evs = events(project, settings, entry)
    out = []
    for t in settings.transports:

        def send(t: Mapping[str, Any] = t, evs: Sequence[Any] = evs) -> None:
            client = OpenLineageClient(
                transport=get_default_factory().create(_transport_config(t, timeout))
            )
            try:
                for ev in evs:
                    client.emit(ev)
            finally:
                client.close()

        out.append(
            with_retries(
                send, "openlineage", "lineage", _target(t), retries, backoff, scrub=_scrub(t)
            )
        )
    return out
