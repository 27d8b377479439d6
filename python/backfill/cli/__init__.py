"""The ``backfill`` command line. Configuration (logging, output format) lives here only.

Exit codes: 0 ok, 1 the work failed (a failed task, a failed gate), 2 usage or input error
(:mod:`backfill.cli.exit_codes`). Each command group has its module: :mod:`.partitions`,
:mod:`.lint`, :mod:`.plan`, :mod:`.run` (run, status), :mod:`.check` (estimate, check),
:mod:`.audit` (audit, diff), :mod:`.publish` (publish, discard, changelog), :mod:`.rollback`,
:mod:`.forward`, :mod:`.tables` (partition), :mod:`.demo`;
:mod:`.dbt` adds ``--dbt PATH`` to the commands that take a project.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .._secrets import MaskingFilter
from .._version import __version__
from ..errors import BackfillError
from . import (
    audit,
    check,
    control,
    dbt,
    demo,
    forward,
    lint,
    partitions,
    plan,
    publish,
    replay,
    rollback,
    run,
    tables,
)
from .exit_codes import EXIT_SIGINT, EXIT_USAGE
from .helptext import DESCRIPTION, EPILOG

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    # What users read comes from .helptext; this module's docstring is for developers.
    parser = argparse.ArgumentParser(
        prog="backfill",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("--version", action="version", version=f"backfill {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # Registration order is the order `backfill --help` lists the commands in: the lifecycle.
    partitions.add_parser(sub)
    lint.add_parser(sub)
    plan.add_parser(sub)
    run.add_parsers(sub)  # run, status
    control.add_parsers(sub)  # pause, resume, cancel
    check.add_estimate_parser(sub)
    audit.add_audit_parser(sub)
    publish.add_publish_parser(sub)
    publish.add_discard_parser(sub)
    publish.add_changelog_parser(sub)
    rollback.add_rollback_parser(sub)
    rollback.add_gc_parser(sub)
    tables.add_parser(sub)
    forward.add_parser(sub)
    check.add_check_parser(sub)
    audit.add_diff_parser(sub)
    replay.add_parser(sub)
    demo.add_parser(sub)
    dbt.add_dbt_options(sub)  # last: it extends the commands registered above
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    # Our own messages are masked where they are made; a library's (a driver, OpenLineage's
    # client at DEBUG) may log a connection string or a webhook as it was given.
    for handler in logging.getLogger().handlers:
        handler.addFilter(MaskingFilter())
    try:
        return int(args.func(args))
    except BackfillError as exc:
        sys.stderr.write(f"backfill: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C outside a run (which stops itself: see cli.run)
        sys.stderr.write(
            "backfill: interrupted (Ctrl-C); every ledger write is one transaction,"
            " so nothing was half-recorded\n"
        )
        return EXIT_SIGINT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
