"""What ``backfill --help`` and each command's ``--help`` say: texts for people running the tool.

The command modules' docstrings are for developers (they name modules, internals and reST
markup); argparse is given these texts instead, and each command's own in its ``add_parser``
through :func:`add_command`. A command's help opens with one line saying what it does; its
epilog (printed as written, so examples keep their layout) shows how it is used.
"""

from __future__ import annotations

import argparse

__all__ = ["DESCRIPTION", "EPILOG", "add_command"]

DESCRIPTION = """\
Backfill data pipelines: rebuild past partitions of your models (after a bug fix, a logic change,
for a new table) into an audit area nobody reads yet, see what changed against the published data,
then publish it atomically, with a changelog for the data's consumers."""

EPILOG = """\
the usual flow, in a project directory (backfill.yml + models/; a dbt project: --dbt PATH):
  backfill plan --project . --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29
  backfill run --select "fct_daily_sales+" --start 2026-08-01 --end 2026-10-29 \\
      --reason "discount bug fixed"          # into the audit area; `backfill status` meanwhile
  backfill audit                             # what changed, per partition; the gates
  backfill publish --note "revenue from 1 Aug about 2% lower"

try it on an example shop, in a temporary directory:
  backfill demo

exit status: 0 ok, 1 the work failed (a task, a gate, a refused publish), 2 usage or input error.

read more: `backfill COMMAND --help`; the README of the backfill package (its project page) for
a five-minute tour and a section per engine; the shop notebook shipped with the package (the
same story with plots), whose path this prints:
  python -c 'from backfill.examples import notebook_path; print(notebook_path())'"""


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    *,
    description: str | None = None,
    examples: str | None = None,
) -> argparse.ArgumentParser:
    """Registers the command ``name``. ``summary`` is its line in the list of commands;
    ``description`` (one line; default: ``summary`` as a sentence) opens its own help, and
    ``examples`` closes it, printed as written."""
    return sub.add_parser(
        name,
        help=summary,
        description=description or f"{summary[0].upper()}{summary[1:]}.",
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
