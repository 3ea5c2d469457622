"""The admin index override that docs/install.md gives a host project works as the page
says: an approver's index leads to the inbox, with nothing-allowed left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from tests.admin.test_approvals_inbox import waiting
from tests.support.users import staff

pytestmark = pytest.mark.django_db

INSTALL = Path(__file__).resolve().parents[2] / "docs" / "install.md"
NOTHING_ALLOWED = "have permission to view or edit anything"


def documented_index() -> str:
    """The ```django block that follows the mention of ``templates/admin/index.html``."""
    text = INSTALL.read_text()
    after = text[text.index("`templates/admin/index.html`") :]
    return re.search(r"```django\n(.*?)```", after, re.DOTALL)[1]


@pytest.fixture
def host_templates(settings, tmp_path):
    """A host project whose only template is the documented index."""
    (tmp_path / "admin").mkdir()
    (tmp_path / "admin" / "index.html").write_text(documented_index())
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]


def test_the_documented_index_leads_an_approver_to_the_inbox(client, host_templates):
    waiting()
    client.force_login(staff("approver", "approve_dispatch"))
    html = client.get(reverse("admin:index")).content.decode()
    assert f'<a href="{reverse("admin:workflows_approvals")}">Approvals inbox</a>' in html
    assert "1 waiting for you" in html
    assert NOTHING_ALLOWED not in html


def test_the_documented_index_still_lists_the_models_of_an_operator(client, host_templates):
    client.force_login(staff("viewer", "view_run", "view_step"))
    html = client.get(reverse("admin:index")).content.decode()
    assert html.index("Approvals inbox") < html.index(reverse("admin:workflows_run_changelist"))
    assert reverse("admin:workflows_step_changelist") in html
