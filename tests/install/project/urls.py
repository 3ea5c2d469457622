"""URLs of the shop: the admin and Flowsite's API."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("workflows.api.urls")),
]
