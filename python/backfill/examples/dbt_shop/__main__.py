"""``python -m backfill.examples.dbt_shop --dir DIR``: writes the dbt shop project and raw data."""

import sys

from .. import example_main
from . import create

if __name__ == "__main__":
    sys.exit(example_main("dbt_shop", "dbt shop project", create))
