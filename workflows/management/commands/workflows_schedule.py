"""Run schedules from the command line: list them, show one, create, pause, unpause,
trigger, backfill and delete. (``workflows_schedules``, plural, is another command: it
installs the django-q2 schedules that run the scanners.)"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.core.management.base import CommandError

from workflows.engine.sql.clock import database_now
from workflows.management.arguments import acting_user, json_value, refusals_as_command_errors
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    DEFAULT_LIMIT,
    Subcommand,
    Subcommands,
    argument,
    dry_run_option,
    json_option,
    limit_option,
    user_option,
)
from workflows.management.output import run_line, table, to_json
from workflows.models import Run, Schedule
from workflows.queries import run_summary
from workflows.queries.schedules import (
    describe_spec,
    latest_runs,
    schedule_facts,
)
from workflows.services.schedules import (
    backfill_schedule,
    create_schedule_once,
    delete_schedule,
    get_schedule,
    next_fire_times,
    pause_schedule,
    trigger_schedule,
    unpause_schedule,
)
from workflows.text import duration

_DURATION = re.compile(r"(?P<number>[0-9]+)(?P<unit>[smhd]?)")
_UNITS = {"": "seconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
LIST_COLUMNS = ("KEY", "WORKFLOW", "SPEC", "NEXT FIRE", "PAUSED", "FIRED", "SKIPPED", "MISSED")
RUN_COLUMNS = ("SLOT", "RUN", "STATUS")
SHOWN_FIRES = 5

KEY = argument("key", metavar="KEY", help="the schedule's key")
ACTING = (user_option("username recorded as who did it"), json_option("the schedule"))


def duration_value(text: str, option: str) -> timedelta:
    """``--every``, ``--catchup-window``, ``--jitter``: a whole number of seconds or a
    number with one unit, ``s``, ``m``, ``h`` or ``d`` (``90s``, ``5m``, ``1h``)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise CommandError(
            f"{option} is a whole number of seconds or a number with s, m, h or d "
            f"(90s, 5m, 1h), got {text!r}"
        )
    return timedelta(**{_UNITS[match["unit"]]: int(match["number"])})


def instant_value(text: str, option: str) -> datetime:
    """``--start-at``, ``--end-at``, ``--start``, ``--end``: an ISO 8601 instant with its
    UTC offset (``2026-03-01T02:00:00+01:00`` or ``...Z``)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(
            f"{option} is an ISO 8601 date and time such as 2026-03-01T02:00:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        raise CommandError(f"{option} {text!r} has no UTC offset; add one, e.g. Z or +01:00")
    return moment


def input_value(text: str | None) -> dict[str, Any] | None:
    """``--input``: a JSON object, each run's input."""
    if text is None:
        return None
    try:
        value = json_value(text)
    except Exception as exc:
        raise CommandError(f"--input {exc}") from None
    if not isinstance(value, dict):
        raise CommandError(f"--input must be a JSON object, got {text!r}")
    return value


class Command(DeclaredCommand):
    help = (
        "Run schedules: start runs of a workflow on a calendar (a cron expression or an "
        "interval), one run per slot. 'list' lists them with their calendar in words, next "
        "fire and counts; 'show KEY' prints one's specification, state, next "
        f"{SHOWN_FIRES} fire times (UTC and its zone) and last runs; 'create WORKFLOW --key "
        "KEY --cron EXPR|--every 5m [...]' makes one (the same spec again changes nothing); "
        "'pause KEY [--note TEXT]', 'unpause KEY', 'trigger KEY' (one run now), 'backfill "
        "KEY --start T --end T [--dry-run]' (a run per past slot without one) and 'delete "
        "KEY' act on one. Add --json for JSON. A refusal exits with status 1 and changes "
        "nothing. Not to be confused with workflows_schedules (plural), which installs the "
        "scanners' django-q2 schedules. 'workflows_schedule ACTION --help' explains one "
        "action, with an example."
    )

    arguments = (
        Subcommands(
            "action",
            (
                Subcommand(
                    "list",
                    "run schedules by key: workflow, calendar in words, next fire, paused, "
                    "slots fired, skipped and missed",
                    (
                        argument("--workflow", metavar="NAME", help="only this workflow's"),
                        limit_option("schedules", default=DEFAULT_LIMIT),
                        json_option("the schedules"),
                    ),
                    ("manage.py workflows_schedule list --workflow nightly_report",),
                ),
                Subcommand(
                    "show",
                    f"a run schedule's specification, state, next {SHOWN_FIRES} fire times "
                    "and last runs",
                    (KEY, json_option("the schedule")),
                    ("manage.py workflows_schedule show nightly",),
                ),
                Subcommand(
                    "create",
                    "make a run schedule of WORKFLOW; the same key with the same "
                    "specification again changes nothing, with another one it is refused",
                    (
                        argument("workflow", metavar="WORKFLOW", help="registered workflow name"),
                        argument("--key", required=True, metavar="KEY", help="its unique key"),
                        argument(
                            "--cron", metavar="EXPR", help='five cron fields, e.g. "0 2 * * *"'
                        ),
                        argument(
                            "--every",
                            metavar="INTERVAL",
                            help="an interval instead: 90s, 5m, 1h, 1d or a number of seconds",
                        ),
                        argument("--tz", default="UTC", metavar="ZONE", help="IANA zone of --cron"),
                        argument("--input", metavar="JSON", help="each run's input, an object"),
                        argument(
                            "--overlap",
                            default="skip",
                            metavar="POLICY",
                            help="while an earlier run has not ended: skip (default), "
                            "buffer_one, buffer_all, cancel_other, terminate_other, allow_all",
                        ),
                        argument(
                            "--catchup-window",
                            default="1h",
                            metavar="DURATION",
                            help="after downtime, slots this recent still start; older ones "
                            "are missed (default 1h)",
                        ),
                        argument("--jitter", metavar="DURATION", help="delay each start by up to"),
                        argument("--start-at", metavar="ISO", help="no slot before this instant"),
                        argument("--end-at", metavar="ISO", help="no slot from this instant on"),
                        argument("--paused", action="store_true", help="make it paused"),
                        argument("--note", default="", metavar="TEXT", help="a note shown with it"),
                        *ACTING,
                    ),
                    (
                        "manage.py workflows_schedule create nightly_report --key nightly "
                        '--cron "0 2 * * *" --tz Europe/Berlin --input \'{"full": true}\'',
                        "manage.py workflows_schedule create heartbeat --key beat --every 5m",
                    ),
                ),
                Subcommand(
                    "pause",
                    "start no slot of the schedule until unpaused; the note says why",
                    (
                        KEY,
                        argument("--note", default="", metavar="TEXT", help="why it is paused"),
                        *ACTING,
                    ),
                    ('manage.py workflows_schedule pause nightly --note "warehouse migration"',),
                ),
                Subcommand(
                    "unpause",
                    "resume from the next slot (slots passed while paused are not caught up)",
                    (KEY, *ACTING),
                    ("manage.py workflows_schedule unpause nightly",),
                ),
                Subcommand(
                    "trigger",
                    "start one run now, outside the slot sequence",
                    (KEY, user_option("username recorded as who did it"), json_option("the run")),
                    ("manage.py workflows_schedule trigger nightly",),
                ),
                Subcommand(
                    "backfill",
                    "start one run for each slot in [--start, --end) that has none",
                    (
                        KEY,
                        argument("--start", required=True, metavar="ISO", help="first instant"),
                        argument("--end", required=True, metavar="ISO", help="end (excluded)"),
                        dry_run_option("count the slots and the runs it would start"),
                        user_option("username recorded as who did it"),
                        json_option("the result"),
                    ),
                    (
                        "manage.py workflows_schedule backfill nightly "
                        "--start 2026-03-01T00:00Z --end 2026-03-08T00:00Z --dry-run",
                    ),
                ),
                Subcommand(
                    "delete",
                    "delete the schedule; its runs and events stay",
                    (KEY, *ACTING),
                    ("manage.py workflows_schedule delete nightly",),
                ),
            ),
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        acts = {
            "list": self._list,
            "show": self._show,
            "create": self._create,
            "pause": self._pause,
            "unpause": self._unpause,
            "trigger": self._trigger,
            "backfill": self._backfill,
            "delete": self._delete,
        }
        with refusals_as_command_errors():
            acts[options["action"]](options)

    def _list(self, options: dict[str, Any]) -> None:
        selected = Schedule.objects.order_by("key")
        if options["workflow"]:
            selected = selected.filter(workflow_name=options["workflow"])
        schedules = list(selected[: options["limit"]])
        if options["json"]:
            now = database_now()
            self.stdout.write(to_json([schedule_facts(s, now) for s in schedules]))
        elif schedules:
            self.stdout.write(table(LIST_COLUMNS, (_list_row(s) for s in schedules)))
        else:
            self.stdout.write("no run schedules")

    def _show(self, options: dict[str, Any]) -> None:
        schedule = get_schedule(options["key"])
        zone = ZoneInfo(schedule.tz)
        fires = next_fire_times(schedule, SHOWN_FIRES)
        runs = [slot_run(run) for run in latest_runs(schedule)]
        if options["json"]:
            shown = {
                **schedule_facts(schedule),
                "next_fire_times": [
                    {"utc": fire, "local": fire.astimezone(zone)} for fire in fires
                ],
                "runs": runs,
            }
            self.stdout.write(to_json(shown))
            return
        self.stdout.write(schedule_line(schedule))
        for label, value in _details(schedule):
            self.stdout.write(f"  {label}: {value}")
        self.stdout.write("next fire times (UTC / " + schedule.tz + "):")
        for fire in fires:
            self.stdout.write(f"  {_iso(fire)} / {_iso(fire.astimezone(zone))}")
        if not fires:
            self.stdout.write("  none: the schedule is past its end")
        if runs:
            self.stdout.write("last runs:")
            self.stdout.write(table(RUN_COLUMNS, ([_slot(r), r["id"], r["status"]] for r in runs)))
        else:
            self.stdout.write("no runs yet")

    def _create(self, options: dict[str, Any]) -> None:
        every = options["every"]
        jitter = options["jitter"]
        start_at, end_at = options["start_at"], options["end_at"]
        made = create_schedule_once(
            options["workflow"],
            key=options["key"],
            cron=options["cron"],
            every=duration_value(every, "--every") if every is not None else None,
            tz=options["tz"],
            input=input_value(options["input"]),
            overlap=options["overlap"],
            catchup_window=duration_value(options["catchup_window"], "--catchup-window"),
            jitter=duration_value(jitter, "--jitter") if jitter is not None else None,
            start_at=instant_value(start_at, "--start-at") if start_at else None,
            end_at=instant_value(end_at, "--end-at") if end_at else None,
            paused=options["paused"],
            note=options["note"],
            user=acting_user(options["user"], "create_schedule"),
        )
        if options["json"]:
            self.stdout.write(to_json({**schedule_facts(made.value), "created": made.created}))
        elif made.created:
            self.stdout.write(f"created {schedule_line(made.value)}")
        else:
            self.stdout.write(f"{schedule_line(made.value)}; made before with this key, unchanged")

    def _pause(self, options: dict[str, Any]) -> None:
        user = acting_user(options["user"], "pause_schedule")
        self._changed(pause_schedule(options["key"], options["note"], user=user), options)

    def _unpause(self, options: dict[str, Any]) -> None:
        user = acting_user(options["user"], "unpause_schedule")
        self._changed(unpause_schedule(options["key"], user=user), options)

    def _trigger(self, options: dict[str, Any]) -> None:
        run = slot_run(
            trigger_schedule(options["key"], user=acting_user(options["user"], "trigger_schedule"))
        )
        if options["json"]:
            self.stdout.write(to_json(run))
        else:
            self.stdout.write(f"triggered schedule {options['key']!r}: {run_line(run)}")

    def _backfill(self, options: dict[str, Any]) -> None:
        start = instant_value(options["start"], "--start")
        end = instant_value(options["end"], "--end")
        result = backfill_schedule(
            options["key"],
            start,
            end,
            dry_run=options["dry_run"],
            user=acting_user(options["user"], "backfill_schedule"),
        )
        started = [slot_run(run) for run in result.started]
        if options["json"]:
            self.stdout.write(
                to_json(
                    {
                        "slots": result.slots,
                        "existing": result.existing,
                        "would_start": result.would_start,
                        "dry_run": options["dry_run"],
                        "started": started,
                    }
                )
            )
            return
        counts = f"{_many(result.slots, 'slot')}, {result.existing} with a run already"
        if options["dry_run"]:
            self.stdout.write(f"dry run: {counts}; would start {_many(result.would_start, 'run')}")
            return
        self.stdout.write(f"{counts}; started {_many(len(started), 'run')}")
        for run in started:
            self.stdout.write(f"  {_slot(run)}  {run_line(run)}")

    def _delete(self, options: dict[str, Any]) -> None:
        schedule = get_schedule(options["key"])
        summary = schedule_facts(schedule)
        delete_schedule(schedule, user=acting_user(options["user"], "delete_schedule"))
        if options["json"]:
            self.stdout.write(to_json({**summary, "deleted": True}))
        else:
            self.stdout.write(f"deleted {schedule_line(schedule)}; its runs and events stay")

    def _changed(self, schedule: Schedule, options: dict[str, Any]) -> None:
        if options["json"]:
            self.stdout.write(to_json(schedule_facts(schedule)))
        else:
            self.stdout.write(schedule_line(schedule))


def slot_run(run: Run) -> dict[str, Any]:
    """A run's summary and the slot it was started for."""
    return {**run_summary(run), "scheduled_for": run.scheduled_for}


def schedule_line(schedule: Schedule) -> str:
    """``schedule 'nightly' (nightly_report): At 02:00 every day (Europe/Berlin), paused``."""
    state = f"paused ({schedule.note})" if schedule.paused and schedule.note else None
    state = state or ("paused" if schedule.paused else "active")
    return (
        f"schedule {schedule.key!r} ({schedule.workflow_name}): {describe_spec(schedule)}, {state}"
    )


def _details(schedule: Schedule) -> list[tuple[str, Any]]:
    spec = f"cron {schedule.cron!r}" if schedule.cron else describe_spec(schedule)
    origin = "declared in the workflow's code" if schedule.origin == "code" else "an operator's"
    return [
        ("spec", f"{spec} in {schedule.tz}"),
        ("input", json.dumps(schedule.input, ensure_ascii=False)),
        ("overlap", schedule.overlap),
        ("catch-up window", duration(schedule.catchup_window)),
        ("jitter", f"up to {duration(schedule.jitter)}" if schedule.jitter else "none"),
        ("window", f"{_iso(schedule.start_at) or '-'} to {_iso(schedule.end_at) or '-'}"),
        ("origin", origin),
        (
            "slots",
            f"{schedule.fired_count} fired, {schedule.skipped_count} skipped, "
            f"{schedule.missed_count} missed, {schedule.buffered_count} buffered",
        ),
        ("last fired", _iso(schedule.last_fired_at) or "never"),
    ]


def _list_row(schedule: Schedule) -> list[Any]:
    return [
        schedule.key,
        schedule.workflow_name,
        describe_spec(schedule),
        _iso(schedule.next_fire_at) or "-",
        "yes" if schedule.paused else "no",
        schedule.fired_count,
        schedule.skipped_count,
        schedule.missed_count,
    ]


def _slot(run: dict[str, Any]) -> str:
    return _iso(run.get("scheduled_for")) or "-"


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else ""


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"
