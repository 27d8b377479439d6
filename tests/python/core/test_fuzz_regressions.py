"""What the fuzz targets of tests/fuzz found (make fuzz), kept as regression tests: inputs the
Python parsers must refuse with InvalidInputError naming the value, and an Arrow import that read
the wrong rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill._arrow import ArrowTable
from backfill.errors import InvalidInputError
from backfill.integrations.kafka.settings import parse_duration as kafka_duration
from backfill.windows import parse_duration


@pytest.mark.parametrize("value", ["3" * 53 + "0s", "9999999999999999d", 1e300, float("inf")])
def test_kafka_duration_too_long_for_a_timedelta_is_named(value: object) -> None:
    # duration_fuzz: timedelta() raised OverflowError instead of naming the value.
    with pytest.raises(InvalidInputError, match=r"lateness .* is too long a duration"):
        kafka_duration(value, "lateness")


@pytest.mark.parametrize("value", ["9" * 400, "9" * 400 + "h", float("inf")])
def test_budget_that_is_infinite_is_named(value: object) -> None:
    # duration_fuzz: float() of 400 digits is inf, which passed as a budget (and then broke
    # format_duration with an OverflowError).
    with pytest.raises(InvalidInputError, match=r"budget .*: expected a finite duration"):
        parse_duration(value)


def test_sliced_nested_structs_read_their_own_rows() -> None:
    # Found while writing arrow_fuzz: a struct's offset reached its children but not theirs, so a
    # sliced table's struct-in-struct column read the rows before the slice.
    col = pa.array([{"inner": {"x": 10}}, {"inner": {"x": 20}}, {"inner": {"x": 30}}])
    sliced = pa.table({"k": [1, 2, 3], "st": col}).slice(1, 2)
    assert ArrowTable.from_arrow(sliced).to_pydict() == {
        "k": [2, 3],
        "st": [{"inner": {"x": 20}}, {"inner": {"x": 30}}],
    }
