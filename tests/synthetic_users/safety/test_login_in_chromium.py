"""A persona logs in on a real page in real Chromium, and the password is stored nowhere.

Real Understudy (in process), a real fleet of Chromium, the real store and publisher; a small
model that finds the fields by their labels. The local site is the witness that Chromium really
typed the password; then every byte the service stored, and its log output, are scanned.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import pytest

from synthetic_users._artifacts import DirectoryStore
from synthetic_users._llm._base import Decision, ToolCall
from synthetic_users._orchestrator import Orchestrator
from synthetic_users._publish import Publisher
from synthetic_users._safety._credentials import Credentials, Keyring
from synthetic_users._safety._login import LoginBroker
from synthetic_users._service import Screenshots
from synthetic_users._store import NewRun, SessionState, Store
from tests.e2e._skip import require_chromium
from tests.e2e.conftest import Hit, Reply, Site
from tests.synthetic_users.fleet.conftest import TENANT, cookie_site, extension_dist, stack

from .test_credential_never_stored import PERSONA, forms

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from synthetic_users._llm._base import TurnRequest
    from tests.synthetic_users.fleet.conftest import Stack

require_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.slow]
__all__ = ["cookie_site", "extension_dist", "stack"]  # fixtures of the fleet tests

PASSWORD = "Chr0mium-typed-9a4f!pw"  # noqa: S105 - the secret the test hunts for
USERNAME = "tester@shop.example.test"
LOGIN_PAGE = """<!doctype html><title>Log in</title>
<form method="post" action="/session">
  <label>Email <input name="email" type="email"></label>
  <label>Password <input name="password" type="password"></label>
  <button type="submit">Log in</button>
</form>"""


def _session(hit: Hit) -> Reply:
    form = parse_qs(hit.body.decode())
    if form.get("password") == [PASSWORD]:
        return Reply("<!doctype html><title>Signed in</title><h1>Welcome back</h1>")
    return Reply("<!doctype html><title>Wrong password</title><h1>Try again</h1>", status=401)


@pytest.fixture
def login_site() -> Iterator[Site]:
    running = Site({"/login": lambda _hit: Reply(LOGIN_PAGE), "/session": _session})
    try:
        yield running
    finally:
        running.close()


class LabelReader:
    """Logs in with the fields it finds by name, presses the button, then finishes."""

    label = "label-reader"

    def __init__(self) -> None:
        self.requests: list[TurnRequest] = []

    async def decide(self, request: TurnRequest) -> Decision:
        self.requests.append(request)
        refs = {(n.role, n.name): n.ref for n in request.observation.snapshot.nodes if n.ref}
        title = request.observation.title
        if request.must_finish or title in ("Signed in", "Wrong password"):
            done = title == "Signed in"
            return _call("finish", success=done, summary=f"The page said: {title}")
        if len(self.requests) == 1:
            return _call(
                "log_in", username_ref=refs[("textbox", "Email")], password_ref=_password(refs)
            )
        return _call("click", ref=refs[("button", "Log in")])


def _password(refs: dict[tuple[str, str], str]) -> str:
    return next(ref for (role, name), ref in refs.items() if name == "Password")


def _call(name: str, **arguments: object) -> Decision:
    return Decision(ToolCall(name, {**arguments, "ease": 6}))


async def test_a_persona_logs_in_in_chromium_and_no_stored_byte_holds_the_password(
    stack: Stack, login_site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    data = tmp_path / "su"
    store = Store.open(data / "su.db")
    artifacts = DirectoryStore(data / "artifacts")
    credentials = Credentials(store.db, Keyring.ephemeral())
    operator = await stack.operator()
    model = LabelReader()
    orchestrator = Orchestrator(
        store,
        await stack.fleet(max_browsers=1),
        await stack.consumer(),
        lambda _run, _session: model,
        Screenshots(store, artifacts),
        Publisher(store, artifacts),
        logins=LoginBroker(credentials, operator, TENANT),
    )
    record = credentials.create(
        "acme", name="Tester", username=USERNAME, password=PASSWORD, origin=login_site.origin
    )
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url=login_site.url("/login"),
            task="log in",
            turn_budget=6,
            model="label-reader",
            personas=[PERSONA],
            request_hash="h",
            credential_id=record.credential_id,
        ),
    )
    orchestrator.submit(run.run_id)
    await asyncio.wait_for(orchestrator.wait(run.run_id), 120)
    (session,) = store.sessions(run.run_id)
    store.close()

    # Chromium really typed it: the site received the password, and let the persona in.
    posted = [parse_qs(h.body.decode()) for h in login_site.hits if h.route == "/session"]
    assert posted == [{"email": [USERNAME], "password": [PASSWORD]}]
    assert session.status is SessionState.COMPLETED and session.failure_reason is None
    # The vault secret is gone from Understudy once the session ended.
    assert not await operator.delete_secret(TENANT, f"su-{session.session_id}")

    scanned = 0
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        blob = path.read_bytes()
        for content in (blob, gzip.decompress(blob)) if path.suffix == ".gz" else (blob,):
            scanned += len(content)
            for form in forms(PASSWORD):
                assert form not in content, f"the password ({form!r}) is in {path}"
    for form in forms(PASSWORD):
        assert form.decode("latin-1") not in caplog.text
        assert form not in repr(model.requests).encode()
    assert scanned > 10_000
    # The browser profile is wiped when its lease ends: no saved form data or password either.
    for path in (p for p in stack.root.rglob("*") if p.is_file()):
        assert not any(form in path.read_bytes() for form in forms(PASSWORD)), path
    print(f"scanned {scanned} stored bytes for {len(forms(PASSWORD))} forms of the password")
