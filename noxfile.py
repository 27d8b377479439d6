"""The wheels of every supported Python, each proven in a fresh venv of its own Python (issue 27).

    tools/build_wheels.sh          the repaired manylinux wheels, dist/backfill-*-cpXY-*.whl
    nox                            every session below: wheel-3.10 ... wheel-3.13 (`make wheels`)
    nox -s wheel-3.12              one Python
    nox -s extras                  which extras install on which Python (pip's resolver, no install)

Session `wheel-X.Y` (a new venv each run, in build/nox/): installs dist/'s cpXY wheel with the
`dev` extra (pytest, hypothesis, pyarrow, polars, pandas, datacompy, networkx...) and matplotlib,
binary wheels only (so nothing compiles), then from a temporary directory
  * runs the installed console script `backfill demo` and checks that it tells the story (nine
    steps, 89 days to rebuild, the audit's revenue -1..-3 % in three models, gates, publish,
    the consumers' message);
  * runs CORE_TESTS from a copy of tests/ (with benchmarks/, examples/ and pyproject.toml's
    pytest settings beside it, outside the source tree), whose root conftest asserts that
    `backfill` is the installed wheel, never /work/main/python;
on PYTEST_WORKERS (2) xdist workers, and writes its figures to build/wheel-tests.tsv (tag, wheel,
passed, failed, errors, skipped, demo seconds, test seconds).

The interpreters are pythonX.Y on PATH, else pyenv's (added to PATH here), as in build_wheels.sh.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
FIGURES = ROOT / "build" / "wheel-tests.tsv"

# The core: the C++ calendar, planner, selection, graph, lint, Arrow bridge, diff and
# fingerprints, and the DuckDB runner and audit around them. No Spark, Kafka, PostgreSQL, dbt,
# Airflow, notebook, benchmark-timing or source-tree (layers, typing, packaging) tests.
CORE_TESTS = [
    "core/test_calendar.py",
    "plan/test_plan.py",
    "cli/test_plan_cli.py",
    "core/test_select.py",
    "core/test_graph.py",
    "core/test_lint.py",
    "core/test_checks.py",
    "core/test_arrow.py",
    "core/test_fingerprint.py",
    "audit/test_diff.py",
    "audit/test_diff_columns.py",
    "audit/test_diff_merge.py",
    "core/test_fuzz_regressions.py",
    "model/test_model_check.py",
    "model/test_project_files.py",
    "run/test_run_windows.py",
    "run/test_executor.py",
    "run/test_runner_properties.py",
    "run/test_run.py",
    "audit/test_audit.py",
    "cli/test_cli.py",
]
# What the core tests import beyond the `dev` extra: test_diff.py's plot test.
TEST_EXTRAS = ["matplotlib>=3.8"]

nox.options.envdir = str(ROOT / "build" / "nox")
nox.options.sessions = [f"wheel-{v}" for v in PYTHONS]
nox.options.error_on_missing_interpreters = True


def _runs(python: str) -> bool:
    """Whether `python` starts (a pyenv shim of a version that is not selected is on PATH but
    fails)."""
    return (
        shutil.which(python) is not None
        and subprocess.run([python, "-c", ""], capture_output=True, check=False).returncode == 0
    )


def _add_pyenv_pythons() -> None:
    """Puts pyenv's newest X.Y of each of PYTHONS on PATH when pythonX.Y does not run already."""
    if all(_runs(f"python{v}") for v in PYTHONS) or not shutil.which("pyenv"):
        return
    root = Path(
        subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    )
    installed = [p.name for p in (root / "versions").glob("3.*")]
    extra = []
    for v in PYTHONS:
        mine = [n for n in installed if re.fullmatch(rf"{re.escape(v)}\.\d+", n)]
        if mine:
            newest = max(mine, key=lambda n: int(n.rsplit(".", 1)[1]))
            extra.append(str(root / "versions" / newest / "bin"))
    os.environ["PATH"] = os.pathsep.join([*extra, os.environ.get("PATH", "")])


_add_pyenv_pythons()


def _wheel_for(session: nox.Session) -> Path:
    tag = "cp" + str(session.python).replace(".", "")
    found = sorted(DIST.glob(f"backfill-*-{tag}-{tag}-manylinux*.whl"))
    if len(found) != 1:
        session.error(
            f"want one {tag} manylinux wheel in dist/, found {found}: "
            f"run tools/build_wheels.sh {session.python}"
        )
    return found[0]


# The root conftest of the copied tests: the session fails before any test runs if `backfill`
# would come from anywhere but the venv's site-packages.
_CHECK_CONFTEST = """\
import sys
from pathlib import Path

import backfill

_HERE = Path(backfill.__file__).resolve()


def pytest_configure(config):
    venv = Path(sys.prefix).resolve()
    assert venv in _HERE.parents and "site-packages" in _HERE.parts, (
        f"backfill imported from {_HERE}, not the wheel installed in {venv}")


def pytest_report_header(config):
    return f"backfill {backfill.__version__} from {_HERE.parent} (the installed wheel)"
"""


def _check_demo(session: nox.Session, out: str) -> None:
    """What `backfill demo` must tell: the steps, the plan, the audit's findings, the publish."""
    problems = []
    steps = re.findall(r"^== (\d)\. ", out, flags=re.MULTILINE)
    if steps != [str(i) for i in range(1, 10)]:
        problems.append(f"steps {steps}, want 1..9")
    for phrase in (
        "89 days to rebuild",
        "audit of bf_",
        "gates passed",
        "published bf_",
        "changelog",
        "Reason: discount bug fixed",
        ("[shop] fct_daily_sales, fct_monthly_sales, fct_sales_7d: published history changed"),
    ):
        if phrase not in out:
            problems.append(f"no {phrase!r}")
    changed = dict(
        re.findall(
            r"^  (fct_\w+): \d+ of \d+ partition\(s\) differ.*\n.*\n"
            r"    \w+: [\d,.]+ -> [\d,.]+ \(([-+\d.]+)%\)",
            out,
            flags=re.MULTILINE,
        )
    )
    if set(changed) != {"fct_daily_sales", "fct_monthly_sales", "fct_sales_7d"} or not all(
        -3.0 < float(p) < -1.0 for p in changed.values()
    ):
        problems.append(f"audit changes {changed}, want revenue -1..-3 % in three models")
    if problems:
        session.error(
            "backfill demo did not tell the story: " + "; ".join(problems) + "\n" + out[-3000:]
        )


def _record(row: list[str]) -> None:
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        r
        for r in (FIGURES.read_text().splitlines() if FIGURES.exists() else [])
        if r and not r.startswith(row[0] + "\t")
    ]
    FIGURES.write_text("\n".join(sorted([*rows, "\t".join(row)])) + "\n")


@nox.session(name="wheel", python=PYTHONS, venv_backend="venv")
def wheel(session: nox.Session) -> None:
    """The cpXY wheel in a fresh venv: import, `backfill demo`, the core tests."""
    wheel = _wheel_for(session)
    tag = "cp" + str(session.python).replace(".", "")
    # --only-binary: the wheel and everything it and the tests need install without a compiler.
    session.install("--only-binary=:all:", f"{wheel}[dev]", *TEST_EXTRAS)
    work = Path(tempfile.mkdtemp(prefix=f"backfill-{tag}-"))
    try:
        with session.chdir(work):
            where = session.run(
                "python",
                "-c",
                "import backfill, sys; print(backfill.__file__, "
                "backfill.__version__, sys.version.split()[0])",
                silent=True,
            )
            session.log(f"backfill (python {session.python}): {str(where).strip()}")
            if "site-packages" not in str(where) or str(ROOT / "python") in str(where):
                session.error(f"not the installed wheel: {where}")

            started = time.monotonic()
            out = session.run("backfill", "demo", "--dir", str(work / "demo"), silent=True)
            demo_s = time.monotonic() - started
            _check_demo(session, str(out))
            session.log(f"backfill demo told the story in {demo_s:.0f} s")

            # The tests as the source tree lays them out (tests/python, tests/sql, benchmarks/,
            # examples/), pytest's settings from pyproject.toml, and no python/.
            shutil.copytree(
                ROOT / "tests" / "python",
                work / "tests" / "python",
                ignore=shutil.ignore_patterns("__pycache__"),
            )
            shutil.copytree(ROOT / "tests" / "sql", work / "tests" / "sql")
            for data in ("benchmarks", "examples"):  # plan_reference.py; the shop's project.py
                shutil.copytree(
                    ROOT / data, work / data, ignore=shutil.ignore_patterns("__pycache__")
                )
            shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
            (work / "conftest.py").write_text(_CHECK_CONFTEST)
            junit = work / "junit.xml"
            started = time.monotonic()
            session.run(
                "python",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-n",
                os.environ.get("PYTEST_WORKERS", "2"),
                "--dist",
                "loadgroup",
                f"--junitxml={junit}",
                *session.posargs,
                *[f"tests/python/{t}" for t in CORE_TESTS],
                env={"PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"},
                success_codes=[0, 1],
            )
            tests_s = time.monotonic() - started
        suites = ET.parse(junit).getroot()
        counts = {
            k: sum(int(s.get(k, 0)) for s in suites.iter("testsuite"))
            for k in ("tests", "failures", "errors", "skipped")
        }
        passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        _record(
            [
                tag,
                wheel.name,
                str(passed),
                str(counts["failures"]),
                str(counts["errors"]),
                str(counts["skipped"]),
                f"{demo_s:.0f}",
                f"{tests_s:.0f}",
            ]
        )
        session.log(
            f"{tag}: {passed} passed, {counts['failures']} failed, "
            f"{counts['errors']} errors, {counts['skipped']} skipped "
            f"(tests {tests_s:.0f} s, demo {demo_s:.0f} s); figures in {FIGURES}"
        )
        if counts["failures"] or counts["errors"]:
            session.error(f"{tag}: core tests failed")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- Which extras install on which Python ------------------------------------------------------
# The package that decides an extra's Python range (the one that lags behind), per extra.
_EXTRA_KEYS = {
    "dev": ["pyarrow", "polars", "pandas", "datacompy", "mypy"],
    "notebook": ["ipykernel", "matplotlib", "pandas", "pyarrow"],
    "dbt": ["dbt-core", "dbt-duckdb"],
    "dbt-postgres": ["dbt-core", "dbt-postgres", "psycopg2-binary"],
    "airflow": ["apache-airflow", "apache-airflow-core"],
    "postgres": ["psycopg", "psycopg-binary", "adbc-driver-postgresql", "pyarrow"],
    "spark": ["pyspark", "pyarrow"],
    "lineage": ["openlineage-python"],
    "kafka": ["confluent-kafka", "fastavro", "pyarrow"],
    "fuzz": ["atheris"],
}
EXTRAS_FIGURES = ROOT / "build" / "extras-by-python.tsv"


def _resolve(
    session: nox.Session, requirement: str, binary_only: bool
) -> tuple[str, dict[str, str], list[str]]:
    """pip's resolver on this session's Python, nothing installed: ('', {name: version}, the
    names it would build from an sdist) when the requirement resolves, else (pip's last lines,
    {}, [])."""
    import json

    report = Path(tempfile.mkdtemp()) / "report.json"
    args = [
        "python",
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(report),
    ]
    if binary_only:
        args.append("--only-binary=:all:")
    out = session.run(*args, requirement, silent=True, success_codes=[0, 1], log=False)
    if not report.exists():
        lines = [ln for ln in str(out).splitlines() if ln.strip()]
        return " / ".join(lines[-3:])[-400:], {}, []
    picked = json.loads(report.read_text())["install"]
    shutil.rmtree(report.parent, ignore_errors=True)
    sdists = [
        p["metadata"]["name"] for p in picked if not p["download_info"]["url"].endswith(".whl")
    ]
    return "", {p["metadata"]["name"].lower(): p["metadata"]["version"] for p in picked}, sdists


@nox.session(name="extras", python=PYTHONS, venv_backend="venv")
def extras(session: nox.Session) -> None:
    """Resolves `backfill[EXTRA]` (this Python's wheel in dist/) for every extra of pyproject.toml
    with binary wheels only, then, where that fails, allowing sdists; records what was picked."""
    import tomllib

    wheel = _wheel_for(session)
    tag = "cp" + str(session.python).replace(".", "")
    session.install("pip>=24.1")
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = []
    for extra in optional:
        requirement = f"backfill[{extra}] @ {wheel.as_uri()}"
        error, picked, sdists = _resolve(session, requirement, binary_only=True)
        how = "wheels"
        if error:
            error2, picked, sdists = _resolve(session, requirement, binary_only=False)
            how = f"builds {', '.join(sdists)} from sdist" if not error2 else "NO"
            error = error2
        keys = ", ".join(f"{k} {picked[k]}" for k in _EXTRA_KEYS.get(extra, []) if k in picked)
        rows.append(f"{tag}\t{extra}\t{how}\t{keys}\t{error}")
        session.log(f"{tag} [{extra}]: {how} {keys} {error}")
    EXTRAS_FIGURES.parent.mkdir(parents=True, exist_ok=True)
    kept = [
        r
        for r in (EXTRAS_FIGURES.read_text().splitlines() if EXTRAS_FIGURES.exists() else [])
        if r and not r.startswith(tag + "\t")
    ]
    EXTRAS_FIGURES.write_text("\n".join(sorted([*kept, *rows])) + "\n")
