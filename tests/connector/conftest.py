"""Fixtures of the connector tests: a fake clock and clients wired to a scripted backend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from understudy_connector import AsyncClient, Client

from .scripted import (
    API_KEY,
    BASE_URL,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    ScriptedBackend,
    Step,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_client(clock: FakeClock) -> Iterator[MakeClient]:
    made: list[Client] = []

    def make(*steps: Step, **options: Any) -> tuple[Client, ScriptedBackend]:
        backend = ScriptedBackend(list(steps))
        client = Client(
            BASE_URL,
            API_KEY,
            transport=backend.transport(),
            sleep=clock.sleep,
            clock=clock,
            **options,
        )
        made.append(client)
        return client, backend

    yield make
    for client in made:
        client.close()


@pytest.fixture
async def make_async_client(clock: FakeClock) -> AsyncIterator[MakeAsyncClient]:
    made: list[AsyncClient] = []

    def make(*steps: Step, **options: Any) -> tuple[AsyncClient, ScriptedBackend]:
        backend = ScriptedBackend(list(steps))
        client = AsyncClient(
            BASE_URL,
            API_KEY,
            transport=backend.transport(),
            sleep=clock.async_sleep,
            clock=clock,
            **options,
        )
        made.append(client)
        return client, backend

    yield make
    for client in made:
        await client.aclose()
