"""Settings for the Flowsite demo project.

Everything a fresh checkout needs is here with safe local defaults; production values
come from the environment (``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``, ``DATABASE_URL``).
"""

from __future__ import annotations

import os
from pathlib import Path

from flowsite.database import database_from_url, sqlite_database

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FLOWSITE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "flowsite-demo-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_q",
    "workflows",
    "flowsite.demo",
]

MIDDLEWARE = [
    # First: answers requests under /api/ that Django refuses to read (too many query
    # parameters, a disallowed Host) in the API's error envelope, before anything reads them.
    "workflows.api.middleware.SuspiciousRequestMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "flowsite.urls"
WSGI_APPLICATION = "flowsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else sqlite_database(VAR_DIR / "flowsite.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# Steps run in django-q2 workers (`manage.py qcluster`); timers fire from the sweeper
# (`manage.py workflows_sweeper`). `make run` starts both beside the site.
WORKFLOWS = {
    "EXECUTOR": os.environ.get("FLOWSITE_EXECUTOR", "django_q"),
}

# The ORM broker on the workflows database: a transition and its queue message commit
# together. FLOWSITE_REDIS_URL switches to Redis for scale-out (messages sent on commit).
Q_CLUSTER = {
    "name": "flowsite",
    "workers": int(os.environ.get("FLOWSITE_WORKERS", "2")),
    "timeout": 600,  # >= CHAIN_BUDGET (60 s) + the longest step timeout (5 min default)
    "retry": 660,  # > timeout: never redeliver a task whose worker is still running it
    "max_attempts": 1,  # the engine counts attempts, not the queue
    "ack_failures": True,
    "catch_up": False,
    # Successful "run step N" results say nothing the engine's history does not; keeping
    # none spares django-q2 trimming them (a SELECT ... FOR UPDATE per result).
    "save_limit": -1,
    "poll": 0.1,
}
if os.environ.get("FLOWSITE_REDIS_URL"):
    Q_CLUSTER["redis"] = os.environ["FLOWSITE_REDIS_URL"]
else:
    Q_CLUSTER["orm"] = "default"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"workflows": {"handlers": ["console"], "level": "INFO"}},
}

# The API configures its own views; drf-spectacular's schema class is the one project
# setting it needs (system check workflows.W006 says so when it is missing).
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}

# The API's OpenAPI document and its locally served Swagger UI (no CDN).
SPECTACULAR_SETTINGS = {
    "TITLE": "Flowsite API",
    "DESCRIPTION": "Start, inspect, signal, decide and operate durable workflows.",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One name per choice set, however many serializers use it.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "workflows.status.RunStatus",
        "StepStatusEnum": "workflows.status.StepStatus",
        "DecisionEnum": "workflows.status.Decision",
        "DecisionViaEnum": "workflows.status.DecisionVia",
        "NodeKindEnum": "workflows.status.NodeKind",
        "FlowStatusEnum": "workflows.status.FlowStatus",
        "FailureClassEnum": "workflows.status.FailureClass",
        "WorkerFailureClassEnum": "workflows.workers.external.WORKER_CLASSES",
        "UnitKindEnum": "workflows.services.bulk_units.UNIT_KIND_CHOICES",
    },
}
