"""Example projects shipped with the package (so ``backfill demo`` works from a wheel)."""
