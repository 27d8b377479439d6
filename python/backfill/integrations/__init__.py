"""Integrations with orchestrators and tools: ``backfill.integrations.airflow`` (Airflow 3,
extra ``backfill[airflow]``)."""
