"""The version of backfill: the one place it is written (pyproject.toml and CMakeLists.txt read it
from here; ``backfill --version`` and ``backfill.__version__`` show it)."""

__version__ = "0.1.0"
