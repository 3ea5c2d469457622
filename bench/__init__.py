"""Benchmarks for Flowsite; run the scripts here from the repository root."""
