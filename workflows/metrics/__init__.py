"""Prometheus metrics of all runs: the collector (:mod:`~workflows.metrics.prometheus`)
and the URL a project mounts (:mod:`~workflows.metrics.urls`)."""
