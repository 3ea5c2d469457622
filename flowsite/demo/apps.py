"""The demo app: example workflows, their handlers and the records they write."""

from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "flowsite.demo"
    label = "demo"
    verbose_name = "Demo workflows"
    default_auto_field = "django.db.models.BigAutoField"
