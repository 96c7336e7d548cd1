"""Pages render for the right people; login works through the real form in Chromium."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client

from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db]


@pytest.mark.parametrize("path", ["/submit/", "/jobs/", "/jobs/abc/"])
def test_pages_need_a_login(path: str, client: Client) -> None:
    response = client.get(path)
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"].startswith("/accounts/login/")


def test_review_page_is_for_reviewers_only(client: Client) -> None:
    client.force_login(make_user(username="plain"))
    assert client.get("/review/").status_code == HTTPStatus.FORBIDDEN


def test_submit_page_renders_the_form(client: Client) -> None:
    client.force_login(make_user(username="sub"))
    response = client.get("/submit/")
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    for element in ('id="files"', 'id="enqueue"', 'id="overall-text"', "js/submit.js"):
        assert element in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_login_form_leads_to_the_submit_page(page, login, shots) -> None:
    user = make_user(username="carol")
    login(user)
    assert page.url.endswith("/submit/")
    assert "Log out carol" in page.inner_text("header")
    shots(page, "submit-page")
