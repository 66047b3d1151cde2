"""Turns stay one at a time per actor across nodes: the actor's row lock, never a blocked loop."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from understudy import _turns
from understudy._problems import ProblemError
from understudy._store.cluster import actor_key

if TYPE_CHECKING:
    from tests.backend.multinode.conftest import Nodes


async def _ticks_while(task: asyncio.Future[Any], seconds: float) -> int:
    """How many 10 ms sleeps the loop ran while `task` was pending (for `seconds`)."""
    ticks = 0
    end = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < end:
        await asyncio.sleep(0.01)
        assert not task.done(), "the turn ran while another node held its row"
        ticks += 1
    return ticks


async def test_a_turn_waits_for_a_row_another_node_holds_and_the_loop_keeps_running(
    nodes: Nodes, postgresql_url: str
) -> None:
    a = await nodes.start("a")
    with a.services.storage.transaction() as repos:
        repos.actors.lock("tenant", "acme", "")
    # Another node's turn, stopped half-way: it holds the tenant's row in an open transaction.
    with psycopg.connect(postgresql_url) as other:
        other.execute(
            "SELECT 1 FROM actors WHERE actor_key = %s FOR UPDATE", (actor_key("tenant", "acme"),)
        )
        turn = asyncio.ensure_future(a.services.coordinator("acme").create_attended("bot"))
        assert await _ticks_while(turn, 0.3) >= 10  # the loop ran on: the wait is awaited
        other.rollback()
        row = await asyncio.wait_for(turn, 5)
    assert row.status == "awaiting_attach"
    assert a.services.node is not None and a.services.node.lock_busy > 0


async def test_a_row_held_past_the_wait_answers_503_database_unavailable(
    nodes: Nodes, postgresql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await nodes.start("a")
    monkeypatch.setattr(_turns, "LOCK_WAIT_S", 0.2)
    with a.services.storage.transaction() as repos:
        repos.actors.lock("tenant", "acme", "")
    with psycopg.connect(postgresql_url) as other:
        other.execute(
            "SELECT 1 FROM actors WHERE actor_key = %s FOR UPDATE", (actor_key("tenant", "acme"),)
        )
        with pytest.raises(ProblemError) as refused:
            await a.services.coordinator("acme").create_attended("bot")
    assert (refused.value.status, refused.value.code) == (503, "database_unavailable")
    with a.services.storage.read() as repos:
        assert repos.sessions.listing(tenant="acme", ended=True) == []  # nothing was kept


async def test_turns_of_one_actor_on_two_nodes_all_land_once(nodes: Nodes) -> None:
    a = await nodes.start("a")
    b = await nodes.start("b")
    made = await asyncio.gather(
        *(
            node.services.coordinator("acme").create_attended(f"bot-{i}")
            for i in range(6)
            for node in (a, b)
        )
    )
    assert len({row.session_id for row in made}) == 12
    with a.services.storage.read() as repos:
        assert len(repos.sessions.listing(tenant="acme", ended=True)) == 12
