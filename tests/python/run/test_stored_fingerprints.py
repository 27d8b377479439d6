"""Fingerprints as the ledger stores them: ``encode``/``decode`` round-trip, the stored text is
the format every ledger file so far holds, and a bad stored value says what it is."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backfill.errors import InvalidInputError
from backfill.fingerprints import PartitionFingerprint, TaskFingerprint, recorded_partitions

fingerprints = st.builds(
    PartitionFingerprint.of, st.integers(0, 10**12), st.integers(0, (1 << 64) - 1)
)
# Partition labels as calendars write them: no spaces (they separate the pieces); '=' may appear
# (the last one separates the label from its fingerprint).
labels = st.text(
    st.characters(whitelist_categories=("L", "N", "Pd", "Sm"), whitelist_characters="=:_"),
    min_size=1,
    max_size=12,
).filter(lambda s: s[-1] != "=")


@given(fingerprints)
def test_a_partition_fingerprint_round_trips(fp: PartitionFingerprint) -> None:
    text = fp.encode()
    assert text == str(fp) == f"{fp.rows}:{fp.digest}" and len(fp.digest) == 16
    assert PartitionFingerprint.decode(text) == fp
    assert PartitionFingerprint.decode(text).encode() == text


@given(st.dictionaries(labels, fingerprints, max_size=6))
def test_a_task_fingerprint_round_trips(parts: dict[str, PartitionFingerprint]) -> None:
    task = TaskFingerprint(PartitionFingerprint.total(parts.values()), parts)
    text = task.encode()
    assert TaskFingerprint.decode(text) == task and str(task) == text
    assert recorded_partitions(text) == (parts or None)
    # without its partitions (an engine that does not compute them): the period alone
    assert TaskFingerprint(task.period).encode() == text.split(" ")[0] == task.period.encode()


@given(
    st.dictionaries(labels, fingerprints, max_size=3), st.from_regex(r"[0-9]{1,19}", fullmatch=True)
)
def test_a_task_fingerprint_keeps_the_version_its_write_made(
    parts: dict[str, PartitionFingerprint], version: str
) -> None:
    task = TaskFingerprint(PartitionFingerprint.total(parts.values()), parts, version)
    text = task.encode()
    assert text.endswith(f" @{version}")
    back = TaskFingerprint.decode(text)
    assert back.version == version and back.partitions == (parts or None)
    # the same rows written again (another version) fingerprint the same
    assert back == TaskFingerprint(task.period, parts, None)
    assert recorded_partitions(text) == (parts or None)


def test_the_stored_text_is_the_format_of_earlier_ledgers() -> None:
    a, b = PartitionFingerprint.of(2, 5), PartitionFingerprint.of(3, 7)
    task = TaskFingerprint(PartitionFingerprint.total([a, b]), {"2026-08-01": a, "2026-08-02": b})
    assert task.encode() == (
        "5:000000000000000c 2026-08-01=2:0000000000000005 2026-08-02=3:0000000000000007"
    )
    # Digests written shorter (hand-written fixtures of earlier versions) are the same numbers.
    assert PartitionFingerprint.decode("9:aaaa") == PartitionFingerprint.of(9, 0xAAAA)
    assert TaskFingerprint.decode("4:beef").period == PartitionFingerprint(4, "000000000000beef")
    assert hash(task) == hash(TaskFingerprint.decode(task.encode()))


@pytest.mark.parametrize("bad", ["", "x", "5", "5:", ":ab", "-1:ab", "5:xyz", "5:" + "a" * 17])
def test_a_bad_stored_value_is_named(bad: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(f"fingerprint {bad!r}: expected")):
        PartitionFingerprint.decode(bad)
    with pytest.raises(InvalidInputError, match=re.escape(f"task fingerprint {bad!r}: expected")):
        TaskFingerprint.decode(bad)


def test_partitions_that_do_not_list_fall_back_to_the_audit_scanning() -> None:
    """As before the types: the period stands; partitions that do not add up to it, repeat a
    label or are not ``label=rows:digest`` are left out (None), so an audit scans the area."""
    a, b = PartitionFingerprint.of(2, 5), PartitionFingerprint.of(3, 7)
    text = TaskFingerprint(PartitionFingerprint.total([a, b]), {"d1": a, "d2": b}).encode()
    for bad in (
        text.replace("5:", "6:", 1),  # the partitions do not add up to the period
        text + " d1=2:0000000000000005",  # a label twice
        text.replace("=", ":"),  # not label=fingerprint
        text + " d3=zz",
    ):
        got = TaskFingerprint.decode(bad)
        assert got.partitions is None and got.period == PartitionFingerprint.decode(bad[:18])
        assert recorded_partitions(bad) is None, bad
    assert recorded_partitions(None) is None and recorded_partitions("") is None
    assert recorded_partitions("nonsense d1=1:01") is None  # no period: nothing to trust
