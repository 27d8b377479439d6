"""``python -m backfill.cli``: the ``backfill`` command."""

import sys

from . import main

sys.exit(main())
