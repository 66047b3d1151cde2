"""The start-a-run and persona forms: the API's validation, its errors beside each field."""

from __future__ import annotations

from typing import TYPE_CHECKING

from synthetic_users._dashboard._forms import FormErrors, RunForm
from tests.synthetic_users.dashboard.conftest import field_errors, form_token

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from tests.synthetic_users.dashboard.conftest import Dashboard

Signed = tuple["TestClient[Litestar]", str]


def _runs(dash: Dashboard) -> int:
    return len(dash.store.list_runs("acme").items)


def test_each_error_of_a_run_form_sits_beside_its_field(signed_in: Signed, dash: Dashboard) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/runs",
        data={
            "csrf_token": token,
            "target_url": "ftp://shop.example/",
            "task": "",
            "turn_budget": "lots",
            "inline-0-name": "Ann",
            "inline-0-locale": "not a tag",
            "inline-1-background": "Someone without a name",
        },
    )
    assert page.status_code == 400
    errors = field_errors(page.text)
    assert errors["target_url"] == "must be an absolute http(s) URL, like https://shop.example.com/"
    assert "at least 1 character" in errors["task"]
    assert errors["turn_budget"] == "must be a whole number from 1 to 200"
    assert errors["inline-0-locale"] == "must be a BCP 47 language tag, like en-GB"
    assert "at least 1 character" in errors["inline-1-name"]
    assert "inline-0-name" not in errors
    # What was typed is kept, and the summary links each error to its control.
    assert 'value="ftp://shop.example/"' in page.text
    assert '<a href="#inline-0-locale">Persona 1, Locale: must be a BCP 47' in page.text
    assert page.text.count('aria-invalid="true"') == len(errors)
    assert _runs(dash) == 0


def test_a_run_without_personas_says_so_at_the_personas(signed_in: Signed, dash: Dashboard) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/runs",
        data={"csrf_token": token, "target_url": "https://shop.example/", "task": "Buy"},
    )
    assert page.status_code == 400
    assert field_errors(page.text) == {
        "personas": "choose at least one saved persona or write one (at most 10 in all)"
    }
    assert _runs(dash) == 0


def test_a_saved_persona_deleted_meanwhile_is_named_at_the_checkboxes(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    gone = dash.store.create_persona("acme", {"name": "Gone"})
    dash.store.delete_persona("acme", gone.persona_id)
    page = client.post(
        "/dashboard/runs",
        data={
            "csrf_token": token,
            "target_url": "https://shop.example/",
            "task": "Buy",
            "saved": gone.persona_id,
        },
    )
    assert page.status_code == 400
    assert field_errors(page.text) == {"saved": "a chosen persona no longer exists; choose again"}


def test_a_valid_form_starts_the_run_once_and_opens_its_live_view(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    saved = dash.store.create_persona("acme", {"name": "Rosa", "digital_literacy": "low"})
    form = client.get("/dashboard/runs/new")
    assert "Rosa" in form.text
    key = form.text.split('name="idempotency_key" value="', 1)[1].split('"', 1)[0]
    data = {
        "csrf_token": token,
        "idempotency_key": key,
        "target_url": "https://shop.example/",
        "task": "Buy a rain jacket",
        "turn_budget": "12",
        "saved": saved.persona_id,
        "inline-0-name": "Sam",
        "inline-0-goals": "get it quickly\n\npay by card",
        "inline-0-device": "mobile",
    }
    first = client.post("/dashboard/runs", data=data, follow_redirects=False)
    assert first.status_code == 303
    again = client.post("/dashboard/runs", data=data, follow_redirects=False)
    assert again.headers["location"] == first.headers["location"]  # a double submit: one run
    (run, count), *rest = dash.store.list_runs("acme").items
    assert rest == [] and count == 2
    assert run.turn_budget == 12 and run.task == "Buy a rain jacket"
    personas = [s.persona for s in dash.store.sessions(run.run_id)]
    assert personas[0]["name"] == "Rosa" and personas[0]["persona_id"] == saved.persona_id
    assert personas[1]["goals"] == ["get it quickly", "pay by card"]
    assert personas[1]["device"] == "mobile"
    live = client.get(first.headers["location"])
    assert "<h1>Buy a rain jacket</h1>" in live.text
    assert "Rosa" in live.text and "Sam" in live.text


def test_add_another_persona_returns_the_form_one_fieldset_longer(signed_in: Signed) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/runs",
        data={"csrf_token": token, "task": "Kept", "inline-0-name": "Ann", "add_persona": "1"},
    )
    assert page.status_code == 200
    assert 'id="inline-1-name"' in page.text and 'id="inline-2-name"' not in page.text
    assert 'value="Ann"' in page.text and ">Kept</textarea>" in page.text
    assert field_errors(page.text) == {}


def test_every_api_pointer_of_a_persona_maps_to_its_control() -> None:
    form = RunForm.parse(
        {"saved": ["per_" + "1" * 32], "inline-0-name": ["A"], "inline-2-name": ["C"]}
    )
    errors = FormErrors()
    form.document(errors)
    assert not errors
    assert form.field_for("/personas/0/persona_id") == "saved"
    assert form.field_for("/personas/1/locale") == "inline-0-locale"
    assert form.field_for("/personas/2/goals/3") == "inline-2-goals"
    assert form.field_for("/personas/2/unknown") == "inline-2-name"
    assert form.field_for("/personas/9/name") is None
    assert form.field_for("/target_url") == "target_url"


def test_a_persona_form_shows_its_errors_beside_the_fields(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/personas",
        data={"csrf_token": token, "name": "x" * 81, "locale": "??", "patience": "endless"},
    )
    assert page.status_code == 400
    errors = field_errors(page.text)
    assert set(errors) == {"name", "locale", "patience"}
    assert errors["locale"] == "must be a BCP 47 language tag, like en-GB"
    assert dash.store.list_personas("acme").items == []


def test_a_persona_is_saved_listed_and_deleted(signed_in: Signed, dash: Dashboard) -> None:
    client, token = signed_in
    saved = client.post(
        "/dashboard/personas",
        data={"csrf_token": token, "name": "Lee <b>", "background": "Tester", "device": "mobile"},
    )
    assert "Persona saved." in saved.text
    assert "Lee &lt;b&gt;" in saved.text  # autoescaped
    (record,) = dash.store.list_personas("acme").items
    assert (record.persona["name"], record.persona["device"]) == ("Lee <b>", "mobile")
    token = form_token(saved)
    deleted = client.post(
        f"/dashboard/personas/{record.persona_id}/delete", data={"csrf_token": token}
    )
    assert "Persona deleted." in deleted.text
    assert dash.store.list_personas("acme").items == []
    again = client.post(
        f"/dashboard/personas/{record.persona_id}/delete", data={"csrf_token": token}
    )
    assert again.status_code == 404 and "Persona not found" in again.text
