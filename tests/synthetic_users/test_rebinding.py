"""DNS rebinding: a target that resolved to a public address when the run was created, and to a
private one when it starts, fails the run before any browser is used."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from synthetic_users._llm._base import ScriptedModel
from synthetic_users._orchestrator import Orchestrator
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._store import RunState, SessionState, Store

from ._fakes import MemoryRecorder
from .api.conftest import RUN, StubResolver, running_api
from .test_orchestrator import HOME, FakeFleet, FakeUnderstudy, Published, call

if TYPE_CHECKING:
    from typing import Any

    from ._fakes import FakeSession


class ShopUnderstudy(FakeUnderstudy):
    """Sessions that show the orchestrator's fake home page at the API tests' target."""

    def session(self, **kwargs: Any) -> FakeSession:
        fake = super().session(**kwargs)
        fake.pages[str(RUN["target_url"])] = HOME
        return fake


if TYPE_CHECKING:
    from pathlib import Path


def orchestrator(store: Store, resolver: StubResolver) -> tuple[Orchestrator, FakeFleet]:
    fleet = FakeFleet()
    done = ScriptedModel([call("finish", success=True, summary="done")])
    return (
        Orchestrator(
            store,
            fleet,
            ShopUnderstudy(),  # type: ignore[arg-type]
            lambda _run, _session: done,
            MemoryRecorder(),
            Published(),
            target_refusal=TargetPolicy(resolver=resolver).refusal,
        ),
        fleet,
    )


async def test_a_target_rebound_to_a_private_address_fails_the_run_at_start(
    tmp_path: Path,
) -> None:
    async with running_api(tmp_path) as api:
        created = await api.create_run()
        assert created.status_code == 202  # public when the API checked
        run_id = created.json()["run_id"]
    store = Store.open(tmp_path / "su.db")
    resolver = StubResolver({"shop.example": ["10.0.0.7"]})  # private when the run starts
    runner, fleet = orchestrator(store, resolver)
    runner.submit(run_id)
    await asyncio.wait_for(runner.wait(run_id), 10)
    run = store.get_run(run_id)
    assert run.status is RunState.FAILED
    assert run.failure_reason == (
        "the target is not allowed when the run starts: the host name resolves to a private "
        "network address, which is not allowed"
    )
    assert [s.status for s in store.sessions(run_id)] == [SessionState.FAILED]
    assert fleet.launches == 0  # no browser was ever started for it
    assert resolver.asked == ["shop.example"]
    store.close()


async def test_a_target_still_public_at_start_runs(tmp_path: Path) -> None:
    async with running_api(tmp_path) as api:
        run_id = (await api.create_run()).json()["run_id"]
    store = Store.open(tmp_path / "su.db")
    runner, fleet = orchestrator(store, StubResolver())
    runner.submit(run_id)
    await asyncio.wait_for(runner.wait(run_id), 10)
    assert store.get_run(run_id).status is RunState.COMPLETED
    assert fleet.launches == 1
    store.close()
