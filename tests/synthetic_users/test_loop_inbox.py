"""The inbox actions through the persona loop: a scripted model, a fake Understudy session, and
the real mailbox (and SMTP server) over a real store."""

from __future__ import annotations

import asyncio
import smtplib
from email import policy
from email.message import EmailMessage
from typing import TYPE_CHECKING

import pytest

from synthetic_users._inbox import InboxServer, Mailbox, ParsedMail
from synthetic_users._llm._base import Decision, PersonaProfile, ScriptedModel, ToolCall
from synthetic_users._llm._heuristic import persona_data
from synthetic_users._llm._prompt import system_prompt
from synthetic_users._loop import Generation, PersonaLoop
from synthetic_users._orchestrator import Orchestrator
from synthetic_users._store import NewRun, Store

from ._fakes import FakeSession, MemoryRecorder, failed, snapshot
from .test_orchestrator import FakeFleet, FakeUnderstudy, Published

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SITE = "http://127.0.0.1:9"
HOME = snapshot(f"{SITE}/", "Shop", [{"ref": "g1e1", "role": "link", "name": "Sign up"}])
CONFIRMED = snapshot(
    f"{SITE}/confirm?t=abc", "Confirmed", [{"ref": "g1e2", "role": "heading", "name": "Thanks"}]
)


def call(name: str, ease: int = 5, **arguments: object) -> Decision:
    return Decision(ToolCall(name, {**arguments, "ease": ease}))


FINISH = call("finish", success=True, summary="done")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(tmp_path / "su.db")
    yield store
    store.close()


def new_session(store: Store) -> str:
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url=f"{SITE}/",
            task="sign up",
            turn_budget=10,
            model="scripted",
            personas=[{"name": "Ada"}],
            request_hash="h",
        ),
    )
    session_id = store.sessions(run.run_id)[0].session_id
    store.start_session(session_id)
    return session_id


def generation(session_id: str, email: str, budget: int = 10) -> Generation:
    return Generation(
        run_id="run-1",
        session_id=session_id,
        persona=PersonaProfile(name="Ada Lovelace", email=email),
        task="sign up",
        target_url=f"{SITE}/",
        turn_budget=budget,
        generation=1,
        next_turn=1,
    )


async def no_sleep(_: float) -> None:
    return None


def persona_loop(
    model: ScriptedModel, session: FakeSession, rec: MemoryRecorder, mailbox: Mailbox | None
) -> PersonaLoop:
    return PersonaLoop(model, session, rec, rec, sleep=no_sleep, inbox=mailbox)  # type: ignore[arg-type]


def parsed(subject: str, text: str, links: tuple[str, ...] = ()) -> ParsedMail:
    return ParsedMail("orders@shop.example", subject, text, links)


async def test_read_inbox_lists_sender_subject_text_and_numbered_links(store: Store) -> None:
    session_id = new_session(store)
    mailbox = Mailbox(store, "inbox.localhost")
    own = mailbox.address_for(session_id)
    mailbox.deliver(
        session_id,
        parsed(
            "Confirm your account",
            f"Hi {own}, confirm below. Copy sent to boss@corp.example and orders@shop.example.",
            (f"{SITE}/confirm?t=abc", "https://tracker.example/x"),
        ),
        300,
    )
    model = ScriptedModel([call("read_inbox"), FINISH])
    rec = MemoryRecorder()
    await persona_loop(model, FakeSession({f"{SITE}/": HOME}), rec, mailbox).run(
        generation(session_id, own)
    )
    seen = model.requests[1].observation.last_outcome
    assert seen is not None and seen.ok
    assert "From orders@shop.example" in seen.summary
    assert "'Confirm your account'" in seen.summary
    assert f"link 1: {SITE}/confirm?t=abc" in seen.summary
    assert "link 2: https://tracker.example/x" in seen.summary
    # Only the sender's and the persona's own address are shown; any other is not.
    assert own in seen.summary and "boss@corp.example" not in seen.summary
    assert "[an email address]" in seen.summary
    # The tools offered include the inbox actions, from the spec's catalogue.
    offered = {t.name for t in model.requests[0].tools}
    assert {"read_inbox", "wait_for_email"} <= offered
    assert rec.turns[session_id][0]["action"] == {"name": "read_inbox", "arguments": {"ease": 5}}


async def test_an_empty_inbox_says_so(store: Store) -> None:
    session_id = new_session(store)
    mailbox = Mailbox(store, "inbox.localhost")
    own = mailbox.address_for(session_id)
    model = ScriptedModel([call("read_inbox"), FINISH])
    await persona_loop(model, FakeSession({f"{SITE}/": HOME}), MemoryRecorder(), mailbox).run(
        generation(session_id, own)
    )
    seen = model.requests[1].observation.last_outcome
    assert seen is not None and seen.ok and "is empty" in seen.summary


async def test_wait_for_email_returns_mail_sent_over_smtp_while_waiting(store: Store) -> None:
    session_id = new_session(store)
    mailbox = Mailbox(store, "inbox.localhost")
    own = mailbox.address_for(session_id)
    server = InboxServer(mailbox, host="127.0.0.1", port=0, max_bytes=1 << 20)
    await server.start()
    try:
        msg = EmailMessage()
        msg["From"] = "Shop <orders@shop.example>"
        msg["Subject"] = "Your sign-in code"
        msg.set_content(f"Your code is 481516.\nOr open {SITE}/confirm?t=abc")

        def send() -> None:
            with smtplib.SMTP("127.0.0.1", server.port, timeout=10) as client:
                client.sendmail("orders@shop.example", [own], msg.as_bytes(policy=policy.SMTP))

        class SendsWhileWaiting(ScriptedModel):
            async def decide(self, request):  # type: ignore[no-untyped-def]
                decision = await super().decide(request)
                if decision.call.name == "wait_for_email":
                    # The mail arrives after the wait began (the loop runs it next).
                    asyncio.get_running_loop().call_later(
                        0.2, asyncio.ensure_future, asyncio.to_thread(send)
                    )
                return decision

        model = SendsWhileWaiting(
            [call("wait_for_email", timeout_s=20, subject_contains="code"), FINISH]
        )
        await persona_loop(model, FakeSession({f"{SITE}/": HOME}), MemoryRecorder(), mailbox).run(
            generation(session_id, own)
        )
    finally:
        await server.stop()
    seen = model.requests[1].observation.last_outcome
    assert seen is not None and seen.ok, seen
    assert "A new email arrived" in seen.summary
    assert "Your code is 481516." in seen.summary
    assert f"link 1: {SITE}/confirm?t=abc" in seen.summary


async def test_wait_for_email_times_out_cleanly_and_the_session_goes_on(store: Store) -> None:
    session_id = new_session(store)
    mailbox = Mailbox(store, "inbox.localhost")
    own = mailbox.address_for(session_id)
    mailbox.deliver(session_id, parsed("Welcome", "hello"), 100)
    model = ScriptedModel(
        [
            call("read_inbox"),  # the welcome mail is seen, so it is not "new" any more
            call("wait_for_email", timeout_s=1),
            call("wait_for_email", timeout_s=1, subject_contains="welcome"),
            FINISH,
        ]
    )
    rec = MemoryRecorder()
    finish = await persona_loop(model, FakeSession({f"{SITE}/": HOME}), rec, mailbox).run(
        generation(session_id, own)
    )
    assert finish.success
    for request in model.requests[2:4]:
        outcome = request.observation.last_outcome
        assert outcome is not None and not outcome.ok and outcome.code == "email_timeout"
    assert "'welcome' in its subject" in str(model.requests[3].observation.last_outcome)
    assert [t["outcome"]["code"] for t in rec.turns[session_id][1:3]] == ["email_timeout"] * 2


async def test_a_link_from_mail_is_followed_only_on_the_target_origin(store: Store) -> None:
    session_id = new_session(store)
    mailbox = Mailbox(store, "inbox.localhost")
    own = mailbox.address_for(session_id)
    elsewhere = "http://127.0.0.1:10/phish"  # same host, another port: another origin
    mailbox.deliver(
        session_id, parsed("Confirm", "see links", (f"{SITE}/confirm?t=abc", elsewhere)), 100
    )
    model = ScriptedModel(
        [
            call("read_inbox"),
            call("navigate", url=elsewhere),
            call("navigate", url=f"{SITE}/confirm?t=abc"),
            FINISH,
        ]
    )
    session = FakeSession({f"{SITE}/": HOME, f"{SITE}/confirm?t=abc": CONFIRMED})
    rec = MemoryRecorder()
    await persona_loop(model, session, rec, mailbox).run(generation(session_id, own))
    refused = model.requests[2].observation.last_outcome
    assert refused is not None and not refused.ok and refused.code == "link_off_site"
    assert "http://127.0.0.1:10" in refused.summary and SITE in refused.summary
    # The off-site link never reached the browser; the on-site one did.
    assert session.calls == [("navigate", f"{SITE}/"), ("navigate", f"{SITE}/confirm?t=abc")]
    assert rec.turns[session_id][3]["observation"]["url"] == f"{SITE}/confirm?t=abc"


async def test_understudys_origin_refusal_is_explained_in_the_outcome(store: Store) -> None:
    session_id = new_session(store)
    model = ScriptedModel([call("navigate", url="https://elsewhere.example/"), FINISH])
    session = FakeSession({f"{SITE}/": HOME})
    session.fail["navigate"] = failed("navigate", "origin_not_allowed", "not allowed")
    session.url = f"{SITE}/"
    # The first navigate (to the target) would consume the failure: fail the persona's only.
    original = session.navigate

    async def navigate(url: str):  # type: ignore[no-untyped-def]
        if url == f"{SITE}/":
            session.calls.append(("navigate", url))
            session.url = url
            return session._result("navigate")
        return await original(url)

    session.navigate = navigate  # type: ignore[method-assign]
    await persona_loop(model, session, MemoryRecorder(), None).run(generation(session_id, ""))
    outcome = model.requests[1].observation.last_outcome
    assert outcome is not None and outcome.code == "origin_not_allowed"
    assert "not on the site under study" in outcome.summary and SITE in outcome.summary


async def test_without_an_inbox_the_inbox_actions_are_neither_offered_nor_run(
    store: Store,
) -> None:
    session_id = new_session(store)
    model = ScriptedModel([call("read_inbox"), FINISH])
    await persona_loop(model, FakeSession({f"{SITE}/": HOME}), MemoryRecorder(), None).run(
        generation(session_id, "")
    )
    assert not {"read_inbox", "wait_for_email"} & {t.name for t in model.requests[0].tools}
    outcome = model.requests[1].observation.last_outcome
    assert outcome is not None and outcome.code == "no_inbox"


def test_the_persona_gives_its_inbox_address_as_its_email() -> None:
    persona = PersonaProfile(name="Ada Lovelace", email="tok@inbox.localhost")
    assert persona_data(persona)["email"] == "tok@inbox.localhost"
    assert persona_data(PersonaProfile(name="Ada Lovelace"))["email"] == "ada-lovelace@example.test"
    prompt = system_prompt(persona, "sign up", f"{SITE}/", 10)
    assert "Your email address is tok@inbox.localhost" in prompt
    assert "read_inbox" in prompt and "wait_for_email" in prompt
    assert "email address" not in system_prompt(PersonaProfile(name="Bo"), "x", f"{SITE}/", 5)


async def test_the_orchestrator_gives_each_session_its_address_as_the_personas_email(
    store: Store,
) -> None:
    mailbox = Mailbox(store, "inbox.localhost")
    model = ScriptedModel([FINISH, FINISH])
    orchestrator = Orchestrator(
        store,
        FakeFleet(),
        FakeUnderstudy(),  # type: ignore[arg-type]
        lambda _run, _session: model,
        MemoryRecorder(),
        Published(),
        inbox=mailbox,
    )
    run, _ = store.create_run(
        "acme",
        NewRun(
            target_url=f"{SITE}/",
            task="sign up",
            turn_budget=5,
            model="scripted",
            personas=[{"name": "Ada"}, {"name": "Bo"}],
            request_hash="h2",
        ),
    )
    orchestrator.submit(run.run_id)
    await asyncio.wait_for(orchestrator.wait(run.run_id), 10)
    sessions = store.sessions(run.run_id)
    addresses = [str(s.inbox_address) for s in sessions]
    assert all(a.endswith("@inbox.localhost") for a in addresses)
    assert len(set(addresses)) == 2
    assert sorted(r.persona.email for r in model.requests) == sorted(addresses)
    # Their sessions ended, so their mailboxes are closed now.
    assert mailbox.recipient(addresses[0]) == (sessions[0].session_id, False)
