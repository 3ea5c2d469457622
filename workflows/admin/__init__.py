"""The operator console, a package as ``django.contrib.admin`` is: one module per page
family. Django's admin autodiscovery imports this package; importing it registers every
page (each module registers its own ModelAdmins)."""

from workflows.admin import budgets, flows, registered, schedules, webhooks, workers

__all__ = ["budgets", "flows", "registered", "schedules", "webhooks", "workers"]
