"""`backfill --help` and every command's `--help`, as users see them: the installed console script.

The texts are written for people running the tool; the CLI modules' docstrings are for developers
and must not leak into the help (reST markup, notes about where code lives).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backfill.cli import build_parser

BACKFILL = Path(sys.executable).parent / "backfill"

# Phrasing of the developer docstrings that has no place in what users read.
DEVELOPER_PHRASES = (
    "``",
    ":mod:",
    ":class:",
    ":func:",
    ":meth:",
    "lives here only",
    "Configuration (logging",
)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _commands() -> list[tuple[str, ...]]:
    """Every command path, nested ones too (``replay reset-group``), from the parser itself, so
    a command added later is tested without editing this file."""
    out: list[tuple[str, ...]] = []
    for name, parser in _subcommands(build_parser()).items():
        out.append((name,))
        out.extend((name, nested) for nested in _subcommands(parser))
    return out


def _help(*command: str) -> str:
    # A fixed width: argparse wraps to $COLUMNS, and the assertions read whole lines.
    env = {**os.environ, "COLUMNS": "100"}
    r = subprocess.run(
        [str(BACKFILL), *command, "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""
    return r.stdout


def _description(text: str) -> list[str]:
    """The paragraph between the usage and the first argument section."""
    after_usage = text.split("\n\n", 1)[1]
    paragraph = after_usage.split("\n\n", 1)[0]
    return paragraph.splitlines()


def _no_developer_phrasing(text: str) -> None:
    found = [p for p in DEVELOPER_PHRASES if p in text]
    assert not found, f"developer phrasing {found} in:\n{text}"


def test_top_level_help_describes_the_tool_and_lists_every_command() -> None:
    text = _help()
    assert text.startswith("usage: backfill ")
    _no_developer_phrasing(text)
    description = _description(text)
    assert 2 <= len(description) <= 3, description  # what it does, in two or three lines
    # The usual flow with examples, and where to read more.
    flow = (
        text.index("backfill plan "),
        text.index("backfill run "),
        text.index("backfill audit"),
        text.index("backfill publish "),
    )
    assert list(flow) == sorted(flow), "plan -> run -> audit -> publish, in that order"
    assert "backfill demo" in text and "read more" in text
    listed = dict(re.findall(r"^    (\S+) +(\S.*)$", text, flags=re.MULTILINE))
    for (name,) in (c for c in _commands() if len(c) == 1):
        assert name in listed, f"{name} is not listed with a one-line description:\n{text}"


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_command_help_says_what_it_does(command: tuple[str, ...]) -> None:
    text = _help(*command)
    assert text.startswith(f"usage: backfill {' '.join(command)} "), text
    _no_developer_phrasing(text)
    description = _description(text)
    assert len(description) == 1 and description[0][0].isupper(), (
        f"`backfill {' '.join(command)} --help` should open with one line saying what it "
        f"does:\n{text}"
    )
    assert not description[0].startswith(("positional arguments", "options")), text
    assert re.search(r"^examples?:$", text, flags=re.MULTILINE), f"no example:\n{text}"
