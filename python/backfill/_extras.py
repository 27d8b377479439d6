"""Optional features and the extras that install them (``pip install 'backfill[postgres]'``).

The core (``import backfill``, the DuckDB engine, the CLI, ``backfill demo``) needs none of them:
every import of an extra's package is inside the feature that uses it, and
tests/python/package/test_packaging.py checks that importing the core imports none. When one is
missing,
:func:`extra_required` turns the ImportError into a :class:`MissingExtraError` naming the extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .errors import MissingExtraError

__all__ = ["EXTRA_OF_MODULE", "extra_required"]

# Top-level module -> the extra that installs it (pyproject.toml [project.optional-dependencies]).
EXTRA_OF_MODULE: dict[str, str] = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "adbc_driver_postgresql": "postgres",
    "adbc_driver_manager": "postgres",
    "pyspark": "spark",
    "py4j": "spark",
    "dbt": "dbt",
    "airflow": "airflow",
    "confluent_kafka": "kafka",
    "fastavro": "kafka",
    "openlineage": "lineage",
    "nbclient": "notebook",
    "nbformat": "notebook",
    "ipykernel": "notebook",
    "matplotlib": "notebook",
}


@contextmanager
def extra_required(feature: str, extra: str | None = None) -> Iterator[None]:
    """Runs the block; a missing module of an extra raises MissingExtraError naming that extra.

    ``extra`` is the one to name when the missing module is not in :data:`EXTRA_OF_MODULE`
    (pyarrow, say, which several extras bring).
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        name = EXTRA_OF_MODULE.get(top, extra)
        if name is None:
            raise
        raise MissingExtraError(
            f"{feature} needs the '{name}' extra ({top or 'a module'} is not installed): "
            f"pip install 'backfill[{name}]'"
        ) from exc
