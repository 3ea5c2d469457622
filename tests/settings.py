"""Test settings: the demo project's, with steps run in-process by default.

Tests that need real workers start ``qcluster`` subprocesses with the django-q2
executor (``FLOWSITE_EXECUTOR=django_q``).
"""

from __future__ import annotations

from flowsite.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.acceptance.flowapp"]  # noqa: F405
WORKFLOWS = {**WORKFLOWS, "EXECUTOR": "inline"}  # noqa: F405

# Test users need no costly password hashing (the API tests create one per role).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The demo's import goes at a pace a person can watch; tests need not watch it.
DEMO_IMPORT_SECONDS_PER_ROW = 0

# The demo's stock check fires every two minutes: declared here, it would fire in every
# test that moves the clock on (tests/project/test_demo.py installs it on its own).
DEMO_SCHEDULES = False
