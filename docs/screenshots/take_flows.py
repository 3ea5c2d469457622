"""Take the flows screenshots in docs/screenshots/ at 1400 px wide.

    .venv/bin/python docs/screenshots/take_flows.py

Like ``take.py`` (whose database setup, server and signed-in browser it reuses): the
flows list (flows open, sealed, completed, failed and cancelled), the page of a release
build's flow of 23 members in every state a member has (completed, running, blocked,
failed, and cancelled because an upstream failed), and its "Cancel flow" confirmation.

Members are built in two stages: the first is run to its end in-process (two members
fail, and their downstream members are cancelled with ``dependency_failed``); the
second is added afterwards, so its members whose upstreams completed have started and
stay running (no worker serves the screenshots' site), and the others stay blocked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from take import PASSWORD, signed_in, take_screenshots  # noqa: E402

# The release's members: name → (workflow, upstream members, join, failure or None).
FIRST_STAGE: dict[str, tuple[str, list[str], Any, str | None]] = {
    "checkout-sources": ("fetch_source", [], "all", None),
    "fetch-deps": ("fetch_source", [], "all", None),
    "fetch-assets": ("fetch_source", [], "all", None),
    "fetch-translations": ("fetch_source", [], "all", None),
    "compile-core": ("compile_target", ["checkout-sources", "fetch-deps"], "all", None),
    "compile-api": ("compile_target", ["checkout-sources", "fetch-deps"], "all", None),
    "compile-ui": ("compile_target", ["checkout-sources", "fetch-deps"], "all", None),
    "compile-cli": (
        "compile_target",
        ["checkout-sources"],
        "all",
        "cli/main.rs:88: cannot find type `Config`",
    ),
    "bundle-assets": ("compile_target", ["fetch-assets"], "all", None),
    "build-i18n": ("compile_target", ["fetch-translations"], "all", None),
    "lint": ("run_checks", ["checkout-sources"], "all", None),
    "security-scan": (
        "run_checks",
        ["fetch-deps"],
        "all",
        "CVE-2026-1182 in libyaml 0.2.5 (critical)",
    ),
    "test-core": ("run_tests", ["compile-core"], "all", None),
    "test-cli": ("run_tests", ["compile-cli"], "all", None),
    "docs": ("compile_target", ["lint"], "all", None),
    "license-report": ("run_checks", ["security-scan"], "all", None),
    "package-cli": ("package_artifact", ["test-cli"], "all", None),
}
SECOND_STAGE: dict[str, tuple[str, list[str], Any, str | None]] = {
    "test-api": ("run_tests", ["compile-api", "compile-core"], "all", None),
    "test-ui": ("run_tests", ["compile-ui"], "all", None),
    "package-web": (
        "package_artifact",
        ["compile-ui", "bundle-assets", "build-i18n"],
        "all",
        None,
    ),
    "integration": ("run_tests", ["test-core", "test-api", "test-ui"], "all", None),
    "e2e": ("run_tests", ["package-web", "test-api"], "all", None),
    "publish": ("package_artifact", ["integration", "package-cli", "e2e"], 2, None),
}
WORKFLOWS = ("fetch_source", "compile_target", "run_checks", "run_tests", "package_artifact")


def build(ctx: Any) -> dict[str, Any]:
    """Every member's one step: fails with the input's ``fail``, else builds its target."""
    from workflows import PermanentError

    if ctx.input.get("fail"):
        raise PermanentError(ctx.input["fail"])
    return {"target": ctx.input["target"], "upstream": sorted(ctx.upstream)}


def build_workflows() -> dict[str, type]:
    """One single-task workflow per kind of build job, each named as the job."""
    from workflows import Task, Workflow

    return {
        name: type(
            name.title().replace("_", ""),
            (Workflow,),
            {"name": name, "job": Task("take_flows.build")},
        )
        for name in WORKFLOWS
    }


def add_members(flow: Any, jobs: dict[str, type], members: dict) -> None:
    import workflows

    for member, (workflow, after, join, failure) in members.items():
        data = {"target": member, **({"fail": failure} if failure else {})}
        workflows.add_to_flow(flow, jobs[workflow], data, member=member, after=after, join=join)


def small_flow(name: str, key: str, jobs: dict[str, type], *, fail: bool = False) -> Any:
    """A three-member flow: fetch, then compile and test (the test fails if ``fail``)."""
    import workflows

    flow = workflows.create_flow(name, key=key)
    add_members(
        flow,
        jobs,
        {
            "fetch": ("fetch_source", [], "all", None),
            "compile": ("compile_target", ["fetch"], "all", None),
            "test": ("run_tests", ["compile"], "all", "3 of 812 tests failed" if fail else None),
        },
    )
    return flow


def build_demo() -> dict:
    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command

    import workflows
    from workflows.testing import run_pending

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("operator", password=PASSWORD)
    viewer = User.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    jobs = build_workflows()

    for day, fail in ((23, False), (24, True), (25, False)):
        workflows.seal_flow(
            small_flow(f"nightly {day} Nov", f"nightly-2026-11-{day}", jobs, fail=fail)
        )
    run_pending()
    onboarding = small_flow("customer onboarding: acme", "onboard-acme", jobs)
    workflows.cancel_flow(onboarding, "cancel_all", reason="customer withdrew")
    backfill = workflows.create_flow("backfill eu-west", key="backfill-eu-west")
    shards = [f"shard-{n}" for n in range(1, 5)]
    add_members(backfill, jobs, {shard: ("run_checks", [], "all", None) for shard in shards})
    release = workflows.create_flow("release 2026.11", key="release-2026.11")
    add_members(release, jobs, FIRST_STAGE)
    run_pending()
    # Last, so that they stay running: the backfill's merge (sealed) and the release's
    # second stage.
    add_members(backfill, jobs, {"merge": ("package_artifact", shards, "all", None)})
    workflows.seal_flow(backfill)
    add_members(release, jobs, SECOND_STAGE)
    return {"release": str(release.pk)}


def shoot(base_url: str, ids: dict) -> list[Path]:
    with signed_in(base_url, "operator") as camera:
        camera.page.goto("/admin/workflows/flow/")
        camera.photo("flows-list")
        camera.page.goto(f"/admin/workflows/flow/{ids['release']}/change/")
        camera.photo("flow-page")
        camera.page.get_by_role("link", name="Cancel flow").click()
        camera.page.wait_for_load_state()
        camera.photo("flow-cancel")
        taken = camera.taken
    # A user who may only look: no Seal or Cancel; an empty search; an unknown flow id.
    with signed_in(base_url, "viewer") as camera:
        camera.page.goto(f"/admin/workflows/flow/{ids['release']}/change/")
        camera.photo("flow-page-viewer")
        camera.page.goto("/admin/workflows/flow/?q=no-such-flow")
        camera.photo("flows-list-empty")
        camera.page.goto("/admin/workflows/flow/00000000-0000-0000-0000-000000000000/change/")
        camera.photo("flow-unknown-id")
    return taken + camera.taken


def main() -> None:
    take_screenshots(build_demo, shoot)


if __name__ == "__main__":
    main()
