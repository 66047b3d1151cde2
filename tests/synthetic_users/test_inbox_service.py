"""The inbox as the service runs it: settings, start and stop with `RunServices`, and the address
in the API's session views."""

from __future__ import annotations

import asyncio
import smtplib
import socket
from email.message import EmailMessage
from typing import TYPE_CHECKING

import pytest
from litestar.testing import AsyncTestClient

from synthetic_users._api import create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._config import ConfigError, Settings, load_settings
from synthetic_users._inbox import Mailbox
from synthetic_users._service import RunServices, ServiceConfigError
from synthetic_users._store import NewRun, Store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(tmp_path / "su.db")
    yield store
    store.close()


def services(tmp_path: Path, store: Store, **settings: object) -> RunServices:
    extension = tmp_path / "extension"
    extension.mkdir(exist_ok=True)
    (extension / "manifest.json").write_text("{}")
    config = Settings(
        data_dir=tmp_path,
        understudy_operator_token="op",  # noqa: S106 - a test value
        extension_dir=extension,
        **settings,  # type: ignore[arg-type]
    )
    return RunServices(config, store, DirectoryStore(tmp_path / "artifacts"))


def a_run(store: Store) -> tuple[str, str]:
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url="http://127.0.0.1:9/",
            task="sign up",
            turn_budget=5,
            model="heuristic",
            personas=[
                {
                    "name": "Ada",
                    "background": "",
                    "goals": [],
                    "digital_literacy": "medium",
                    "patience": "medium",
                    "device": "desktop",
                    "locale": "en-US",
                }
            ],
            request_hash="h",
        ),
    )
    session_id = store.sessions(run.run_id)[0].session_id
    store.start_session(session_id)
    return run.run_id, session_id


def test_the_inbox_settings_have_embedded_defaults_and_are_checked() -> None:
    defaults = load_settings({})
    assert (defaults.smtp_host, defaults.smtp_port) == ("127.0.0.1", 2525)
    assert defaults.inbox_domain == "inbox.localhost"
    assert defaults.inbox_max_bytes == 1024 * 1024
    chosen = load_settings(
        {
            "SYNTHETIC_USERS_SMTP_HOST": "0.0.0.0",  # noqa: S104 - a parsed value, not bound
            "SYNTHETIC_USERS_SMTP_PORT": "0",
            "SYNTHETIC_USERS_INBOX_DOMAIN": "Mail.Example.TEST.",
            "SYNTHETIC_USERS_INBOX_MAX_BYTES": "2048",
        }
    )
    assert (chosen.smtp_port, chosen.inbox_domain, chosen.inbox_max_bytes) == (
        0,
        "mail.example.test",
        2048,
    )
    for variable, value in (
        ("SYNTHETIC_USERS_SMTP_PORT", "70000"),
        ("SYNTHETIC_USERS_INBOX_DOMAIN", "not a domain"),
        ("SYNTHETIC_USERS_INBOX_MAX_BYTES", "10"),
    ):
        with pytest.raises(ConfigError, match=variable):
            load_settings({variable: value})


async def test_the_service_starts_the_smtp_server_and_stops_it(
    tmp_path: Path, store: Store
) -> None:
    with socket.socket() as probe:  # a free port for the configured one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    svc = services(tmp_path, store, smtp_port=port, inbox_domain="mail.test")
    await svc._start_inbox()
    try:
        assert svc.inbox_port == port
        _, session_id = a_run(store)
        address = Mailbox(store, "mail.test").address_for(session_id)
        msg = EmailMessage()
        msg["From"] = "shop@x.test"
        msg["Subject"] = "hello"
        msg.set_content("hi")

        def send() -> None:
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
                client.send_message(msg, to_addrs=[address])

        await asyncio.to_thread(send)
        assert [m.subject for m in Mailbox(store, "mail.test").messages(session_id)] == ["hello"]
    finally:
        await svc._stop_inbox()
    assert svc.inbox_port is None
    with pytest.raises(ConnectionRefusedError):
        await asyncio.to_thread(smtplib.SMTP, "127.0.0.1", port, timeout=5)


async def test_port_zero_turns_the_inbox_off(tmp_path: Path, store: Store) -> None:
    svc = services(tmp_path, store, smtp_port=0)
    await svc._start_inbox()
    assert svc.inbox_port is None and svc._mailbox is None


async def test_a_taken_smtp_port_stops_the_service_with_the_setting_to_change(
    tmp_path: Path, store: Store
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        svc = services(tmp_path, store, smtp_port=taken.getsockname()[1])
        with pytest.raises(ServiceConfigError, match="SYNTHETIC_USERS_SMTP_PORT"):
            await svc._start_inbox()


# The API's handlers declare path parameters in Litestar's older inferred style (not this test's
# concern); the warning is raised while the app is built.
@pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning")
async def test_the_session_views_show_the_inbox_address_once_assigned(
    tmp_path: Path, store: Store
) -> None:
    run_id, session_id = a_run(store)
    key = store.create_key("acme")
    app = create_app(store, DirectoryStore(tmp_path / "artifacts"))
    async with AsyncTestClient(app) as client:
        headers = {"Authorization": f"Bearer {key}"}
        before = await client.get(f"/runs/{run_id}/sessions/{session_id}", headers=headers)
        assert before.status_code == 200 and "inbox_address" not in before.json()
        address = Mailbox(store, "inbox.localhost").address_for(session_id)
        detail = await client.get(f"/runs/{run_id}/sessions/{session_id}", headers=headers)
        assert detail.json()["inbox_address"] == address
        run = await client.get(f"/runs/{run_id}", headers=headers)
        assert run.json()["sessions"][0]["inbox_address"] == address
