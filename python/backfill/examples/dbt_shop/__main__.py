"""``python -m backfill.examples.dbt_shop --dir DIR``: writes the dbt shop project and raw data."""

from __future__ import annotations

import argparse
import sys

from . import create


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m backfill.examples.dbt_shop",
                                     description="write the dbt shop example project and raw data")
    parser.add_argument("--dir", required=True, help="new project directory")
    parser.add_argument("--orders-per-day", type=int, default=240)
    args = parser.parse_args()
    root = create(args.dir, orders_per_day=args.orders_per_day)
    sys.stdout.write(f"dbt shop project with raw data in {root}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
