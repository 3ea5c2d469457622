"""A small app installed only by the test settings: workflows and side tables for the
acceptance tests, importable both by pytest and by the worker processes it starts."""
