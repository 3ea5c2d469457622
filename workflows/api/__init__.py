"""The HTTP API (Django REST framework), mounted by a project at a prefix of its choice.

It calls the same service functions as the admin and the commands and never writes
engine state itself. Everything here is configured per view (authentication,
permissions, parsers, the error format, the schema class), so including
``workflows.api.urls`` changes nothing in a host project's own ``REST_FRAMEWORK``
settings.
"""
