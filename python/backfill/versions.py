"""What a publication kept of the version it replaced, so that it can be taken back.

>>> import datetime as dt
>>> utc = dt.timezone.utc
>>> day = (dt.datetime(2026, 8, 3, tzinfo=utc), dt.datetime(2026, 8, 4, tzinfo=utc))
>>> kept = KeptModel("fct_daily_sales", "replace", True, (("2026-08-03", *day),),
...                  after={"2026-08-03": PartitionFingerprint.of(1, 7)}, rows=1)
>>> KeptModel.decode(kept.encode()) == kept
True

Every publish keeps, per model, what it replaced: on DuckDB and PostgreSQL the replaced rows
move to the schema ``backup_<publication id>`` in the publish's transaction; on Iceberg the
table's snapshot before the publish (its rows are read back by time travel). A rollback is a
publish whose new rows are that backup, and keeps in turn what it replaced.

How a model was changed decides how it is put back (``strategy``):

* ``replace``: the rows of its periods (``parts``) were replaced; a rollback replaces them again
  with the kept rows. Periods it published unchanged (the audit's fingerprints equal on both
  sides) are listed in ``unchanged`` instead: nothing of them is kept or put back;
* ``merge``: the rows whose unique ``keys`` the new rows carry were replaced or added; the kept
  rows are the old rows of those keys, and the keys themselves are kept beside them
  (``<model>__keys``): a rollback deletes every row of those keys and puts the kept rows back;
* ``full``: the whole table was replaced (or, ``existed=False``, created: a rollback drops it);
* ``view``: the view was re-created; ``definition`` is its SQL before (None: there was none).

``after`` holds the published fingerprints right after the publish, partition by partition: a
rollback refuses when the published partitions no longer have them (something was published or
written over them since). A base module (it imports no stage): the engines, the ledger and the
publish stage speak of the same type.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError
from .fingerprints import PartitionFingerprint

__all__ = [
    "STRATEGIES",
    "KeptModel",
    "PublishedVersion",
    "backup_schema",
    "decode_models",
    "encode_models",
]

#: how a publication changed a model (see the module docstring)
STRATEGIES = ("replace", "merge", "full", "view")


def backup_schema(publication_id: str) -> str:
    """The schema holding what ``publication_id`` replaced (DuckDB, PostgreSQL)."""
    return f"backup_{publication_id}"


@dataclass(frozen=True)
class KeptModel:
    """What one publication kept of one model (see the module docstring)."""

    model: str
    strategy: str
    existed: bool
    parts: tuple[tuple[str, dt.datetime, dt.datetime], ...] = ()
    keys: tuple[str, ...] = ()
    after: Mapping[str, PartitionFingerprint] = field(default_factory=dict)
    #: rows kept (0 for a first build)
    rows: int = 0
    #: Iceberg: the snapshot id main had before the publish (None: it had none)
    snapshot: int | None = None
    #: a view's SQL before the publish
    definition: str | None = None
    #: a replace's partitions that it published unchanged (the same fingerprint before and
    #: after): nothing of them is kept, a rollback leaves them (``parts`` are the others)
    unchanged: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InvalidInputError(
                f"kept model {self.model!r}: strategy {self.strategy!r} is not one of "
                f"{', '.join(STRATEGIES)}"
            )
        if self.strategy == "merge" and not self.keys:
            raise InvalidInputError(f"kept model {self.model!r}: a merge keeps its keys")

    @property
    def restores_nothing(self) -> bool:
        """A replace whose every partition was published unchanged: a rollback has nothing of
        it to put back."""
        return self.strategy == "replace" and self.existed and not self.parts

    def to_json(self) -> dict[str, Any]:
        """The JSON-able form the ledger stores (:meth:`from_json` reads it back)."""
        return {
            "model": self.model,
            "strategy": self.strategy,
            "existed": self.existed,
            "parts": [[label, s.isoformat(), e.isoformat()] for label, s, e in self.parts],
            "keys": list(self.keys),
            "after": {label: fp.encode() for label, fp in self.after.items()},
            "rows": self.rows,
            "snapshot": self.snapshot,
            "definition": self.definition,
            "unchanged": list(self.unchanged),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeptModel:
        try:
            return cls(
                model=str(data["model"]),
                strategy=str(data["strategy"]),
                existed=bool(data["existed"]),
                parts=tuple(
                    (str(label), dt.datetime.fromisoformat(s), dt.datetime.fromisoformat(e))
                    for label, s, e in data.get("parts", ())
                ),
                keys=tuple(str(k) for k in data.get("keys", ())),
                after={
                    str(label): PartitionFingerprint.decode(str(text))
                    for label, text in (data.get("after") or {}).items()
                },
                rows=int(data.get("rows") or 0),
                snapshot=None if data.get("snapshot") is None else int(data["snapshot"]),
                definition=data.get("definition"),
                unchanged=tuple(str(label) for label in data.get("unchanged", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"a kept model record {dict(data)!r} is not readable ({exc}); expected the "
                "form KeptModel.to_json writes"
            ) from exc

    def encode(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> KeptModel:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"a kept model record is not JSON: {text[:80]!r}") from exc
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"a kept model record is not a JSON object: {text[:80]!r}")
        return cls.from_json(data)


@dataclass(frozen=True)
class PublishedVersion:
    """What the warehouse records of a publication (or rollback) in the same transaction as its
    swap (the table ``backfill_versions``): if the process dies after that commit and before
    the ledger recorded it, the ledger is brought level from this record."""

    publication_id: str
    backfill_id: str
    #: the publication a rollback took back (None: a publish)
    rolls_back: str | None
    published_at: str
    keep_until: str | None
    models: tuple[KeptModel, ...]

    def models_json(self) -> str:
        return encode_models(self.models)


def encode_models(models: Sequence[KeptModel]) -> str:
    """What a publication kept, as stored (the ledger's ``kept_versions.models``, the
    warehouse's ``backfill_versions.models``): a JSON list of :meth:`KeptModel.to_json`."""
    return json.dumps([m.to_json() for m in models], sort_keys=True)


def decode_models(text: str, where: str) -> tuple[KeptModel, ...]:
    """:func:`encode_models`'s text read back; InvalidInputError naming ``where`` otherwise."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidInputError(
            f"{where}: the kept models are not JSON: {str(text)[:80]!r}"
        ) from exc
    if not isinstance(data, list):
        raise InvalidInputError(f"{where}: the kept models are not a JSON list: {text[:80]!r}")
    return tuple(KeptModel.from_json(d) for d in data)
