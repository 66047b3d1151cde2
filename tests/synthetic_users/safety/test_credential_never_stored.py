"""A run that logs in leaves the password nowhere: every stored byte is scanned for it.

The real store (SQLite with its WAL), the real publisher (transcripts, reports), real
screenshots and the service's log output, around a scripted persona that logs in through a fake
Understudy session and a fake vault (Understudy's side, which holds the secret by design).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

from synthetic_users._artifacts import DirectoryStore
from synthetic_users._llm._base import Decision, ScriptedModel, ToolCall
from synthetic_users._orchestrator import Orchestrator
from synthetic_users._publish import Publisher
from synthetic_users._safety._credentials import Credentials, Keyring
from synthetic_users._safety._login import LoginBroker
from synthetic_users._service import Screenshots
from synthetic_users._store import NewRun, SessionState, Store

from .._fakes import FakeSession, snapshot
from ..test_orchestrator import FakeFleet

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import pytest

    from synthetic_users._llm._base import TurnRequest

SITE = "https://shop.example.test"
PASSWORD = "Zq7!vault-only-9d2f#pw"  # noqa: S105 - the secret the test hunts for
USERNAME = "shopper@example.test"
PASSWORD_FIELD = "g1e3"  # noqa: S105 - a snapshot ref, no secret
LOGIN = snapshot(
    f"{SITE}/login",
    "Log in",
    [
        {"ref": "g1e2", "role": "textbox", "name": "Email"},
        {"ref": "g1e3", "role": "textbox", "name": "Password"},
        {"ref": "g1e4", "role": "button", "name": "Log in"},
    ],
)
ACCOUNT = snapshot(
    f"{SITE}/account", "Your account", [{"ref": "g1e5", "role": "heading", "name": "Welcome back"}]
)


PERSONA = {
    "name": "Ada",
    "background": "Shops online every week.",
    "goals": ["see my orders"],
    "digital_literacy": "medium",
    "patience": "medium",
    "device": "desktop",
    "locale": "en-US",
}


def forms(secret: str) -> list[bytes]:
    """The password as it could leak: plain, base64 (both alphabets), URL-encoded, UTF-16."""
    raw = secret.encode()
    return [
        raw,
        base64.b64encode(raw),
        base64.urlsafe_b64encode(raw),
        quote(secret, safe="").encode(),
        quote_plus(secret).encode(),
        secret.encode("utf-16-le"),
    ]


@dataclass
class FakeVault:
    """Understudy's vault through the operator API: holds secrets until they are deleted."""

    secrets: dict[tuple[str, str], str] = field(default_factory=dict)
    puts: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    async def put_secret(self, tenant: str, name: str, value: str) -> None:
        self.puts.append(name)
        self.secrets[(tenant, name)] = value

    async def delete_secret(self, tenant: str, name: str) -> bool:
        self.deletes.append(name)
        return self.secrets.pop((tenant, name), None) is not None


@dataclass
class LoginSite(FakeSession):
    """Types what `fill_secret` names from the vault, as Understudy does, and keeps it here."""

    vault: FakeVault = field(default_factory=FakeVault)
    typed: dict[str, str] = field(default_factory=dict)

    async def fill(self, ref: str, value: str) -> Any:
        self.typed[ref] = value
        return await super().fill(ref, value)

    async def fill_secret(self, ref: str, secret_ref: str) -> Any:
        self.typed[ref] = self.vault.secrets[("synthetic-users", secret_ref.removeprefix("vault:"))]
        return await super().fill_secret(ref, secret_ref)


@dataclass
class Understudy:
    vault: FakeVault
    sessions: list[LoginSite] = field(default_factory=list)

    async def delete_session(self, session_id: object) -> None:
        return None

    def session(self, **_: Any) -> LoginSite:
        site = LoginSite(
            {f"{SITE}/": LOGIN, f"{SITE}/account": ACCOUNT},
            links={"g1e4": f"{SITE}/account"},
            vault=self.vault,
        )
        self.sessions.append(site)
        return site


def call(name: str, **arguments: object) -> Decision:
    return Decision(ToolCall(name, {**arguments, "ease": 5}), reason=f"I use {name}")


def every_stored_file(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            yield path, data
            if path.suffix == ".gz":
                yield path, gzip.decompress(data)


async def test_a_run_that_logs_in_stores_and_logs_no_trace_of_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    log_file = tmp_path / "service.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    try:
        store = Store.open(tmp_path / "data" / "su.db")
        artifacts = DirectoryStore(tmp_path / "data" / "artifacts")
        credentials = Credentials(store.db, Keyring.ephemeral())
        vault = FakeVault()
        understudy = Understudy(vault)
        model = ScriptedModel(
            [
                call("log_in", username_ref="g1e2", password_ref=PASSWORD_FIELD),
                call("click", ref="g1e4"),
                call("react", sentiment="satisfied", note="Logging in was quick.", ref="g1e5"),
                call("finish", success=True, summary="Logged in and saw my account."),
            ]
        )
        orchestrator = Orchestrator(
            store,
            FakeFleet(),
            understudy,  # type: ignore[arg-type]
            lambda _run, _session: model,
            Screenshots(store, artifacts),
            Publisher(store, artifacts),
            logins=LoginBroker(credentials, vault, "synthetic-users"),
        )
        record = credentials.create(
            "acme", name="Test shopper", username=USERNAME, password=PASSWORD, origin=SITE
        )
        run, _ = store.create_run(
            "acme",
            NewRun(
                target_url=f"{SITE}/",
                task="log in and look at your account",
                turn_budget=10,
                model="scripted",
                personas=[PERSONA],
                request_hash="h",
                credential_id=record.credential_id,
            ),
        )
        orchestrator.submit(run.run_id)
        await asyncio.wait_for(orchestrator.wait(run.run_id), 10)
        (session,) = store.sessions(run.run_id)
        store.close()
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()

    # It did log in: the user name was filled, the password typed from the vault ...
    assert session.status is SessionState.COMPLETED
    (site,) = understudy.sessions
    assert site.typed == {"g1e2": USERNAME, "g1e3": PASSWORD}
    assert ("fill_secret", ("g1e3", f"vault:su-{session.session_id}")) in site.calls
    # ... and the vault secret was deleted when the session ended.
    assert vault.puts == [f"su-{session.session_id}"] and vault.deletes == vault.puts
    assert vault.secrets == {}

    # The model saw that an account exists, by name and user name, never its password.
    requests: list[TurnRequest] = model.requests
    assert "Test shopper" in requests[0].system_prompt and USERNAME in requests[0].system_prompt
    assert "log_in" in {tool.name for tool in requests[0].tools}
    seen = repr(requests).encode()

    scanned = 0
    files = list(every_stored_file(tmp_path))
    names = {p.name for p, _ in files}
    assert {"su.db", "transcript.json.gz", "report.json", "report.md", "report.html"} <= names
    assert "step-0003.png" in names and "service.log" in names
    assert any(n.startswith("su.db-wal") for n in names) or "su.db" in names
    for path, data in [*files, (tmp_path / "caplog", caplog.text.encode()), (tmp_path, seen)]:
        scanned += len(data)
        for form in forms(PASSWORD):
            assert form not in data, f"the password ({form!r}) is in {path}"
    assert scanned > 10_000  # the database, the artifacts and the logs were really read
    print(f"scanned {scanned} bytes in {len(files)} files for {len(forms(PASSWORD))} forms")


async def test_without_a_credential_log_in_is_not_offered(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "su.db")
    artifacts = DirectoryStore(tmp_path / "artifacts")
    vault = FakeVault()
    model = ScriptedModel([call("log_in", username_ref="g1e2", password_ref=PASSWORD_FIELD)])
    orchestrator = Orchestrator(
        store,
        FakeFleet(),
        Understudy(vault),  # type: ignore[arg-type]
        lambda _run, _session: model,
        Screenshots(store, artifacts),
        Publisher(store, artifacts),
        logins=LoginBroker(Credentials(store.db, Keyring.ephemeral()), vault, "synthetic-users"),
    )
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url=f"{SITE}/",
            task="look around",
            turn_budget=3,
            model="scripted",
            personas=[PERSONA],
            request_hash="h",
        ),
    )
    orchestrator.submit(run.run_id)
    await asyncio.wait_for(orchestrator.wait(run.run_id), 10)
    assert "log_in" not in {tool.name for tool in model.requests[0].tools}
    (session,) = store.sessions(run.run_id)
    (first, *_) = store.turns(session.session_id)
    assert first["outcome"]["ok"] is False
    assert first["outcome"]["code"] == "no_credential"
    assert vault.puts == []


class LeakyVault(FakeVault):
    """A vault whose failure quotes what it was sent, as a careless transport error might."""

    async def put_secret(self, tenant: str, name: str, value: str) -> None:
        raise RuntimeError(f"could not store {value!r} as {name}")


async def test_a_vault_that_fails_quoting_the_password_leaks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = Store.open(tmp_path / "su.db")
    artifacts = DirectoryStore(tmp_path / "artifacts")
    credentials = Credentials(store.db, Keyring.ephemeral())
    vault = LeakyVault()
    model = ScriptedModel([call("log_in", username_ref="g1e2", password_ref=PASSWORD_FIELD)])
    orchestrator = Orchestrator(
        store,
        FakeFleet(),
        Understudy(vault),  # type: ignore[arg-type]
        lambda _run, _session: model,
        Screenshots(store, artifacts),
        Publisher(store, artifacts),
        logins=LoginBroker(credentials, vault, "synthetic-users"),
    )
    record = credentials.create(
        "acme", name="Test shopper", username=USERNAME, password=PASSWORD, origin=None
    )
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url=f"{SITE}/",
            task="log in",
            turn_budget=3,
            model="scripted",
            personas=[PERSONA],
            request_hash="h",
            credential_id=record.credential_id,
        ),
    )
    orchestrator.submit(run.run_id)
    await asyncio.wait_for(orchestrator.wait(run.run_id), 10)
    (session,) = store.sessions(run.run_id)
    first = store.turns(session.session_id)[0]
    assert first["outcome"]["code"] == "credential_unavailable"
    assert "RuntimeError" in first["outcome"]["summary"]
    # The model was told it failed, never what the vault said.
    assert "RuntimeError" in repr(model.requests[1].observation.last_outcome)
    store.close()
    stored = [data for _, data in every_stored_file(tmp_path)]
    for blob in [*stored, caplog.text.encode(), repr(model.requests).encode()]:
        for form in forms(PASSWORD):
            assert form not in blob
