"""URLs of the demo project: the admin at the root of the site, the API under ``/api/``,
Prometheus metrics at ``/metrics/``."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/", include("workflows.api.urls")),
    path("metrics/", include("workflows.metrics.urls")),
]
