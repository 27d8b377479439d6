"""The smoke test of an installed backfill (a wheel in a clean chroot, an sdist in a fresh venv).

Run with the installed interpreter, from outside the source tree:
    python smoke.py [--tz os|tzdata] [--demo-dir DIR]
Plain asserts, no pytest: the clean machine has nothing but backfill and its dependencies.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

# The packages the extras bring: importing the core must import none of them.
EXTRA_MODULES = (
    "pyarrow",
    "pandas",
    "polars",
    "psycopg",
    "psycopg_pool",
    "adbc_driver_postgresql",
    "pyspark",
    "py4j",
    "dbt",
    "airflow",
    "confluent_kafka",
    "fastavro",
    "openlineage",
    "nbclient",
    "nbformat",
    "ipykernel",
    "matplotlib",
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--tz",
        choices=("os", "tzdata"),
        required=True,
        help="which tz database backfill must have picked",
    )
    parser.add_argument("--demo-dir", help="also run `backfill demo --dir DIR`")
    args = parser.parse_args()

    import backfill

    here = Path(backfill.__file__).resolve()
    assert "site-packages" in here.parts, f"not the installed backfill: {here}"
    loaded = sorted(m for m in EXTRA_MODULES if m in sys.modules)
    assert not loaded, f"importing backfill imported extras' modules: {loaded}"

    version = importlib.metadata.version("backfill")
    assert backfill.__version__ == version, (backfill.__version__, version)
    bin_dir = Path(sys.executable).parent
    out = subprocess.run(
        [bin_dir / "backfill", "--version"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == f"backfill {version}", out

    # The tz database: the OS's when it has one, else the tzdata package's.
    tzdb = backfill.tz_database()
    if args.tz == "os":
        assert tzdb.startswith("/usr/share/zoneinfo"), tzdb
    else:
        assert "site-packages" in tzdb and tzdb.endswith(os.path.join("tzdata", "zoneinfo")), tzdb
    # Berlin's fall-back day has 25 hours, its spring-forward day 23; in 2100 too (the footer rule).
    for day, after, hours in (
        ("2026-10-25", "2026-10-26", 25),
        ("2026-03-29", "2026-03-30", 23),
        ("2100-10-31", "2100-11-01", 25),
    ):
        (p,) = backfill.partitions("day", day, after, tz="Europe/Berlin")
        assert (p.end - p.start).total_seconds() == hours * 3600, (day, p)
    hours = backfill.partitions("hour", "2026-10-25T00:00", "2026-10-25T05:00", tz="Europe/Berlin")
    assert [p.label for p in hours][2:4] == ["2026-10-25T02+02:00", "2026-10-25T02+01:00"], hours
    kolkata = backfill.partition_of("2026-06-01T12:00:00+00:00", "day", tz="Asia/Kolkata")
    assert kolkata.label == "2026-06-01", kolkata
    try:
        backfill.partition_of("2026-06-01", "day", tz="Mars/Olympus")
    except backfill.InvalidInputError as exc:
        assert "Mars/Olympus" in str(exc), exc
    else:
        raise AssertionError("an unknown zone was accepted")

    # The C++ core: lint, fingerprints of a DuckDB table, the packaged examples.
    lint = backfill.lint_sql("select * from {{ ref('x') }} where day = current_date")
    assert lint.all, "the lint found nothing in a query on current_date"
    from backfill.examples import notebook_path, shop

    assert notebook_path().is_file(), notebook_path()
    missing = _missing_extra_message()
    assert "backfill[postgres]" in missing, missing

    if args.demo_dir:
        demo = subprocess.run(
            [bin_dir / "backfill", "demo", "--dir", args.demo_dir], capture_output=True, text=True
        )
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
        assert "fct_daily_sales" in demo.stdout and "published" in demo.stdout.lower(), demo.stdout
        assert (Path(args.demo_dir) / "backfill.yml").is_file()
    del shop
    print(f"SMOKE OK backfill {version} from {here.parent} (tz database {tzdb})")
    return 0


def _missing_extra_message() -> str:
    """The error of a postgres engine without the postgres extra (psycopg is not installed here)."""
    from backfill.engines import open_engine
    from backfill.model.files import EngineSettings

    try:
        import psycopg  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - only where the extra happens to be installed
        return "backfill[postgres] (installed)"
    try:
        open_engine(EngineSettings(type="postgres", options={"url": "postgresql://x@127.0.0.1/x"}))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


if __name__ == "__main__":
    sys.exit(main())
