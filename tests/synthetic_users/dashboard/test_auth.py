"""Signing in and out, the cookie's flags, and CSRF refusals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.synthetic_users.dashboard.conftest import form_token, sign_in

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import TestClient

    from tests.synthetic_users.dashboard.conftest import Dashboard


def _session_cookie(set_cookies: list[str]) -> str:
    found = [c for c in set_cookies if c.startswith("su_dashboard=")]
    assert len(found) == 1, set_cookies
    return found[0]


def _sign_in_response(client: TestClient[Litestar], key: str) -> list[str]:
    token = form_token(client.get("/dashboard/sign-in"))
    done = client.post(
        "/dashboard/sign-in", data={"csrf_token": token, "api_key": key}, follow_redirects=False
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/dashboard/runs"
    return done.headers.get_list("set-cookie")


def test_a_signed_out_page_redirects_to_sign_in_and_back(dash: Dashboard) -> None:
    with dash.client() as client:
        page = client.get("/dashboard/personas", follow_redirects=False)
        assert page.status_code == 302
        assert page.headers["location"] == "/dashboard/sign-in?next=/dashboard/personas"
        token = form_token(client.get(page.headers["location"]))
        done = client.post(
            "/dashboard/sign-in",
            data={"csrf_token": token, "api_key": dash.key, "next": "/dashboard/personas"},
            follow_redirects=False,
        )
        assert done.headers["location"] == "/dashboard/personas"
        assert "<h1>Personas</h1>" in client.get("/dashboard/personas").text


def test_the_session_cookie_is_httponly_lax_and_not_secure_on_loopback(dash: Dashboard) -> None:
    with dash.client() as client:
        cookie = _session_cookie(_sign_in_response(client, dash.key))
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags
    assert "samesite=lax" in flags
    assert "path=/dashboard" in flags
    assert "secure" not in flags  # plain http to 127.0.0.1: a browser would drop a Secure one


def _flags(cookie: str) -> list[str]:
    return [part.strip().lower() for part in cookie.split(";")]


def test_the_session_cookie_is_secure_anywhere_but_loopback(dash: Dashboard) -> None:
    with dash.client("https://dash.example") as client:
        assert "secure" in _flags(_session_cookie(_sign_in_response(client, dash.key)))
    with dash.client("http://dash.example") as client:
        # Plain http to a real name: even the sign-in form's cookie is Secure, so a browser
        # will not keep it and signing in needs TLS there.
        form = client.get("/dashboard/sign-in")
        assert all("secure" in _flags(c) for c in form.headers.get_list("set-cookie"))


def test_the_cookie_holds_neither_the_key_nor_what_the_database_holds(dash: Dashboard) -> None:
    with dash.client() as client:
        cookie = _session_cookie(_sign_in_response(client, dash.key))
    value = cookie.split(";")[0].split("=", 1)[1]
    assert dash.key not in cookie
    rows = dash.store.db.query("SELECT * FROM dashboard_sessions")
    assert len(rows) == 1
    stored = " ".join(str(v) for v in tuple(rows[0]))
    assert value not in stored and dash.key not in stored


def test_an_unknown_key_is_refused_beside_the_field(dash: Dashboard) -> None:
    with dash.client() as client:
        token = form_token(client.get("/dashboard/sign-in"))
        page = client.post("/dashboard/sign-in", data={"csrf_token": token, "api_key": "suk_nope"})
        assert page.status_code == 400
        assert 'id="api_key-error"' in page.text
        assert "unknown or has been revoked" in page.text
        assert 'aria-invalid="true"' in page.text
        assert not any(c.startswith("su_dashboard=") for c in page.headers.get_list("set-cookie"))
        assert "suk_nope" not in page.text  # a key is never echoed into a page


def test_sign_in_only_sends_people_on_to_dashboard_pages(dash: Dashboard) -> None:
    for bad in ("https://evil.example/", "//evil.example/x", "/runs", "/dashboard//x"):
        with dash.client() as client:
            token = form_token(client.get("/dashboard/sign-in"))
            done = client.post(
                "/dashboard/sign-in",
                data={"csrf_token": token, "api_key": dash.key, "next": bad},
                follow_redirects=False,
            )
            assert done.headers["location"] == "/dashboard/runs", bad


def test_a_sign_in_post_without_its_form_token_is_refused(dash: Dashboard) -> None:
    with dash.client() as client:
        client.get("/dashboard/sign-in")  # the pre-sign-in cookie is set, the token not sent
        page = client.post("/dashboard/sign-in", data={"api_key": dash.key})
        assert page.status_code == 403
        assert "Request refused" in page.text
        assert client.get("/dashboard/runs", follow_redirects=False).status_code == 302


def test_a_post_without_the_session_token_is_refused_and_changes_nothing(
    signed_in: tuple[TestClient[Litestar], str], dash: Dashboard
) -> None:
    client, token = signed_in
    for data in ({"name": "Eve"}, {"name": "Eve", "csrf_token": token[:-2] + "xx"}):
        page = client.post("/dashboard/personas", data=data)
        assert page.status_code == 403
        assert "<h1>Request refused</h1>" in page.text
    assert dash.store.list_personas("acme").items == []


def test_a_post_from_another_origin_is_refused_even_with_the_token(
    signed_in: tuple[TestClient[Litestar], str], dash: Dashboard
) -> None:
    client, token = signed_in
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "http://127.0.0.1:9999"},  # same site, another origin (another port)
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        page = client.post(
            "/dashboard/personas", data={"name": "Eve", "csrf_token": token}, headers=headers
        )
        assert page.status_code == 403, headers
        assert "sent from another site" in page.text
    assert dash.store.list_personas("acme").items == []
    same = client.post(
        "/dashboard/personas",
        data={"name": "Ann", "csrf_token": token},
        headers={"Origin": "http://127.0.0.1:8788", "Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert same.status_code == 303


def test_signing_out_ends_the_session_on_the_server(dash: Dashboard) -> None:
    with dash.client() as client:
        token = sign_in(client, dash.key)
        cookie = client.cookies.get("su_dashboard")
        done = client.post(
            "/dashboard/sign-out", data={"csrf_token": token}, follow_redirects=False
        )
        assert done.headers["location"] == "/dashboard/sign-in"
    with dash.client() as replay:
        # The old cookie, kept by someone who copied it, no longer signs anyone in.
        replay.cookies.set("su_dashboard", str(cookie))
        assert replay.get("/dashboard/runs", follow_redirects=False).status_code == 302


def test_revoking_the_api_key_ends_its_dashboard_sessions(
    signed_in: tuple[TestClient[Litestar], str], dash: Dashboard
) -> None:
    client, _token = signed_in
    assert client.get("/dashboard/runs").status_code == 200
    assert dash.store.revoke_key(dash.key)
    assert client.get("/dashboard/runs", follow_redirects=False).status_code == 302


def test_pages_forbid_framing_and_foreign_scripts(
    signed_in: tuple[TestClient[Litestar], str],
) -> None:
    client, _token = signed_in
    page = client.get("/dashboard/runs")
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp
    assert "form-action 'self'" in csp
    assert page.headers["cache-control"] == "no-store"


def test_the_dashboard_root_and_its_static_files(dash: Dashboard) -> None:
    with dash.client() as client:
        assert client.get("/dashboard", follow_redirects=False).headers["location"] == (
            "/dashboard/sign-in?next=/dashboard"
        )
        css = client.get("/dashboard/static/dashboard.css")
        assert css.headers["content-type"].startswith("text/css")
        assert ".skip-link" in css.text and "--ink" in css.text  # the reports' palette too
        assert (
            client.get("/dashboard/static/live.js")
            .headers["content-type"]
            .startswith("text/javascript")
        )
        for name in ("nope.css", "..%2f_auth.py", "_pages.py"):
            assert client.get(f"/dashboard/static/{name}").status_code == 404, name
        sign_in(client, dash.key)
        assert client.get("/dashboard", follow_redirects=False).headers["location"] == (
            "/dashboard/runs"
        )
