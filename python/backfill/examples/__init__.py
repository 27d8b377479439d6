"""Example projects shipped with the package (so ``backfill demo`` works from a wheel)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["example_main", "notebook_path"]


def notebook_path() -> Path:
    """The shop notebook (plan, estimate, run, audit with a plot), shipped with the package: copy
    it and open it in Jupyter (``pip install 'backfill[notebook]'`` brings what it imports)."""
    return Path(__file__).resolve().parent / "shop_backfill.ipynb"


def example_main(module: str, title: str, create: Callable[..., Path]) -> int:
    """``python -m backfill.examples.<module> --dir DIR``: writes ``title`` and its raw data."""
    parser = argparse.ArgumentParser(
        prog=f"python -m backfill.examples.{module}", description=f"write the {title} and raw data"
    )
    parser.add_argument("--dir", required=True, help="new project directory")
    parser.add_argument("--orders-per-day", type=int, default=240)
    args = parser.parse_args()
    root = create(args.dir, orders_per_day=args.orders_per_day)
    sys.stdout.write(f"{title} with raw data in {root}\n")
    return 0
