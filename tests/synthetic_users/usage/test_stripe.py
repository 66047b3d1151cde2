"""The Stripe adapter, against a local server speaking Stripe's documented meter-event answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from synthetic_users._usage import BillerSettings, StripeBiller, UsageStore, meter_identifier

from .._http import LocalServer
from ..webhooks._helpers import open_store
from ._helpers import ended_session, installed
from ._stripe_wire import API_KEY, PATH, RATE_LIMITED, StripeWire, form

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from synthetic_users._store import Store

METERS = {"browser_minutes": "su_browser_minutes", "model_tokens": "su_model_tokens"}


@pytest.fixture
def wire() -> Iterator[tuple[StripeWire, LocalServer]]:
    stripe = StripeWire()
    with LocalServer(stripe) as server:
        yield stripe, server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "su.db")
    yield s
    s.close()


def biller(usage: UsageStore, server: LocalServer) -> StripeBiller:
    settings = BillerSettings(
        api_key=API_KEY, api_base=server.url, meters=METERS, retry_schedule=(0.01, 0.02, 0.04)
    )
    # Jitter 0: a retry is due at once, so each `run_once` is one more attempt.
    return StripeBiller(usage, settings, jitter=lambda: 0.0)


@pytest.fixture
async def billing(
    store: Store, wire: tuple[StripeWire, LocalServer]
) -> AsyncIterator[tuple[UsageStore, StripeBiller]]:
    usage = installed(store)
    usage.set_stripe_customer("acme", "cus_Acme123")
    b = biller(usage, wire[1])
    yield usage, b
    await b.stop()


async def test_each_meter_event_is_posted_in_stripes_request_shape(
    store: Store, wire: tuple[StripeWire, LocalServer], billing: tuple[UsageStore, StripeBiller]
) -> None:
    usage, b = billing
    session_id = ended_session(store)
    (record,) = usage.list_usage("acme").items
    assert await b.run_once() == 2
    stripe, server = wire
    assert [r.path for r in server.requests] == [PATH, PATH]
    by_name = {form(r)["event_name"]: r for r in server.requests}
    minutes = by_name["su_browser_minutes"]
    assert minutes.headers["authorization"] == f"Bearer {API_KEY}"
    assert minutes.headers["content-type"] == "application/x-www-form-urlencoded"
    key = meter_identifier(record.usage_id, "browser_minutes")
    assert minutes.headers["idempotency-key"] == key
    assert form(minutes) == {
        "event_name": "su_browser_minutes",
        "identifier": key,
        "timestamp": str(int(record.created_at)),
        "payload[stripe_customer_id]": "cus_Acme123",
        "payload[value]": "3",
    }
    tokens = form(by_name["su_model_tokens"])
    assert tokens["payload[value]"] == "3250"
    assert tokens["identifier"] == f"{record.usage_id}-model_tokens"
    assert record.usage_id.startswith("use_") and session_id
    assert all(p["status"] == "posted" for p in usage.postings(record.usage_id))
    assert usage.list_usage("acme").items[0].posted
    assert len(stripe.created) == 2


async def test_a_429_is_retried_with_the_same_idempotency_key(
    store: Store, wire: tuple[StripeWire, LocalServer], billing: tuple[UsageStore, StripeBiller]
) -> None:
    usage, b = billing
    stripe, server = wire
    stripe.script = [RATE_LIMITED]
    ended_session(store)
    (record,) = usage.list_usage("acme").items
    await b.run_once()  # one 429, one 200
    limited = [p for p in usage.postings(record.usage_id) if p["status"] == "pending"]
    assert len(limited) == 1 and "429" in limited[0]["last_error"]
    await b.run_once()
    assert all(p["status"] == "posted" for p in usage.postings(record.usage_id))
    keys = [r.headers["idempotency-key"] for r in server.requests]
    assert len(keys) == 3 and len(set(keys)) == 2  # the 429'd one was sent again, same key
    assert len(stripe.created) == 2


async def test_nothing_is_posted_twice_after_a_restart_nor_when_an_answer_was_lost(
    tmp_path: Path, wire: tuple[StripeWire, LocalServer]
) -> None:
    stripe, server = wire
    store = open_store(tmp_path / "billing.db")
    usage = installed(store)
    usage.set_stripe_customer("acme", "cus_Acme123")
    ended_session(store)
    first = biller(usage, server)
    assert await first.run_once() == 2
    await first.stop()
    store.close()

    store = open_store(tmp_path / "billing.db")  # the restart
    usage = UsageStore(store)
    again = biller(usage, server)
    assert await again.run_once() == 0
    assert len(server.requests) == 2
    # A crash between Stripe's answer and the "posted" mark: the row is pending again.
    store.db.execute("UPDATE stripe_meter_events SET status = 'pending' WHERE rowid = 1")
    assert await again.run_once() == 1
    await again.stop()
    replay = server.requests[-1]
    assert replay.headers["idempotency-key"] == server.requests[0].headers["idempotency-key"]
    assert len(stripe.created) == 2  # Stripe answered the replay; it counted nothing new
    assert store.db.one("SELECT COUNT(*) FROM stripe_meter_events WHERE status != 'posted'")[0] == 0  # type: ignore[index]
    store.close()


async def test_a_400_fails_that_meter_event_for_good(
    store: Store, wire: tuple[StripeWire, LocalServer], billing: tuple[UsageStore, StripeBiller]
) -> None:
    usage, b = billing
    stripe, server = wire
    stripe.missing_meters = {"su_model_tokens"}
    ended_session(store)
    (record,) = usage.list_usage("acme").items
    await b.run_once()
    await b.run_once()
    rows = {p["event_name"]: p for p in usage.postings(record.usage_id)}
    assert rows["su_browser_minutes"]["status"] == "posted"
    assert rows["su_model_tokens"]["status"] == "failed"
    assert "No active meter" in rows["su_model_tokens"]["last_error"]
    assert len(server.requests) == 2  # not retried
    assert not usage.list_usage("acme").items[0].posted


async def test_usage_waits_until_the_customer_has_a_stripe_customer_id(
    store: Store, wire: tuple[StripeWire, LocalServer]
) -> None:
    usage = installed(store)
    b = biller(usage, wire[1])
    ended_session(store)
    assert await b.run_once() == 0
    usage.set_stripe_customer("acme", "cus_Later1")
    assert await b.run_once() == 2
    await b.stop()
    assert {form(r)["payload[stripe_customer_id]"] for r in wire[1].requests} == {"cus_Later1"}


async def test_the_biller_task_posts_a_session_that_ends_while_it_runs(
    store: Store, wire: tuple[StripeWire, LocalServer], billing: tuple[UsageStore, StripeBiller]
) -> None:
    from ..webhooks._helpers import eventually

    usage, b = billing
    b.start()
    ended_session(store)
    b.wake()
    await eventually(lambda: usage.list_usage("acme").items[0].posted)
