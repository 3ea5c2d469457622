"""Webhooks: signed deliveries from the history to a real HTTP receiver on 127.0.0.1.

The receiver (``tests/support/webhook_receiver.py``) verifies each signature with its own code,
answers from a script of status codes and stops by itself at its deadline. Time moves
with ``run_pending(until=...)``; retry delays are shortened by settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ

import workflows
from tests.acceptance.harness import MANAGE, database_url
from tests.support.users import staff
from tests.support.webhook_receiver import Receiver
from workflows import PermanentError, Retry, Task, Workflow
from workflows.checks import webhook_problems
from workflows.conf import workflow_settings
from workflows.models import Event, WebhookDelivery, WebhookEndpoint
from workflows.status import DeliveryStatus
from workflows.testing import run_pending
from workflows.webhooks import services
from workflows.webhooks.enqueue import SEND_TASK
from workflows.webhooks.sender import Outcome, claim_head, record, send_endpoint
from workflows.workers.runner import execute_step
from workflows.workers.scanners import deliver_hooks, purge_webhook_deliveries, send_webhooks

pytestmark = pytest.mark.django_db

HERE = "tests.webhooks.test_webhooks"
ONCE = Retry(max_attempts=1)
STOP_GRACE_SECONDS = 20


def ship(ctx):
    return {"parcel": ctx.input.get("parcel", 1)}


def decline(ctx):
    raise PermanentError("card declined")


class Shipping(Workflow):
    name = "webhooks_shipping"
    pack = Task(f"{HERE}.ship")
    send = Task(f"{HERE}.ship")


class Single(Workflow):
    name = "webhooks_single"
    only = Task(f"{HERE}.ship")


class Declined(Workflow):
    name = "webhooks_declined"
    pay = Task(f"{HERE}.decline", retry=ONCE)


@pytest.fixture
def short_retries(settings):
    """Retries after 1 s, then 2 s: three attempts in all."""
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "WEBHOOK_RETRY_DELAYS": [timedelta(seconds=1), timedelta(seconds=2)],
        "WEBHOOK_TIMEOUT": timedelta(seconds=5),
    }


def endpoint_for(receiver: Receiver, event_types: list[str]) -> WebhookEndpoint:
    endpoint = services.create_endpoint(url=receiver.url, event_types=event_types)
    receiver.secret = endpoint.secret
    return endpoint


def types_of(requests) -> list[str]:
    return [request.json["type"] for request in requests]


def test_each_event_is_delivered_once_signed_with_the_standard_headers():
    with Receiver() as receiver:
        endpoint = endpoint_for(receiver, ["*"])
        run = workflows.start_run(Shipping, input={"parcel": 4})
        before = int(time.time())
        run_pending()
        run_pending()  # nothing new: each event was delivered once
        requests = receiver.requests

    assert types_of(requests) == [
        "run.started",
        "step.completed",
        "step.completed",
        "run.completed",
    ]
    assert all(request.verified for request in requests)
    deliveries = list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("id"))
    assert [d.status for d in deliveries] == [DeliveryStatus.DELIVERED] * 4
    assert [r.message_id for r in requests] == [d.message_id for d in deliveries]
    assert len({d.message_id for d in deliveries}) == 4
    first = requests[0]
    assert first.headers["content-type"] == "application/json"
    assert first.headers["webhook-id"].startswith("msg_")
    assert before <= int(first.headers["webhook-timestamp"]) <= time.time() + 1
    completed = requests[-1].json
    assert completed["data"]["run_id"] == str(run.pk)
    assert completed["data"]["workflow"] == "webhooks_shipping"
    assert requests[1].json["data"]["step"] == "pack"
    assert deliveries[0].request_headers["webhook-id"] == deliveries[0].message_id
    assert deliveries[0].response_status == 200


def test_an_endpoint_gets_only_the_types_it_subscribed_to():
    with Receiver() as finished, Receiver() as failures:
        endpoint_for(finished, ["run.completed", "run.failed"])
        endpoint_for(failures, ["step.failed"])
        workflows.start_run(Shipping)
        workflows.start_run(Declined)
        run_pending()
    assert sorted(types_of(finished.requests)) == ["run.completed", "run.failed"]
    assert types_of(failures.requests) == ["step.failed"]
    assert "card declined" in failures.requests[0].body.decode()


def test_a_rolled_back_transition_is_never_delivered():
    with Receiver() as receiver:
        endpoint_for(receiver, ["*"])
        with pytest.raises(RuntimeError), transaction.atomic():
            workflows.start_run(Shipping)
            raise RuntimeError("the caller's transaction fails after the run started")
        run_pending()
    assert not WebhookDelivery.objects.exists()
    assert receiver.requests == []


def test_a_failing_receiver_is_retried_with_backoff_until_it_answers(short_retries):
    with Receiver(script=[500, 503, 200]) as receiver:
        endpoint_for(receiver, ["run.completed"])
        workflows.start_run(Shipping)
        run_pending()
        delivery = WebhookDelivery.objects.get()
        assert (delivery.status, delivery.attempt, delivery.response_status) == (
            DeliveryStatus.RETRY_SCHEDULED,
            1,
            500,
        )
        assert delivery.next_attempt_at - delivery.updated_at == pytest.approx(
            timedelta(seconds=1), abs=timedelta(milliseconds=50)
        )
        run_pending()  # not due yet
        assert len(receiver.requests) == 1

        run_pending(until=timezone.now() + timedelta(seconds=1.5))
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempt) == (DeliveryStatus.RETRY_SCHEDULED, 2)
        assert delivery.next_attempt_at - delivery.updated_at == pytest.approx(
            timedelta(seconds=2), abs=timedelta(milliseconds=50)
        )

        run_pending(until=timezone.now() + timedelta(seconds=3))
        requests = receiver.requests
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt, delivery.response_status) == (
        DeliveryStatus.DELIVERED,
        3,
        200,
    )
    assert [r.answered for r in requests] == [500, 503, 200]
    assert {r.message_id for r in requests} == {delivery.message_id}
    assert all(r.verified for r in requests)


def test_a_delivery_fails_for_good_after_the_last_retry(short_retries):
    with Receiver(script=[500]) as receiver:
        endpoint_for(receiver, ["run.completed"])
        workflows.start_run(Shipping)
        run_pending(until=timezone.now() + timedelta(minutes=1))
        run_pending(until=timezone.now() + timedelta(days=1))
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempt) == (DeliveryStatus.FAILED, 3)
    assert delivery.next_attempt_at is None
    assert len(receiver.requests) == 3
    assert send_webhooks(now=timezone.now() + timedelta(days=2)).found == 0


def test_an_unreachable_receiver_is_an_error_to_retry(short_retries):
    with Receiver() as receiver:
        url = receiver.url  # closed when the block ends: nothing listens there any more
    services.create_endpoint(url=url, event_types=["run.completed"])
    workflows.start_run(Shipping)
    run_pending()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.RETRY_SCHEDULED
    assert delivery.response_status is None
    assert "refused" in delivery.error.lower()


def test_410_gone_disables_the_endpoint_and_skips_what_it_had_queued(caplog):
    with Receiver(script=[410]) as receiver:
        endpoint = endpoint_for(receiver, ["*"])
        workflows.start_run(Shipping)
        run_pending()
        workflows.start_run(Shipping)
        run_pending()
        requests = receiver.requests
    assert len(requests) == 1
    endpoint.refresh_from_db()
    assert not endpoint.enabled
    assert "410 Gone" in endpoint.disabled_reason
    statuses = list(WebhookDelivery.objects.order_by("id").values_list("status", flat=True))
    assert statuses == [DeliveryStatus.FAILED] + [DeliveryStatus.SKIPPED] * 3
    assert "disabled" in caplog.text

    assert services.enable_endpoint(endpoint.pk)
    assert not services.enable_endpoint(endpoint.pk)  # already enabled: nothing to do
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.disabled_reason == ""


def test_one_endpoint_receives_its_deliveries_in_event_order_even_across_a_retry(short_retries):
    with Receiver(script=[200, 500, 200]) as receiver:
        endpoint_for(receiver, ["*"])
        workflows.start_run(Shipping)
        run_pending()
        # The second delivery failed: nothing behind it was sent.
        assert len(receiver.requests) == 2
        assert WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count() == 2
        run_pending(until=timezone.now() + timedelta(seconds=2))
        requests = receiver.requests
    event_ids = [request.json["data"]["event_id"] for request in requests]
    assert event_ids == sorted(event_ids)
    assert len(event_ids) == 5 and len(set(event_ids)) == 4
    assert types_of(requests) == [
        "run.started",
        "step.completed",
        "step.completed",
        "step.completed",
        "run.completed",
    ]


def test_replay_from_the_admin_sends_the_same_webhook_id_again(client):
    with Receiver() as receiver:
        endpoint_for(receiver, ["run.completed"])
        workflows.start_run(Shipping)
        run_pending()
        original = WebhookDelivery.objects.get()
        client.force_login(staff("operator", "view_webhookdelivery", "change_webhookendpoint"))
        response = client.post(
            reverse("admin:workflows_webhookdelivery_changelist"),
            {"action": "replay", "_selected_action": [original.pk]},
            follow=True,
        )
        assert "queued again" in response.content.decode()
        run_pending()
        requests = receiver.requests
    first, again = requests
    assert again.message_id == first.message_id == original.message_id
    assert again.body == first.body and again.verified
    replay = WebhookDelivery.objects.exclude(pk=original.pk).get()
    assert (replay.replay_of_id, replay.status) == (original.pk, DeliveryStatus.DELIVERED)


def test_replay_is_refused_while_the_message_is_still_queued():
    endpoint = services.create_endpoint(url="http://127.0.0.1:9/none", event_types=["*"])
    services.disable_endpoint(endpoint.pk, reason="test")
    services.enable_endpoint(endpoint.pk)
    workflows.start_run(Declined)
    deliver_hooks()  # recorded, not sent
    queued = WebhookDelivery.objects.order_by("id").first()
    result = services.replay_deliveries([queued.pk, 10**9])
    assert result.created == []
    assert result.refused == {
        queued.pk: f"{queued.message_id} is already waiting to be sent",
        10**9: "no such delivery",
    }


def test_the_replay_action_needs_the_endpoint_permission(client):
    client.force_login(staff("auditor", "view_webhookdelivery"))
    page = client.get(reverse("admin:workflows_webhookdelivery_changelist"))
    assert page.status_code == 200
    assert "Replay selected deliveries" not in page.content.decode()


def test_the_admin_form_refuses_unknown_types_and_shows_the_secret_once(admin_client):
    add = reverse("admin:workflows_webhookendpoint_add")
    refused = admin_client.post(add, {"url": "https://example.com/h", "event_types": ["nope"]})
    assert "Select a valid choice" in refused.content.decode()
    created = admin_client.post(
        add,
        {"url": "https://example.com/h", "event_types": ["run.failed"], "enabled": "on"},
        follow=True,
    )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret in created.content.decode()
    page = admin_client.get(reverse("admin:workflows_webhookendpoint_change", args=[endpoint.pk]))
    assert endpoint.secret not in page.content.decode()
    assert endpoint.secret[:10] in page.content.decode()


def test_an_edit_from_a_stale_form_is_refused(admin_client):
    endpoint = services.create_endpoint(url="https://example.com/h", event_types=["*"])
    change = reverse("admin:workflows_webhookendpoint_change", args=[endpoint.pk])
    form = {"url": "https://example.com/new", "event_types": ["*"], "enabled": "on"}
    services.rotate_secret(endpoint.pk)  # someone else changed the endpoint meanwhile
    response = admin_client.post(change, {**form, "version": endpoint.version}, follow=True)
    assert "Not saved" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.url == "https://example.com/h"
    admin_client.post(change, {**form, "version": endpoint.version})
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.version) == ("https://example.com/new", 3)


def test_disabling_from_the_form_skips_waiting_deliveries(admin_client):
    endpoint = services.create_endpoint(url="http://127.0.0.1:9/none", event_types=["*"])
    workflows.start_run(Declined)
    deliver_hooks()
    change = reverse("admin:workflows_webhookendpoint_change", args=[endpoint.pk])
    admin_client.post(
        change, {"url": endpoint.url, "event_types": ["*"], "version": endpoint.version}
    )
    endpoint.refresh_from_db()
    assert not endpoint.enabled
    assert endpoint.disabled_reason == "disabled by admin"
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"skipped"}


@pytest.mark.django_db(transaction=True)
def test_two_racing_claims_of_one_head_give_one_lease(concurrently):
    endpoint = services.create_endpoint(url="http://127.0.0.1:9/none", event_types=["*"])
    workflows.start_run(Declined)
    deliver_hooks()
    leases = concurrently(
        lambda: claim_head(endpoint.pk, "sender-a"), lambda: claim_head(endpoint.pk, "sender-b")
    )
    assert not [lease for lease in leases if isinstance(lease, Exception)], leases
    (lease,) = [lease for lease in leases if lease is not None]
    head = WebhookDelivery.objects.order_by("id").first()
    assert (head.status, head.attempt, head.lease_owner) == ("sending", 1, lease.owner)


@pytest.mark.django_db(transaction=True)
def test_two_racing_senders_post_each_delivery_once_and_in_order(concurrently):
    with Receiver(delay=0.01) as receiver:
        endpoint = endpoint_for(receiver, ["*"])
        for parcel in range(4):
            workflows.start_run(Shipping, input={"parcel": parcel})
        # Run the steps without sending, then let two senders race over the queue.
        services.disable_endpoint(endpoint.pk, reason="held while the runs finish")
        run_pending()
        services.enable_endpoint(endpoint.pk)
        Event.objects.update(published=False)  # hand the events back to the deliverer
        deliver_hooks()
        expected = list(WebhookDelivery.objects.order_by("id").values_list("message_id", flat=True))
        results = concurrently(
            lambda: send_endpoint(endpoint.pk, owner="sender-a"),
            lambda: send_endpoint(endpoint.pk, owner="sender-b"),
        )
        while send_endpoint(endpoint.pk):  # whatever a loser left behind
            pass
        requests = receiver.requests
    assert not [r for r in results if isinstance(r, Exception)], results
    assert [r.message_id for r in requests] == expected
    assert len(expected) == 16
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_django_q2_worker_process_sends_the_deliveries(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "EXECUTOR": "django_q"}
    with Receiver() as receiver:
        endpoint_for(receiver, ["run.completed"])
        run = workflows.start_run(Single)
        # The step runs here (the worker process knows only the installed apps' flows);
        # delivering its hooks records the delivery and queues its django-q2 task.
        OrmQ.objects.all().delete()
        execute_step(run.steps.get().pk)
        deliver_hooks()
        assert [message.task["func"] for message in OrmQ.objects.all()] == [SEND_TASK]
        assert not receiver.requests
        worker = subprocess.Popen(
            [sys.executable, str(MANAGE), "workflows_worker"],
            env={
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "DATABASE_URL": database_url(connection.settings_dict),
                "FLOWSITE_WORKERS": "1",
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            requests = receiver.wait_for(1)
        finally:
            errors = stop(worker)
    assert types_of(requests) == ["run.completed"], errors.decode()[-2000:]
    assert requests[0].verified
    assert requests[0].json["data"]["run_id"] == str(run.pk)
    assert WebhookDelivery.objects.get().status == DeliveryStatus.DELIVERED
    assert "workflows webhooks" in errors.decode()


def stop(worker: subprocess.Popen) -> bytes:
    """SIGTERM to the cluster's main process alone (it stops its workers in order), then
    SIGKILL to whatever is left of its group; return what it wrote to stderr."""
    worker.send_signal(signal.SIGTERM)
    try:
        _, errors = worker.communicate(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _, errors = b"", b""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    if worker.poll() is None:
        _, errors = worker.communicate(timeout=STOP_GRACE_SECONDS)
    return errors


def test_deleting_a_run_leaves_its_delivery_log():
    with Receiver() as receiver:
        endpoint_for(receiver, ["run.completed"])
        run = workflows.start_run(Shipping)
        run_pending()
    run_id = run.pk
    run.delete()
    delivery = WebhookDelivery.objects.get()
    assert delivery.run_id == run_id and delivery.body["data"]["run_id"] == str(run_id)


def test_nothing_is_recorded_without_an_enabled_endpoint():
    workflows.start_run(Shipping)
    run_pending()
    assert not WebhookDelivery.objects.exists()
    assert User.objects.count() == 0


def test_a_queue_timeout_shorter_than_a_sender_task_is_refused(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "WEBHOOK_TIMEOUT": timedelta(seconds=30)}
    assert webhook_problems({"timeout": 90}) == []
    (problem,) = webhook_problems({"timeout": 80})
    assert problem.id == "workflows.W007"
    assert "CHAIN_BUDGET plus WEBHOOK_TIMEOUT (90 s)" in problem.msg


def test_bad_webhook_settings_are_refused_saying_which(settings):
    settings.WORKFLOWS = {"WEBHOOK_RETRY_DELAYS": [timedelta(seconds=5), 30]}
    with pytest.raises(ImproperlyConfigured, match="WEBHOOK_RETRY_DELAYS"):
        workflow_settings.WEBHOOK_TIMEOUT  # noqa: B018 - reading loads and checks them all
    settings.WORKFLOWS = {"WEBHOOK_TIMEOUT": timedelta(0)}
    with pytest.raises(ImproperlyConfigured, match="WEBHOOK_TIMEOUT"):
        workflow_settings.WEBHOOK_TIMEOUT  # noqa: B018


def test_the_command_lists_endpoints_and_failures_and_replays(short_retries):
    with Receiver(script=[500, 500, 500, 200]) as receiver:
        endpoint = endpoint_for(receiver, ["run.completed"])
        workflows.start_run(Shipping)
        run_pending(until=timezone.now() + timedelta(minutes=1))
        failed = WebhookDelivery.objects.get()
        assert failed.status == DeliveryStatus.FAILED

        listing = StringIO()
        call_command("workflows_webhooks", stdout=listing)
        text = listing.getvalue()
        assert receiver.url in text and failed.message_id in text and "500" in text

        replayed = StringIO()
        call_command("workflows_webhooks", "--replay", str(failed.pk), stdout=replayed)
        assert "1 delivery(ies) queued again" in replayed.getvalue()
        run_pending()
        assert [r.answered for r in receiver.requests] == [500, 500, 500, 200]
        with pytest.raises(CommandError, match="1 of 1 deliveries not replayed"):
            call_command("workflows_webhooks", "--replay", "999999", stderr=StringIO())

    services.disable_endpoint(endpoint.pk, reason="operator")
    enabled = StringIO()
    call_command("workflows_webhooks", "--enable", str(endpoint.pk), "--json", stdout=enabled)
    assert json.loads(enabled.getvalue()) == {"endpoint": endpoint.pk, "enabled_now": True}
    with pytest.raises(CommandError, match="no webhook endpoint 999"):
        call_command("workflows_webhooks", "--enable", "999")


def test_the_retention_purge_deletes_ended_deliveries_and_keeps_open_ones(settings):
    with Receiver(script=[200, 500]) as receiver:
        endpoint_for(receiver, ["*"])
        workflows.start_run(Single)
        run_pending()
    assert list(WebhookDelivery.objects.order_by("id").values_list("status", flat=True)) == [
        "delivered",
        "retry_scheduled",
        "pending",
    ]
    assert purge_webhook_deliveries().found == 0  # RETENTION is None: history is kept
    assert purge_webhook_deliveries(older_than=timedelta(0), dry_run=True).found == 1
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": timedelta(0)}
    assert purge_webhook_deliveries().done == 1
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {
        "retry_scheduled",
        "pending",
    }


def test_a_failure_of_an_endpoint_disabled_meanwhile_is_skipped_not_retried(short_retries):
    endpoint = services.create_endpoint(url="http://127.0.0.1:9/none", event_types=["*"])
    workflows.start_run(Single)
    deliver_hooks()
    lease = claim_head(endpoint.pk, "sender")
    services.disable_endpoint(endpoint.pk, reason="by an operator")  # while the POST is out
    assert record(lease, Outcome({}, 500)) == DeliveryStatus.SKIPPED
    delivery = WebhookDelivery.objects.get(pk=lease.delivery_id)
    assert delivery.error == "HTTP 500; not retried: endpoint disabled (by an operator)"
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"skipped"}
