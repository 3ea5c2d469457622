"""Webhooks: signed HTTP deliveries of the event history to endpoints set up in the admin.

One module per job: ``event_types`` (what an endpoint may subscribe to), ``signing``
(Standard Webhooks signatures, secrets and message ids), ``payload`` (the JSON body of
an event), ``outbox`` (deliveries recorded in the hook deliverer's claim), ``enqueue``
(which endpoints have a delivery due, and nudging django-q2), ``sender`` (claim, POST,
record), ``services`` (the verbs the admin, the command and the sender call) and
``reports`` (what the command lists). The endpoints and the delivery log are models of
the app (``workflows.models.webhooks``), their admin pages a module of the console
(``workflows.admin.webhooks``). See the "Webhooks" section of ``docs/architecture.md``.
"""
