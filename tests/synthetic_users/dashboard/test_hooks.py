"""The webhook and usage pages: the API's validation beside the field, the secret shown once,
delivery logs with their attempts, usage totals by run, and what another customer cannot see."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from synthetic_users._store import NewRun
from synthetic_users._usage import usage_id
from synthetic_users._webhooks import DueDelivery, WebhookStore
from tests.synthetic_users.dashboard.conftest import field_errors, sign_in

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from synthetic_users._store import RunRecord
    from tests.synthetic_users.dashboard.conftest import Dashboard

Signed = tuple["TestClient[Litestar]", str]
HOOK = "https://hooks.example.com/su"
SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]{16,}")


def test_signed_out_the_webhook_and_usage_pages_redirect_to_sign_in(dash: Dashboard) -> None:
    hook, _secret = WebhookStore(dash.store).create("acme", HOOK, ["run.completed"])
    with dash.client() as client:
        for path in (
            "/dashboard/webhooks",
            f"/dashboard/webhooks/{hook.webhook_id}",
            "/dashboard/usage",
        ):
            page = client.get(path, follow_redirects=False)
            assert page.status_code == 302, path
            assert page.headers["location"] == f"/dashboard/sign-in?next={path}"


def test_the_webhook_forms_refuse_a_post_without_the_sessions_token(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    hook, _secret = WebhookStore(dash.store).create("acme", HOOK, ["run.completed"])
    for path, data in (
        ("/dashboard/webhooks", {"url": HOOK, "events": ["run.completed"]}),
        ("/dashboard/webhooks", {"url": HOOK, "events": ["run.completed"], "csrf_token": "x"}),
        (f"/dashboard/webhooks/{hook.webhook_id}/delete", {}),
        (f"/dashboard/webhooks/{hook.webhook_id}/delete", {"csrf_token": token[:-1]}),
    ):
        refused = client.post(path, data=data)
        assert refused.status_code == 403, path
        assert "Request refused" in refused.text
    # From another origin, even with the right token.
    forged = client.post(
        f"/dashboard/webhooks/{hook.webhook_id}/delete",
        data={"csrf_token": token},
        headers={"Origin": "https://attacker.test"},
    )
    assert forged.status_code == 403
    assert [w.url for w in WebhookStore(dash.store).list_webhooks("acme").items] == [HOOK]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "String should have at least 1 character"),
        ("http://hooks.example.com/su", "must use https"),
        ("https://10.0.0.7/su", "must be a public host"),
    ],
)
def test_the_apis_url_error_sits_beside_the_url_field(
    signed_in: Signed, dash: Dashboard, url: str, message: str
) -> None:
    client, token = signed_in
    page = client.post(
        "/dashboard/webhooks",
        data={"csrf_token": token, "url": url, "events": ["session.completed"]},
    )
    assert page.status_code == 400
    errors = field_errors(page.text)
    assert list(errors) == ["url"]
    assert message in errors["url"]
    assert 'aria-describedby="url-hint url-error" aria-invalid="true"' in page.text
    assert f'href="#url">Endpoint URL: {errors["url"]}' in page.text  # the summary links to it
    assert f'value="{url}"' in page.text  # what was typed is kept
    assert 'value="session.completed" checked' in page.text
    assert 'value="run.completed" checked' not in page.text
    assert WebhookStore(dash.store).list_webhooks("acme").items == []
    assert not SECRET.search(page.text)


def test_no_event_chosen_is_an_error_beside_the_events(signed_in: Signed) -> None:
    client, token = signed_in
    page = client.post("/dashboard/webhooks", data={"csrf_token": token, "url": HOOK})
    assert page.status_code == 400
    assert field_errors(page.text) == {"events": "choose at least one event"}


def test_the_signing_secret_is_shown_once_and_never_again(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, token = signed_in
    created = client.post(
        "/dashboard/webhooks",
        data={"csrf_token": token, "url": HOOK, "events": ["run.completed", "session.completed"]},
    )
    assert created.status_code == 201
    assert created.headers["cache-control"] == "no-store"
    shown = SECRET.findall(created.text)
    assert len(set(shown)) == 1
    (hook,) = WebhookStore(dash.store).list_webhooks("acme").items
    stored = dash.store.db.one(
        "SELECT secret FROM webhooks WHERE webhook_id = ?", (hook.webhook_id,)
    )
    assert stored is not None and stored["secret"] == shown[0]  # the very secret that signs
    assert "shown only this once" in created.text
    for path in ("/dashboard/webhooks", f"/dashboard/webhooks/{hook.webhook_id}"):
        later = client.get(path)
        assert later.status_code == 200, path
        assert HOOK in later.text
        assert not SECRET.search(later.text), path
        assert shown[0] not in later.text
    listing = client.get("/dashboard/webhooks").text
    assert "run.completed, session.completed" in listing
    assert '<span class="status status-active">active</span>' in listing


def test_delete_removes_the_endpoint(signed_in: Signed, dash: Dashboard) -> None:
    client, token = signed_in
    hook, _secret = WebhookStore(dash.store).create("acme", HOOK, ["run.completed"])
    done = client.post(
        f"/dashboard/webhooks/{hook.webhook_id}/delete",
        data={"csrf_token": token},
        follow_redirects=False,
    )
    assert done.status_code == 303
    page = client.get(done.headers["location"]).text
    assert "Webhook endpoint deleted." in page and HOOK not in page
    assert client.get(f"/dashboard/webhooks/{hook.webhook_id}").status_code == 404


def test_another_customers_webhook_is_not_found(dash: Dashboard) -> None:
    theirs, secret = WebhookStore(dash.store).create("globex", HOOK, ["run.completed"])
    with dash.client() as client:
        token = sign_in(client, dash.key)
        assert HOOK not in client.get("/dashboard/webhooks").text
        for path in (f"/dashboard/webhooks/{theirs.webhook_id}", "/dashboard/webhooks/whk_nope"):
            page = client.get(path)
            assert page.status_code == 404, path
            assert "Webhook not found" in page.text and HOOK not in page.text
        gone = client.post(
            f"/dashboard/webhooks/{theirs.webhook_id}/delete", data={"csrf_token": token}
        )
        assert gone.status_code == 404
    assert WebhookStore(dash.store).get("globex", theirs.webhook_id).url == HOOK
    assert secret


def _run(dash: Dashboard, task: str, *names: str, customer: str = "acme") -> RunRecord:
    new = NewRun(
        target_url="https://shop.test/",
        task=task,
        turn_budget=20,
        model="heuristic",
        personas=[{"name": n} for n in names],
        request_hash=f"h-{task}-{customer}",
    )
    run, _ = dash.store.create_run(customer, new)
    return run


def test_the_delivery_log_lists_each_delivery_with_its_attempts(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    webhooks = WebhookStore(dash.store)
    hook, secret = webhooks.create("acme", HOOK, ["run.completed"])
    run = _run(dash, "Buy a kettle", "Rosa")
    webhooks.on_run_ended(run)
    (due,) = webhooks.due(dash.store.clock() + 1)
    webhooks.record_attempt(
        due,
        attempted_at=1_764_590_400.0,
        duration_ms=812.4,
        status_code=503,
        error=None,
        outcome="retry",
        next_retry_at=1_764_590_430.0,
    )
    again = DueDelivery(**{**due.__dict__, "attempts": 1})
    webhooks.record_attempt(
        again,
        attempted_at=1_764_590_430.0,
        duration_ms=10_000.0,
        status_code=None,
        error="timed out after 10 s",
        outcome="retry",
        next_retry_at=None,
    )
    page = client.get(f"/dashboard/webhooks/{hook.webhook_id}")
    assert page.status_code == 200
    text = " ".join(re.sub(r"<[^>]+>", " ", page.text).split())
    assert "run.completed failed" in text
    assert f'href="/dashboard/runs/{run.run_id}"' in page.text
    assert "1 2025-12-01 12:00:00 UTC HTTP 503 812 ms 2025-12-01 12:00:30 UTC" in text
    assert "2 2025-12-01 12:00:30 UTC timed out after 10 s 10000 ms —" in text
    assert secret not in page.text


def _usage(dash: Dashboard, run: RunRecord, turns: int, tokens_in: int, tokens_out: int) -> None:
    """A usage event for each session of `run`, as the end-of-session hook writes it."""
    for n, session in enumerate(dash.store.sessions(run.run_id)):
        dash.store.db.execute(
            "INSERT INTO usage_events (usage_id, customer_id, run_id, session_id, "
            "browser_seconds, turns, input_tokens, output_tokens, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                usage_id(session.session_id),
                run.customer_id,
                run.run_id,
                session.session_id,
                90.0,
                turns,
                tokens_in,
                tokens_out,
                1_764_590_400.0 + n,
            ),
        )


def test_the_usage_page_shows_totals_and_each_session_and_filters_by_run(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    kettle = _run(dash, "Buy a kettle", "Rosa", "Sam")
    jacket = _run(dash, "Buy a jacket", "Dev")
    theirs = _run(dash, "Their run", "Other", customer="globex")
    _usage(dash, kettle, turns=12, tokens_in=1500, tokens_out=250)
    _usage(dash, jacket, turns=5, tokens_in=1000, tokens_out=100)
    _usage(dash, theirs, turns=99, tokens_in=99_999, tokens_out=9_999)

    def totals(html: str) -> dict[str, str]:
        return dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]+)</dd>", html))

    everything = client.get("/dashboard/usage").text
    assert totals(everything) == {
        "Persona sessions": "3",
        "Browser minutes": "4.50",
        "Turns": "29",
        "Input tokens": "4,000",
        "Output tokens": "600",
    }
    assert everything.count('data-label="Persona session"') == 3
    assert ">Rosa</a>" in everything and ">Dev</a>" in everything
    assert "Their run" not in everything and "Other" not in everything
    one = client.get(f"/dashboard/usage?run_id={kettle.run_id}").text
    assert totals(one)["Turns"] == "24" and totals(one)["Persona sessions"] == "2"
    assert ">Dev</a>" not in one
    assert f'<option value="{kettle.run_id}" selected>' in one
    # Another customer's run is no filter at all: an error beside the control, no numbers.
    refused = client.get(f"/dashboard/usage?run_id={theirs.run_id}")
    assert refused.status_code == 400
    assert list(field_errors(refused.text)) == ["run_id"]
    assert "99,999" not in refused.text and "<dt>" not in refused.text


def test_usage_comes_a_page_at_a_time(signed_in: Signed, dash: Dashboard) -> None:
    client, _token = signed_in
    run = _run(dash, "Many", *(f"P{i}" for i in range(10)))
    other = _run(dash, "More", *(f"Q{i}" for i in range(10)))
    last = _run(dash, "Last", *(f"R{i}" for i in range(3)))
    for r in (run, other, last):
        _usage(dash, r, turns=1, tokens_in=1, tokens_out=1)
    first = client.get("/dashboard/usage").text
    assert first.count('data-label="Persona session"') == 20
    older = re.search(r'href="(/dashboard/usage\?cursor=[^"]+)" rel="next"', first)
    assert older
    second = client.get(older[1].replace("&amp;", "&")).text
    assert second.count('data-label="Persona session"') == 3
    assert 'rel="next"' not in second
    assert "<dt>Persona sessions</dt><dd>23</dd>" in second  # the totals are of every page
    assert client.get("/dashboard/usage?cursor=not-ours").status_code == 400


def test_the_navigation_leads_to_webhooks_and_usage(signed_in: Signed) -> None:
    client, _token = signed_in
    page = client.get("/dashboard/usage").text
    assert '<a href="/dashboard/webhooks">Webhooks</a>' in page
    assert '<a href="/dashboard/usage" aria-current="page">Usage</a>' in page


def test_an_endpoint_that_answered_410_is_listed_disabled_with_the_reason(
    signed_in: Signed, dash: Dashboard
) -> None:
    client, _token = signed_in
    webhooks = WebhookStore(dash.store)
    hook, _secret = webhooks.create("acme", HOOK, ["run.completed"])
    webhooks.on_run_ended(_run(dash, "Buy a kettle", "Rosa"))
    (due,) = webhooks.due(dash.store.clock() + 1)
    webhooks.record_attempt(
        due,
        attempted_at=1_764_590_400.0,
        duration_ms=20.0,
        status_code=410,
        error=None,
        outcome="disable",
        next_retry_at=None,
    )
    for path in ("/dashboard/webhooks", f"/dashboard/webhooks/{hook.webhook_id}"):
        page = client.get(path).text
        assert '<span class="status status-disabled">disabled</span> the endpoint answered ' in page
        assert "410 Gone: it gets nothing more." in page
