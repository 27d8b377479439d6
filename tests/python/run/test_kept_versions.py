"""``KeptVersion``, the ledger's record of what a publication or rollback kept: its checks,
``expired``, ``model`` and how it reads. (How a ledger stores it: conformance/test_ledger.py.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from backfill.errors import InvalidInputError, NotFoundError
from backfill.fingerprints import PartitionFingerprint
from backfill.run.ledger import KeptVersion
from backfill.versions import KeptModel

UTC = dt.timezone.utc
SALES = KeptModel(
    "fct_sales",
    "replace",
    True,
    (("2026-08-03", dt.datetime(2026, 8, 3, tzinfo=UTC), dt.datetime(2026, 8, 4, tzinfo=UTC)),),
    after={"2026-08-03": PartitionFingerprint.of(1, 7)},
    rows=1,
)
VIEW = KeptModel("v_sales", "view", True, definition="SELECT 1")


def version(**kw: Any) -> KeptVersion:
    values: dict[str, Any] = {
        "publication_id": "pub_1",
        "backfill_id": "bf_1",
        "kind": "publish",
        "rolls_back": None,
        "published_at": "2026-08-03T10:00:00+00:00",
        "keep_until": "2026-09-02T10:00:00+00:00",
        "models": (SALES, VIEW),
    }
    return KeptVersion(**{**values, **kw})


def test_expired_at_the_end_of_its_retention_and_always_when_nothing_was_kept() -> None:
    v = version()
    until = dt.datetime(2026, 9, 2, 10, tzinfo=UTC)
    assert not v.expired(until - dt.timedelta(seconds=1))
    assert v.expired(until) and v.expired(until + dt.timedelta(days=1))
    # the same instant in another zone
    assert v.expired(until.astimezone(dt.timezone(dt.timedelta(hours=-5))))
    assert version(keep_until=None, models=()).expired(dt.datetime(2000, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidInputError, match="expected an aware datetime"):
        v.expired(dt.datetime(2026, 9, 2))  # naive


def test_model_finds_a_kept_model_or_names_the_kept_ones() -> None:
    v = version()
    assert v.model("v_sales") is VIEW and v.model("fct_sales").rows == 1
    with pytest.raises(NotFoundError, match=r"pub_1 kept nothing of model 'x'; it kept: fct_sales"):
        v.model("x")
    with pytest.raises(NotFoundError, match="it kept: none"):
        version(models=()).model("x")


def test_str_says_what_was_kept_until_when_and_what_became_of_it() -> None:
    assert str(version()) == (
        "publication pub_1 (backfill bf_1, 2026-08-03T10:00:00+00:00): kept fct_sales, v_sales "
        "until 2026-09-02T10:00:00+00:00"
    )
    rb = version(
        publication_id="rb_1",
        kind="rollback",
        rolls_back="pub_1",
        keep_until=None,
        models=(),
        rolled_back_by="rb_2",
    )
    assert str(rb) == (
        "rollback rb_1 of pub_1 (backfill bf_1, 2026-08-03T10:00:00+00:00): kept nothing "
        "(keep: 0); rolled back by rb_2"
    )
    dropped = version(dropped_at="2026-09-03T00:00:00+00:00")
    assert str(dropped).endswith("; dropped at 2026-09-03T00:00:00+00:00")


def test_models_given_as_a_list_are_kept_as_a_tuple() -> None:
    v = version(models=[SALES])
    assert v.models == (SALES,) and v == version(models=(SALES,))
    assert dataclasses.replace(v, dropped_at=None) == v


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "undo"}, r"kind 'undo' is not one of publish, rollback"),
        ({"kind": "rollback"}, r"a rollback names the publication it takes back"),
        ({"rolls_back": "pub_0"}, r"a publish takes nothing back, yet rolls_back is 'pub_0'"),
        ({"kind": "rollback", "rolls_back": "pub_1"}, "cannot take back itself"),
        ({"publication_id": " "}, r"publication_id ' ' is not an id"),
        ({"backfill_id": None}, r"backfill_id None is not an id"),
        ({"published_at": "2026-08-03"}, r"published_at '2026-08-03': expected ISO 8601"),
        ({"keep_until": "soon"}, r"keep_until 'soon': expected ISO 8601"),
        ({"dropped_at": 5}, r"dropped_at 5: expected ISO 8601"),
        ({"models": ({"model": "m"},)}, r"expected KeptModel values"),
    ],
)
def test_a_malformed_kept_version_is_refused_naming_the_value(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        version(**change)


def test_a_stored_row_reads_back_as_the_record() -> None:
    v = version(rolled_back_by="rb_1")
    row = {**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)}}
    row["models"] = v.models_json()
    assert KeptVersion.from_row(row) == v
    assert v["keep_until"] == v.keep_until  # read by field name, as the other records
    with pytest.raises(InvalidInputError, match="not a JSON list"):
        KeptVersion.from_row({**row, "models": "{}"})
    with pytest.raises(InvalidInputError, match="not JSON"):
        KeptVersion.from_row({**row, "models": "nope"})
