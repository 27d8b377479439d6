#!/usr/bin/env python3
"""Re-executes the shop notebook in place, so that it is committed with its outputs
(`make notebook`; a forge shows them to people who read it before running it).

    python tools/run_notebook.py            # run it; rewrite it when its outputs changed
    python tools/run_notebook.py --check    # run it; exit 1 with a diff when they are stale
    python tools/run_notebook.py --force    # rewrite it even when only run-to-run noise differs

It needs the `notebook` extra (nbclient, nbformat, ipykernel, matplotlib, pandas, pyarrow) and
runs the notebook in a fresh `python3` kernel, in a temporary directory, at the shop size the
notebook defaults to (BACKFILL_SHOP_ORDERS is not passed on), with TMPDIR pointing into that
directory, so the shop it builds is removed afterwards (outputs show the path as it would be in
the system's temporary directory).

What is stored: the outputs as the run produced them (tables, the plan's and the audit's HTML,
the plot), with the bookkeeping made independent of who ran it and when: execution counts 1, 2,
... in cell order; cell ids ``cell-<index>``; no timing metadata; the notebook's own metadata as
committed (not the Python version of the machine that ran it); a cell's stream outputs merged.

What varies from run to run is masked when outputs are compared (:func:`comparable`): backfill
and publication ids (numbered in order of appearance, so "the audit is of the backfill that ran"
is still compared), wall-clock date-times, durations (``227 ms``, ``0.06 s``, ``1 m 35 s``), the
bar geometry of the plan's schedule chart (it scales with measured durations), the line about
how many cores the machine has, temporary paths, the OS user, memory addresses (``0x7f...``);
images are compared by presence and pixel size (within 10%), not bytes, since PNG bytes change
with matplotlib's and FreeType's versions. The file is rewritten only when the masked outputs
differ (or with --force), so re-running on an unchanged tree leaves it byte for byte as it was.
tests/python/cli/test_demo.py runs the notebook and fails with this comparison's diff when the
committed outputs are stale.
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import os
import re
import struct
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
# notebooks/shop_backfill.ipynb is a symlink to it; this is the file the wheel ships.
NOTEBOOK = ROOT / "python" / "backfill" / "examples" / "shop_backfill.ipynb"
TIMEOUT = 600  # seconds per cell: the whole notebook takes about 10 s on the 2-core machine
IMAGE_TOLERANCE = 0.10  # relative difference of width and height allowed between two runs

# Masks, applied in this order to every text output before comparing.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Whoever published: "(bf_...) by alice".
    (re.compile(r"(\(bf_\w+\)) by [^\s<]+"), r"\1 by <user>"),
    # A temporary directory, wherever TMPDIR points: /tmp/..., /var/folders/.../T/...
    (re.compile(r"[^\s'\"()<>]*?/shop-notebook-[\w-]+"), "<tmp>/shop-notebook"),
    # Wall-clock date-times: when something was published or recorded.
    (
        re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"),
        "<date-time>",
    ),
    # Durations as backfill formats them: 818 µs, 227 ms, 0.06 s, 8.64 s, 1 m 35 s, 6 h 4 m,
    # 2 d 3 h.
    (
        re.compile(r"\b\d+(?:\.\d+)? (?:µs|ms|s|m|h|d)\b(?: \d+(?:\.\d+)? (?:µs|ms|s|m|h|d)\b)*"),
        "<duration>",
    ),
    # The estimate says how many cores an embedded engine shares (only when it has fewer than
    # the concurrency asked for): a fact about the machine, not the notebook.
    (re.compile(r"\(the embedded engine shares this machine's \d+ cores: [^)]*\)\n?"), ""),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x<address>"),
)
# The plan's schedule chart: bar positions and widths follow the measured durations.
_SCHEDULE_SVG = re.compile(r"(<div class='backfill-plan'>.*?<svg)(.*?)(</svg>)", re.DOTALL)
_BAR_GEOMETRY = re.compile(r"\b(x|width)='[\d.]+'")
_IDS = (re.compile(r"\bbf_\d{8}_\d{6}_[0-9a-f]+\b"), re.compile(r"\bpub_[0-9a-f]{6,}\b"))
_IMAGE_LINE = re.compile(r"^    (image/\w+) (\d+)x(\d+)$")


def read(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` (nbformat 4)."""
    nb: nbformat.NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    return nb


def execute(path: Path = NOTEBOOK, *, timeout: int = TIMEOUT) -> nbformat.NotebookNode:
    """The notebook at ``path`` run top to bottom in a fresh kernel, tidied (see the module's
    docstring); the file is not touched. A failing cell raises nbclient's CellExecutionError."""
    nb = read(path)
    metadata = copy.deepcopy(nb.metadata)
    with tempfile.TemporaryDirectory(prefix="run-notebook-") as work:
        tmp = Path(work) / "tmp"
        tmp.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "BACKFILL_SHOP_ORDERS"}
        env["TMPDIR"] = str(tmp)
        client = nbclient.NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            record_timing=False,
            coalesce_streams=True,
            resources={"metadata": {"path": work}},
        )
        client.execute(env=env)
        # Paths as the reader would see them run: in the system's temporary directory.
        _replace_in_outputs(nb, str(tmp), tempfile.gettempdir())
    nb.metadata = metadata  # nbclient adds the kernel's language_info (its Python version)
    for index, cell in enumerate(nb.cells):
        cell.id = f"cell-{index}"
        cell.metadata.pop("execution", None)
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count
            for output in cell.outputs:
                if "execution_count" in output:
                    output.execution_count = count
    return nb


def _replace_in_outputs(nb: nbformat.NotebookNode, old: str, new: str) -> None:
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output.text = _text(output.text).replace(old, new)
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/"):
                    output.data[mime] = _text(value).replace(old, new)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _png_size(data: str) -> tuple[int, int]:
    """Width and height from a base64 PNG's IHDR chunk."""
    head = base64.b64decode("".join(data.split())[:64])
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def _mask(text: str) -> str:
    text = _SCHEDULE_SVG.sub(
        lambda m: m.group(1) + _BAR_GEOMETRY.sub(r"\1='<n>'", m.group(2)) + m.group(3), text
    )
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


def comparable(nb: nbformat.NotebookNode) -> list[str]:
    """The notebook's cells and outputs as lines, with what varies between runs masked."""
    lines: list[str] = []
    for index, cell in enumerate(nb.cells):
        lines.append(
            f"## cell {index} ({cell.cell_type}"
            + (f", [{cell.get('execution_count')}])" if cell.cell_type == "code" else ")")
        )
        lines.extend(_text(cell.source).splitlines())
        outputs = list(cell.get("outputs", []))
        merged: list[dict[str, Any]] = []
        for output in outputs:  # streams split by flush timing compare as one
            if (
                output.get("output_type") == "stream"
                and merged
                and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == output.get("name")
            ):
                merged[-1] = {
                    **merged[-1],
                    "text": _text(merged[-1]["text"]) + _text(output["text"]),
                }
            else:
                merged.append(dict(output))
        for output in merged:
            kind = output.get("output_type")
            if kind == "stream":
                lines.append(f"  -> stream {output.get('name')}")
                lines.extend("    " + line for line in _mask(_text(output["text"])).splitlines())
            elif kind == "error":
                lines.append(f"  -> error {output.get('ename')}: {output.get('evalue')}")
            else:
                lines.append(f"  -> {kind}")
                for mime, value in sorted(output.get("data", {}).items()):
                    if mime == "image/png":
                        width, height = _png_size(_text(value))
                        lines.append(f"    {mime} {width}x{height}")
                    elif mime.startswith("image/") and not mime.endswith("svg+xml"):
                        lines.append(f"    {mime}")
                    else:
                        lines.append(f"    {mime}:")
                        # One element per line, so that a diff shows what changed in the HTML.
                        text = re.sub(r">(?=<)", ">\n", _mask(_text(value)))
                        lines.extend("      " + line for line in text.splitlines())
    return _number_ids(lines)


def _number_ids(lines: list[str]) -> list[str]:
    """Backfill and publication ids replaced by their number in order of appearance: the ids
    differ on every run, which of them is which does not."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}

    def number(m: re.Match[str]) -> str:
        token = m.group(0)
        if token not in names:
            prefix = token.split("_", 1)[0]
            counts[prefix] = counts.get(prefix, 0) + 1
            names[token] = f"{prefix}_<{counts[prefix]}>"
        return names[token]

    out = []
    for line in lines:
        for pattern in _IDS:
            line = pattern.sub(number, line)
        out.append(line)
    return out


def differences(committed: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> list[str]:
    """A unified diff of the two notebooks' :func:`comparable` lines; empty when they agree.
    Images of about the same size (:data:`IMAGE_TOLERANCE`) count as the same."""
    old, new = comparable(committed), comparable(fresh)
    old_images = [i for i, line in enumerate(old) if _IMAGE_LINE.match(line)]
    new_images = [i for i, line in enumerate(new) if _IMAGE_LINE.match(line)]
    # The counts may differ (an image added or dropped): the unified diff below reports that, so
    # only the images both notebooks hold are paired here.
    for i, j in zip(old_images, new_images, strict=False):
        a, b = _IMAGE_LINE.match(old[i]), _IMAGE_LINE.match(new[j])
        assert a is not None and b is not None
        if a.group(1) == b.group(1) and all(
            abs(int(b.group(k)) - int(a.group(k))) <= IMAGE_TOLERANCE * int(a.group(k))
            for k in (2, 3)
        ):
            new[j] = old[i]
    return list(difflib.unified_diff(old, new, "committed", "fresh run", lineterm="", n=2))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/run_notebook.py",
        description="Re-execute the shop notebook in place, so it is committed with its outputs.",
    )
    parser.add_argument(
        "notebook",
        nargs="?",
        type=Path,
        default=NOTEBOOK,
        help=f"the notebook (default {NOTEBOOK.relative_to(ROOT)})",
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--check",
        action="store_true",
        help="only say whether the committed outputs are stale (exit 1 if so)",
    )
    how.add_argument(
        "--force",
        action="store_true",
        help="rewrite even when only what varies between runs differs",
    )
    args = parser.parse_args(argv)
    path = args.notebook.resolve()  # notebooks/shop_backfill.ipynb: write the file, not the link
    committed = read(path)
    fresh = execute(path)
    diff = differences(committed, fresh)
    if args.check:
        if diff:
            print("\n".join(diff))
            print(f"{path}: the committed outputs are stale; run `make notebook`")
            return 1
        print(f"{path}: the committed outputs are current")
        return 0
    if not diff and not args.force:
        print(f"{path}: outputs unchanged (up to what varies between runs); left as it is")
        return 0
    nbformat.write(fresh, path)  # type: ignore[no-untyped-call]
    print(f"{path}: rewritten with its outputs" + ("" if diff else " (--force)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
