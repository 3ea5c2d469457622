"""The Prometheus endpoint; a project mounts it with
``path("metrics/", include("workflows.metrics.urls"))``.

Kept apart from ``workflows.api.urls`` because prometheus-client is an optional extra:
a project without it mounts the API alone.
"""

from __future__ import annotations

from django.urls import path

from workflows.metrics.prometheus import metrics_view

app_name = "workflows_metrics"

urlpatterns = [path("", metrics_view, name="metrics")]
