"""Packaging that needs no build: one version, a core that imports no extra's package, and a
missing extra named in the error (the wheel itself is tested in test_wheel.py)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import backfill
from backfill.cli import main

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = ROOT / "pyproject.toml"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_one_version_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    version = importlib.metadata.version("backfill")
    assert backfill.__version__ == version
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"backfill {version}"
    # CHANGELOG.md starts at the current version; no other file writes the number down.
    assert f"## {version}" in (ROOT / "CHANGELOG.md").read_text()
    assert 'dynamic = ["version"]' in PYPROJECT.read_text()
    assert version not in (ROOT / "CMakeLists.txt").read_text()


def test_importing_the_core_imports_no_extra() -> None:
    # Every package an extra brings (pyproject's optional-dependencies, by import name). They are
    # all installed here, so an import at module level anywhere in the core would show up.
    from backfill._extras import EXTRA_OF_MODULE

    watched = sorted({*EXTRA_OF_MODULE, "pyarrow", "pandas", "polars"})
    result = _python(f"""
        import sys
        import backfill, backfill.cli, backfill.examples.shop, backfill.integrations.airflow
        import backfill.integrations.dbt
        print(sorted(m for m in {watched!r} if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    # Each extra's package made unimportable (as on a machine without the extra): the feature's
    # error names the extra to install.
    result = _python(f"""
        import shutil, sys
        from pathlib import Path
        tmp = {str(tmp_path)!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {{"psycopg", "pyspark", "confluent_kafka", "airflow",
                                          "dbt"}}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None
        sys.meta_path.insert(0, Block())
        import backfill
        from backfill.engines import open_engine
        from backfill.model.files import EngineSettings
        from backfill.errors import MissingExtraError
        from backfill.integrations.kafka.client import _kafka
        from backfill.integrations.airflow import backfill_dag
        attempts = {{
            "postgres": lambda: open_engine(EngineSettings(type="postgres",
                                                           options={{"url": "postgresql://x@h/d"}})),
            "spark": lambda: open_engine(EngineSettings(type="spark")),
            "kafka": _kafka,
            "airflow": lambda: backfill_dag("d", ".", "*", "2026-01-01", "2026-01-02",
                                            concurrency=1, reason="r"),
            "dbt": lambda: backfill.Project.from_dbt(shutil.copytree(
                Path(backfill.__file__).parent / "examples" / "dbt_shop", Path(tmp) / "dbt")),
        }}
        for extra, attempt in attempts.items():
            try:
                attempt()
            except MissingExtraError as exc:
                print(extra, "|", exc)
            else:
                print(extra, "| no error")
    """)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" | ", 1) for line in result.stdout.splitlines())
    assert set(lines) == {"postgres", "spark", "kafka", "airflow", "dbt"}
    for extra, message in lines.items():
        assert f"pip install 'backfill[{extra}]'" in message, (extra, message)


def test_packaged_examples_and_notebook() -> None:
    from backfill.examples import notebook_path

    assert notebook_path().is_file()
    assert (ROOT / "notebooks" / "shop_backfill.ipynb").resolve() == notebook_path()
    package = Path(backfill.__file__).parent
    assert (package / "examples" / "shop" / "backfill.yml").is_file()
    assert list((package / "examples" / "shop" / "models").glob("*.sql"))


def test_tz_database_of_the_tzdata_package_agrees_with_the_os_one() -> None:
    # The tzdata package's zone files (what a machine without /usr/share/zoneinfo uses) are
    # "slim": few explicit transitions, the rest from the footer rule. Read through $TZDIR in a
    # fresh process, they must cut the same partitions as the OS's files (up to rule changes
    # between the two releases: these zones have had none since 2024).
    import tzdata  # a dependency of backfill

    folder = Path(tzdata.__file__).parent / "zoneinfo"
    env_run = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import backfill, test_packaging as t; "
            "print(json.dumps([backfill.tz_database(), t.uneven_days()]))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "TZDIR": str(folder)},
    )
    assert env_run.returncode == 0, env_run.stderr
    env_dir, env_days = json.loads(env_run.stdout)
    assert env_dir == str(folder) and backfill.tz_database() != str(folder)
    os_days = uneven_days()
    assert len(os_days) == 4 * 2 * 8  # two DST days a year in each zone
    assert os_days == env_days


def uneven_days() -> list[list[str]]:
    """Every day of 2026-2033 that is not 24 hours long, in zones with odd rules."""
    return [
        [tz, p.label, p.start.isoformat(), p.end.isoformat()]
        for tz in ("Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham")
        for p in backfill.partitions("day", "2026-01-01", "2034-01-01", tz=tz)
        if (p.end - p.start).total_seconds() != 86400
    ]


def test_a_zone_name_cannot_leave_the_tz_database() -> None:
    # Zone names become paths under the tz directory: anything but a plain relative name is
    # unknown, however the file system would resolve it.
    for name in (
        "../zoneinfo/UTC",
        "/usr/share/zoneinfo/UTC",
        "Europe/../UTC",
        "Europe//Berlin",
        "Europe/Berlin/",
        ".",
        "",
        "zone.tab/x",
    ):
        with pytest.raises(backfill.InvalidInputError):
            backfill.partition_of("2026-01-01", "day", tz=name)
    assert backfill.partition_of("2026-01-01", "day", tz="Etc/GMT+5").start.hour == 5
