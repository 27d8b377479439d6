"""The diff's column pass over many changed rows (an audit's partitions whose every row changed):
decimal columns of one scale read as 128-bit integers, and the pairs put in old-row order by
placement rather than a sort. Against the DuckDB oracle and a cell-by-cell Python oracle of the
tolerance rule and of max_abs_diff, with sliced, chunked, shuffled inputs on one and two
threads."""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import backfill
from diff_oracles import duckdb_diff

N = 30_000
BIG = 2**60  # unscaled values past 2^53: unequal integers that round to one double


def _decimals(unscaled: list[int | None], scale: int, typ: pa.DataType) -> pa.Array:
    return pa.array(
        [None if u is None else decimal.Decimal(u).scaleb(-scale) for u in unscaled], typ
    )


def _tables(seed: int) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(N + 7)
    price = [int(x) for x in rng.integers(-(10**6), 10**6, N + 7)]
    big = [BIG + int(x) for x in rng.integers(0, 1000, N + 7)]
    old_price: list[int | None] = [None if i % 97 == 0 else p for i, p in enumerate(price)]
    old = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "amount": _decimals(old_price, 2, pa.decimal128(18, 2)),
            "big": _decimals(big, 2, pa.decimal128(38, 2)),
            # scales differ between the sides: compared by value, not as integers
            "rescaled": _decimals(price, 2, pa.decimal128(12, 2)),
        }
    )
    new_price: list[int | None] = []
    for i, p in enumerate(old_price):
        if i % 89 == 0:
            new_price.append(None if p is not None else 5)  # value <-> null
        elif i % 10 == 0 or p is None:
            new_price.append(p)  # unchanged (or still null)
        else:
            new_price.append(p + int(rng.integers(-300, 300)))  # most rows: a few cents off
    new_big = [b + (1 if i % 3 == 0 else 0) for i, b in enumerate(big)]
    new_rescaled = [p * 10 + (1 if i % 7 == 0 else 0) for i, p in enumerate(price)]
    new = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "amount": _decimals(new_price, 2, pa.decimal128(18, 2)),
            "big": _decimals(new_big, 2, pa.decimal128(38, 2)),
            "rescaled": _decimals(new_rescaled, 3, pa.decimal128(14, 3)),
        }
    )
    # sliced (array offsets), shuffled, in uneven chunks; 7 rows removed and added
    old = old.slice(7).take(pa.array(rng.permutation(N)))
    new = new.slice(0, N).take(pa.array(rng.permutation(N)))
    old = pa.Table.from_batches(old.to_batches(max_chunksize=4_999))
    new = pa.Table.from_batches(new.to_batches(max_chunksize=7_001))
    return old, new


def _as_double(v: Any) -> float:
    """The diff's double of a decimal: the unscaled integer rounded, over 10^scale."""
    sign, digits, exp = v.as_tuple()
    unscaled = int("".join(map(str, digits))) * (-1 if sign else 1)
    return float(unscaled) / math.pow(10.0, -exp)


def _cell_oracle(
    old: pa.Table, new: pa.Table, column: str, tol: tuple[float, float] | None
) -> tuple[int, float]:
    """(changed cells, max_abs_diff) of ``column`` over the matched rows."""
    a = dict(zip(old["id"].to_pylist(), old[column].to_pylist(), strict=True))
    changed, most = 0, 0.0
    for k, y in zip(new["id"].to_pylist(), new[column].to_pylist(), strict=True):
        if k not in a:
            continue
        x = a[k]
        if x is None or y is None:
            changed += (x is None) != (y is None)
            continue
        dx, dy = _as_double(x), _as_double(y)
        most = max(most, abs(dy - dx))
        if x == y:
            continue
        if tol is not None and (dx == dy or abs(dy - dx) <= tol[0] + tol[1] * abs(dx)):
            continue
        changed += 1
    return changed, most


def _same_double(old: pa.Table, new: pa.Table, column: str) -> int:
    """Matched cells whose decimals differ but read as the same double."""
    a = dict(zip(old["id"].to_pylist(), old[column].to_pylist(), strict=True))
    return sum(
        1
        for k, y in zip(new["id"].to_pylist(), new[column].to_pylist(), strict=True)
        if a.get(k) is not None
        and y is not None
        and a[k] != y
        and _as_double(a[k]) == _as_double(y)
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_many_changed_decimal_rows_match_duckdb_and_the_cell_oracle(threads: int) -> None:
    old, new = _tables(seed=threads)
    cols = ["amount", "big", "rescaled"]
    r = backfill.diff(old, new, "id", threads=threads)
    want = duckdb_diff(old, new, ["id"], cols)
    assert r.summary.changed == want["changed"] > N // 2  # the placement path: most rows
    assert (r.summary.added, r.summary.removed) == (want["added"], want["removed"]) == (7, 7)
    by_col = {row["column"]: row for row in r.columns.to_pylist()}
    for c in cols:
        assert by_col[c]["changed"] == want["changed_" + c], c
        assert by_col[c]["null_to_value"] == want["n2v_" + c], c
        assert by_col[c]["value_to_null"] == want["v2n_" + c], c
        changed, most = _cell_oracle(old, new, c, None)
        assert by_col[c]["changed"] == changed, c
        assert by_col[c]["max_abs_diff"] == most, c
    # Exactly: "big" differs by one unscaled unit in a third of the rows, most of them the
    # same double (one double apart is 2.56 units at 2^60).
    assert by_col["big"]["changed"] > N // 4 and _same_double(old, new, "big") > N // 8
    # The sample is the first changed rows in the new table's order, whatever order the
    # column pass saw them in.
    a = {c: dict(zip(old["id"].to_pylist(), old[c].to_pylist(), strict=True)) for c in cols}
    first = [
        k
        for i, k in enumerate(new["id"].to_pylist())
        if k in a["amount"] and any(a[c][k] != new[c][i].as_py() for c in cols)
    ][:10]
    assert list(dict.fromkeys(row["id"] for row in r.changed_sample.to_pylist())) == first


@pytest.mark.parametrize("abs_tol, rel_tol", [(0.5, 0.0), (0.0, 0.01), (1.0, 0.001)])
def test_decimal_tolerances_follow_the_cell_oracle(abs_tol: float, rel_tol: float) -> None:
    old, new = _tables(seed=5)
    tol = {"abs": abs_tol, "rel": rel_tol}
    r = backfill.diff(old, new, "id", tolerance={"amount": tol, "big": tol})
    by_col = {row["column"]: row for row in r.columns.to_pylist()}
    for c in ("amount", "big"):
        changed, most = _cell_oracle(old, new, c, (abs_tol, rel_tol))
        assert by_col[c]["compare"] == "tolerance"
        assert (by_col[c]["changed"], by_col[c]["max_abs_diff"]) == (changed, most), c
    # under a tolerance, unscaled integers that round to one double are equal
    exact = _cell_oracle(old, new, "big", None)[0]
    assert by_col["big"]["changed"] <= exact - _same_double(old, new, "big") < exact
    # and the same rows in key order (the merge path) agree
    ordered = backfill.diff(
        old.sort_by("id"), new.sort_by("id"), "id", tolerance={"amount": tol, "big": tol}
    )
    assert ordered.columns.to_pylist() == r.columns.to_pylist()
    assert ordered.summary == r.summary
