# Appended to the settings.py that `django-admin startproject shop` wrote: what a project
# adds to run Flowsite. BASE_DIR and INSTALLED_APPS come from the generated part.
import os
from urllib.parse import unquote, urlsplit

INSTALLED_APPS += [  # noqa: F821
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_q",
    "workflows",
    "orders",
]

# SQLite set up for several processes sharing one file (system checks workflows.W001-W003),
# or PostgreSQL when DATABASE_URL names one.
DATABASE_URL = urlsplit(os.environ.get("DATABASE_URL", ""))
if DATABASE_URL.scheme in ("postgres", "postgresql"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(DATABASE_URL.path[1:]),
            "USER": unquote(DATABASE_URL.username or ""),
            "PASSWORD": unquote(DATABASE_URL.password or ""),
            "HOST": DATABASE_URL.hostname or "",
            "PORT": str(DATABASE_URL.port or ""),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",  # noqa: F821
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;",
            },
        }
    }

# Steps run in the django-q2 workers that `manage.py workflows_worker` starts.
WORKFLOWS = {"EXECUTOR": "django_q"}

# The ORM broker: a transition and its queue message commit in one transaction. The
# system checks (workflows.E004-E008, W004) refuse values that break fencing or timing.
Q_CLUSTER = {
    "name": "shop",
    "orm": "default",
    "workers": 2,
    "timeout": 600,  # >= CHAIN_BUDGET (60 s) + the longest step timeout (5 min default)
    "retry": 660,  # > timeout
    "max_attempts": 1,  # the engine counts attempts, not the queue
    "ack_failures": True,
    "catch_up": False,
    "save_limit": -1,
}

# First: requests to the API that Django refuses to read are answered at once with a 400
# in the API's error envelope (system check workflows.W008).
MIDDLEWARE = ["workflows.api.middleware.SuspiciousRequestMiddleware", *MIDDLEWARE]  # noqa: F821

# drf-spectacular builds the API's schema (system check workflows.W006).
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}

# The API's schema and Swagger UI, served from the installed sidecar (no CDN), with one
# name for each choice set the engine's serializers share (else drf_spectacular.W001).
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
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
