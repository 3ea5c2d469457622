"""Workflows used by ``bench/workers.py``, installed only by ``bench.settings``."""
