"""The credentials page: the API's validation beside the field, stored log-ins listed without
their password, the password never sent back (not after an error either), and what another
customer cannot touch."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import pytest

from tests.synthetic_users.dashboard.conftest import field_errors, sign_in

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from synthetic_users._safety._credentials import Credentials
    from synthetic_users._store._credentials import CredentialRecord
    from tests.synthetic_users.dashboard.conftest import Dashboard

Signed = tuple["TestClient[Litestar]", str]
# Spaces included: a password is kept exactly as typed.
PASSWORD = " s3cret-Sentinel-pw "  # noqa: S105 - the secret the tests hunt for
PAGE = "/dashboard/credentials"
PASSWORD_INPUT = re.compile(r"<input[^>]*\bname=\"password\"[^>]*>")


def _vault(dash: Dashboard) -> Credentials:
    credentials: Credentials = dash.app.state.api.credentials
    return credentials


def _stored(dash: Dashboard, customer: str, name: str, username: str) -> CredentialRecord:
    """A credential stored as `POST /credentials` stores one."""
    return _vault(dash).create(
        customer, name=name, username=username, password=PASSWORD, origin=None
    )


def _form(token: str, **fields: str) -> dict[str, str]:
    form = {
        "csrf_token": token,
        "name": "Test shopper",
        "username": "shopper@example.com",
        "password": PASSWORD,
        "origin": "https://shop.example.com",
    }
    form.update(fields)
    return form


def _password_input(html: str) -> str:
    controls: list[str] = PASSWORD_INPUT.findall(html)
    assert len(controls) == 1, controls
    return controls[0]


def test_signed_out_the_credentials_page_redirects_to_sign_in(dash: Dashboard) -> None:
    with dash.client() as client:
        page = client.get(PAGE, follow_redirects=False)
    assert page.status_code == 302
    assert page.headers["location"] == f"/dashboard/sign-in?next={PAGE}"


def test_the_credential_forms_refuse_a_post_without_the_sessions_token(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    mine = _stored(dash, "acme", "Kept", "kept@example.com")
    delete = f"{PAGE}/{mine.credential_id}/delete"
    for path, data in (
        (PAGE, {k: v for k, v in _form(token).items() if k != "csrf_token"}),
        (PAGE, _form("x")),
        (PAGE, _form(token[:-1])),
        (delete, {}),
        (delete, {"csrf_token": token[:-1]}),
    ):
        refused = client.post(path, data=data)
        assert refused.status_code == 403, path
        assert "Request refused" in refused.text
        assert PASSWORD.strip() not in refused.text
    # From another origin, even with the right token.
    for path, data in ((PAGE, _form(token)), (delete, {"csrf_token": token})):
        forged = client.post(path, data=data, headers={"Origin": "https://attacker.test"})
        assert forged.status_code == 403, path
    assert [c.name for c in _vault(dash).page("acme", 10)] == ["Kept"]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "  "}, "name", "String should have at least 1 character"),
        ({"username": ""}, "username", "String should have at least 1 character"),
        ({"password": ""}, "password", "String should have at least 1 character"),
        ({"password": "p" * 1025}, "password", "String should have at most 1024 characters"),
        ({"name": "n" * 101}, "name", "String should have at most 100 characters"),
        ({"origin": "https://shop.example.com/login"}, "origin", "must be an origin"),
        ({"origin": "shop.example.com"}, "origin", "must be an origin"),
    ],
)
def test_the_apis_error_sits_beside_the_field_that_caused_it(
    signed_in: Signed, dash: Dashboard, fields: dict[str, str], field: str, message: str
) -> None:
    client, token = signed_in
    page = client.post(PAGE, data=_form(token, **fields))
    assert page.status_code == 400
    errors = field_errors(page.text)
    assert list(errors) == [field]
    assert message in errors[field]
    assert f'{field}-error" aria-invalid="true"' in page.text
    assert f'href="#{field}">' in page.text  # the summary links to the control
    assert _vault(dash).page("acme", 10) == []
    # What was typed is kept, except the password: its control comes back empty.
    kept = {"name": "Test shopper", "username": "shopper@example.com"} | fields
    for name in ("name", "username"):
        if kept[name].strip():
            assert f'value="{kept[name].strip()}"' in page.text, name
    assert "value=" not in _password_input(page.text)
    assert PASSWORD.strip() not in page.text
    if field == "password" and fields["password"]:
        assert fields["password"] not in page.text


def test_the_forms_errors_are_those_post_credentials_answers(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    api = client.post(
        "/credentials",
        json={"name": "", "username": "u", "password": "p" * 1025},
        headers={"Authorization": f"Bearer {dash.key}"},
    )
    assert api.status_code == 400
    expected = {e["path"].strip("/"): e["message"] for e in api.json()["errors"]}
    page = client.post(PAGE, data=_form(token, name="", username="u", password="p" * 1025))
    assert page.status_code == 400
    assert (
        field_errors(page.text)
        == expected
        == {
            "name": "String should have at least 1 character",
            "password": "String should have at most 1024 characters",
        }
    )


def test_the_password_is_in_no_response_body_and_no_log(
    signed_in: Signed, dash: Dashboard, caplog: pytest.LogCaptureFixture
) -> None:
    client, token = signed_in
    caplog.set_level(logging.DEBUG)
    bodies = []
    refused = client.post(PAGE, data=_form(token, name=""))  # an error, password typed
    assert refused.status_code == 400
    bodies.append(refused.text)
    stored = client.post(PAGE, data=_form(token), follow_redirects=False)
    assert stored.status_code == 303
    assert PASSWORD.strip() not in stored.headers["location"]
    bodies.append(stored.text)
    listing = client.get(stored.headers["location"])
    assert listing.status_code == 200
    assert "Credential stored." in listing.text
    bodies.append(listing.text)
    for path in ("/dashboard/runs", "/dashboard/runs/new", "/dashboard/personas"):
        bodies.append(client.get(path).text)
    for body in bodies:
        assert PASSWORD.strip() not in body
    assert "value=" not in _password_input(listing.text)
    for record in caplog.records:
        assert PASSWORD.strip() not in record.getMessage()
    # Sealed, not lost: the vault opens it to exactly what was typed.
    (credential,) = _vault(dash).page("acme", 10)
    assert _vault(dash).reveal("acme", credential.credential_id) == PASSWORD


def test_the_password_control_asks_for_a_new_password(signed_in: Signed) -> None:
    client, _token = signed_in
    control = _password_input(client.get(PAGE).text)
    assert 'type="password"' in control
    assert 'autocomplete="new-password"' in control
    assert "value=" not in control


def test_a_stored_credential_is_listed_without_its_password(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    assert "No credentials yet." in client.get(PAGE).text
    client.post(PAGE, data=_form(token))
    client.post(PAGE, data=_form(token, name="Admin", username="admin", origin=""))
    page = client.get(PAGE).text
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "Stored credentials (2)" in text
    assert "Test shopper User name: shopper@example.com For https://shop.example.com" in text
    assert "Admin User name: admin added" in text  # no origin, no "For"
    for credential in _vault(dash).page("acme", 10):
        assert credential.credential_id in page
        assert f'action="{PAGE}/{credential.credential_id}/delete"' in page
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00">', page)
    assert PASSWORD.strip() not in page


def test_delete_removes_the_credential(signed_in: Signed, dash: Dashboard) -> None:
    client, token = signed_in
    mine = _stored(dash, "acme", "Old account", "old@example.com")
    done = client.post(
        f"{PAGE}/{mine.credential_id}/delete", data={"csrf_token": token}, follow_redirects=False
    )
    assert done.status_code == 303
    page = client.get(done.headers["location"]).text
    assert "Credential deleted." in page and "Old account" not in page
    assert _vault(dash).page("acme", 10) == []
    again = client.post(f"{PAGE}/{mine.credential_id}/delete", data={"csrf_token": token})
    assert again.status_code == 404


def test_another_customers_credential_is_not_listed_and_not_found_on_delete(
    dash: Dashboard,
) -> None:
    theirs = _stored(dash, "globex", "Their account", "them@globex.test")
    with dash.client() as client:
        token = sign_in(client, dash.key)
        assert "Their account" not in client.get(PAGE).text
        for credential_id in (theirs.credential_id, "cred_nope"):
            gone = client.post(f"{PAGE}/{credential_id}/delete", data={"csrf_token": token})
            assert gone.status_code == 404, credential_id
            assert "Credential not found" in gone.text and "them@globex.test" not in gone.text
            assert PASSWORD.strip() not in gone.text
    assert _vault(dash).get("globex", theirs.credential_id).name == "Their account"


def test_the_navigation_leads_to_credentials(signed_in: Signed) -> None:
    client, _token = signed_in
    assert '<a href="/dashboard/credentials">Credentials</a>' in client.get("/dashboard/runs").text
    page = client.get(PAGE).text
    assert '<a href="/dashboard/credentials" aria-current="page">Credentials</a>' in page
