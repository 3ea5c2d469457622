"""App configuration of the benchmark workflows (found by Flowsite's autodiscovery)."""

from __future__ import annotations

from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "bench.benchapp"
    label = "benchapp"
    verbose_name = "Benchmark workflows"
    default_auto_field = "django.db.models.BigAutoField"
