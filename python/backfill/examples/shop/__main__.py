"""``python -m backfill.examples.shop --dir DIR``: writes the shop project and its raw data."""

import sys

from .. import example_main
from . import create

if __name__ == "__main__":
    sys.exit(example_main("shop", "shop project", create))
