"""Session creation statuses and the Session context manager, against the running backend."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import pytest

from tests.support.simdevice import Behaviour
from understudy.generated import models as wire
from understudy_connector import CapacityExhausted, Client, OriginConflict, ProfileConflict
from understudy_connector.generated.models import SessionTombstone

from .conftest import ORIGINS, WITHIN, answered, seen, socket_up, tombstoned

if TYPE_CHECKING:
    from uuid import UUID

    from .conftest import Live


async def test_a_first_creation_is_201_connected(live: Live) -> None:
    device = await live.device()
    created = await live.client().create_session(allowed_origins=ORIGINS, profile_state_key="p")
    assert created.status == "connected"
    assert created.device_id == "laptop-1"
    assert [e.status for e in live.http.creations()] == [201]
    assert [lease.session_id for lease in device.leases.values()] == [str(created.session_id)]


async def test_a_202_is_polled_until_the_session_is_connected(live: Live) -> None:
    device = await live.device(Behaviour(provision_delay_s=0.5))
    creating = asyncio.ensure_future(
        live.client().create_session(allowed_origins=ORIGINS, profile_state_key="p")
    )
    await device.wait_for(lambda: device.frames_of(wire.DeviceServerProvision), within=WITHIN)
    await live.advance(5)  # creation waits 5 s for provisioning, then answers 202
    created = await creating
    assert created.status == "connected"
    post, *polls = live.http.exchanges
    assert (post.method, post.status) == ("POST", 202)
    assert polls, "the connector polled the Location of the 202"
    assert {(e.method, e.path) for e in polls} == {("GET", f"/v1/sessions/{created.session_id}")}
    assert polls[-1].status == 200
    assert set(live.pace.delays) == {1.0}, "each poll waited the Retry-After of the 202"


async def test_a_replay_with_the_same_key_returns_the_same_session(live: Live) -> None:
    device = await live.device()
    client = live.client()
    key = uuid.uuid4()
    first = await client.create_session(
        allowed_origins=ORIGINS, profile_state_key="p", idempotency_key=key
    )
    again = await client.create_session(
        allowed_origins=ORIGINS, profile_state_key="p", idempotency_key=key
    )
    assert again.session_id == first.session_id
    assert [e.status for e in live.http.creations()] == [201, 200]
    assert len(device.leases) == 1, "one tab, not two"


async def test_no_device_then_one_online_retries_the_same_key_until_201(live: Live) -> None:
    device = await live.device(connect=False)
    offline = live.audit.when(answered(503, "no_device_available"))
    creating = asyncio.ensure_future(
        live.client().create_session(allowed_origins=ORIGINS, profile_state_key="p")
    )
    await seen(offline)
    await device.connect()  # the profile comes online
    created = await creating
    assert created.status == "connected"
    posts = live.http.creations()
    assert {e.status for e in posts[:-1]} == {503}
    assert posts[-1].status == 201
    keys = {e.headers["idempotency-key"] for e in posts}
    assert len(keys) == 1, "every attempt carries the same Idempotency-Key"
    assert len({str(e.body) for e in posts}) == 1, "and the same body"
    assert set(live.pace.delays) == {5.0}, "waited the Retry-After of no_device_available"


async def test_a_full_device_is_429_capacity_exhausted(live: Live) -> None:
    device = await live.device()
    client = live.client()
    for n, origin in enumerate(["https://a.example", "https://b.example"]):
        await client.create_session(allowed_origins=[origin], profile_state_key=f"p{n}")
    with pytest.raises(CapacityExhausted) as caught:
        await client.create_session(allowed_origins=["https://c.example"], profile_state_key="p3")
    assert (caught.value.status, caught.value.retry_after) == (429, 30.0)
    assert [e.status for e in live.http.creations()] == [201, 201, 429]
    assert len(device.leases) == 2


async def test_the_session_context_always_deletes(live: Live) -> None:
    device = await live.device()
    client = live.client()
    async with client.session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        await s.snapshot()
    with pytest.raises(RuntimeError, match="the consumer's own failure"):
        async with client.session(
            allowed_origins=["https://other.example"], profile_state_key="q"
        ) as failing:
            raise RuntimeError("the consumer's own failure")
    for session_id in (s.id, failing.id):
        assert await tombstoned(live, session_id)
        tombstone = await client.get_session(session_id)
        assert isinstance(tombstone, SessionTombstone)
        assert (tombstone.status, tombstone.reason) == ("closed", "deleted")
    deletes = [e for e in live.http.exchanges if e.method == "DELETE"]
    assert len(deletes) == 2
    assert device.leases == {}, "the device closed both tabs"


async def test_the_blocking_session_deletes_when_the_body_raises(live: Live) -> None:
    await live.device()
    ids: list[UUID] = []

    def consumer() -> None:
        with Client(live.url, live.api_key) as client:
            with client.session(allowed_origins=ORIGINS, profile_state_key="p") as s:
                ids.append(s.id)
                raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await asyncio.to_thread(consumer)
    assert await tombstoned(live, ids[0])


async def test_a_session_closed_with_wait_frees_its_device_for_the_next_one_at_once(
    live: Live,
) -> None:
    # The extension takes a moment to close the tab; until it acknowledges, the closing session
    # keeps its capacity and its origins on the device.
    await live.device(Behaviour(close_delay_s=0.3))
    client = live.client()
    first = await client.session(allowed_origins=ORIGINS, profile_state_key="p").open()
    await first.close()
    with pytest.raises((OriginConflict, ProfileConflict)):
        await client.create_session(allowed_origins=ORIGINS, profile_state_key="p")
    assert isinstance(await first.close(wait=True), SessionTombstone)

    second = await client.session(allowed_origins=ORIGINS, profile_state_key="p").open()
    ended = await second.close(wait=True)
    assert isinstance(ended, SessionTombstone)
    assert (ended.status, ended.reason) == ("closed", "deleted")
    third = await client.create_session(allowed_origins=ORIGINS, profile_state_key="p")
    assert third.status == "connected"
