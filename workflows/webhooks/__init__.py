"""Webhooks: signed HTTP deliveries of the event history to endpoints set up in the admin.

One module per job: ``event_types`` (what an endpoint may subscribe to), ``signing``
(Standard Webhooks signatures and secrets), ``payload`` (the JSON body of an event),
``models`` (endpoints and the delivery log), ``outbox`` (deliveries recorded in the hook
deliverer's claim), ``enqueue`` (which endpoints have a delivery due, and nudging
django-q2), ``sender`` (claim, POST, record), ``services`` (the verbs the admin, the
command and the sender call), ``reports`` (what the command lists) and ``admin``. See
the "Webhooks" section of ``docs/architecture.md``.
"""
