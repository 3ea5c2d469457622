"""Webhooks: signed HTTP deliveries of the event history to endpoints set up in the admin.

One module per job: ``event_types`` (what an endpoint may subscribe to), ``signing``
(Standard Webhooks signatures and secrets), ``payload`` (the JSON body of an event),
``models`` (endpoints and the delivery log), ``outbox`` (deliveries recorded in the hook
deliverer's claim), ``sender`` (claim, POST, record), ``dispatch`` (who sends, and
when), ``services`` (the verbs the admin and the command call) and ``admin``. See the
"Webhooks" section of ``docs/architecture.md``.
"""
