"""Runs: one persona session per persona, in parallel, each on its own browser profile.

A run is picked up when it is created (or, after a restart, from the store: every queued and
running run resumes). Each persona session leases a profile from the fleet, opens an Understudy
unattended session pinned to that profile's device with `allowedOrigins` = the target's origin,
and runs the agent loop. When the browser is lost the session starts a new *generation* on a
fresh profile: the reactions of every generation are kept, the messages of the lost one are
dropped from the model's context, and the model is told its `prior_reactions`. After
`max_generations` the session fails with the reason and the run still completes. A restart of
the service is handled the same way: a session that was running resumes as a new generation.

When a persona finishes, its report is written; when the last one does, the aggregate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from synthetic_users._fleet._base import FleetError
from synthetic_users._llm._base import PersonaProfile, PriorReaction
from synthetic_users._loop import (
    BrowserLost,
    Finish,
    Generation,
    LoopCancelled,
    ModelGaveUp,
    PersonaLoop,
    Recorder,
    Screenshots,
)
from understudy_connector import ProblemError, UnderstudyError

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthetic_users._fleet._base import Fleet, Profile
    from synthetic_users._llm._base import Model
    from understudy_connector import AsyncClient

log = logging.getLogger("synthetic_users.orchestrator")

ACQUIRE_TIMEOUT_S = 120.0


class RunStore(Recorder, Protocol):
    """What the orchestrator needs from the service's store."""

    def resumable_runs(self) -> list[str]:
        """Queued and running runs, oldest first."""
        ...

    def run_plan(self, run_id: str) -> dict[str, Any]:
        """`{customer, target_url, task, turn_budget, model, status}` of a run."""
        ...

    def run_sessions(self, run_id: str) -> list[dict[str, Any]]:
        """Its persona sessions: `{session_id, persona, status, generation, next_turn}`."""
        ...

    def prior_reactions(self, session_id: str) -> list[dict[str, Any]]: ...

    def mark_run(self, run_id: str, status: str) -> None: ...

    def mark_session(
        self,
        session_id: str,
        status: str,
        *,
        reason: str | None = None,
        generation: int | None = None,
        device_id: str | None = None,
        understudy_session_id: str | None = None,
    ) -> None: ...


class Reports(Protocol):
    def write_session(
        self, run_id: str, session_id: str, finish: Finish | None, reason: str
    ) -> None:
        """Write the persona session's transcript, report and screenshots index."""
        ...

    def write_aggregate(self, run_id: str) -> None: ...


@dataclass(frozen=True)
class OrchestratorSettings:
    max_generations: int = 3
    profile_state_prefix: str = "synthetic-users"


class Orchestrator:
    """Owns the asyncio tasks of every active run."""

    def __init__(
        self,
        store: RunStore,
        fleet: Fleet,
        understudy: AsyncClient,
        model_for: Callable[[str | None], Model],
        screenshots: Screenshots,
        reports: Reports,
        settings: OrchestratorSettings | None = None,
    ) -> None:
        self._store = store
        self._fleet = fleet
        self._understudy = understudy
        self._model_for = model_for
        self._screenshots = screenshots
        self._reports = reports
        self._settings = settings or OrchestratorSettings()
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._closing = False

    async def start(self) -> list[str]:
        """Resume every queued and running run; returns their ids."""
        resumed = self._store.resumable_runs()
        for run_id in resumed:
            self.submit(run_id)
        return resumed

    def submit(self, run_id: str) -> None:
        """Start a run's work (idempotent: a run already running is left alone)."""
        if self._closing or run_id in self._runs:
            return
        task = asyncio.get_running_loop().create_task(self._run(run_id), name=f"run {run_id}")
        self._runs[run_id] = task
        task.add_done_callback(lambda _: self._runs.pop(run_id, None))

    async def cancel(self, run_id: str) -> None:
        """Stop a run's sessions now (the store already says cancelled); partial reports stay."""
        task = self._runs.get(run_id)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait(self, run_id: str) -> None:
        task = self._runs.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def close(self) -> None:
        """Stop every run without marking it: a restart resumes them."""
        self._closing = True
        tasks = list(self._runs.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, run_id: str) -> None:
        plan = self._store.run_plan(run_id)
        if plan["status"] in {"completed", "cancelled", "failed"}:
            return
        self._store.mark_run(run_id, "running")
        sessions = [
            s for s in self._store.run_sessions(run_id) if s["status"] in {"queued", "running"}
        ]
        try:
            await asyncio.gather(*(self._persona(run_id, plan, s) for s in sessions))
        except asyncio.CancelledError:
            if self._closing:
                raise  # the service is stopping: the run resumes on the next start
            self._store.mark_run(run_id, "cancelled")
            self._write_aggregate(run_id)
            raise
        if self._store.is_cancelled(run_id):
            self._store.mark_run(run_id, "cancelled")
        else:
            self._store.mark_run(run_id, "completed")
        self._write_aggregate(run_id)

    def _write_aggregate(self, run_id: str) -> None:
        try:
            self._reports.write_aggregate(run_id)
        except Exception:
            log.exception("the aggregate report of run %s could not be written", run_id)

    async def _persona(self, run_id: str, plan: dict[str, Any], row: dict[str, Any]) -> None:
        session_id: str = row["session_id"]
        persona = _persona(row["persona"])
        model = self._model_for(plan.get("model"))
        generation = int(row["generation"])
        if row["status"] == "running":
            generation += 1  # it was running when the service stopped: that generation is lost
        finish: Finish | None = None
        reason = ""
        status = "failed"
        try:
            while True:
                if generation > self._settings.max_generations:
                    reason = (
                        f"the browser was lost {generation - 1} times "
                        f"(at most {self._settings.max_generations} generations)"
                    )
                    break
                try:
                    finish = await self._generation(
                        run_id, plan, session_id, persona, model, generation
                    )
                    status, reason = "completed", finish.summary
                    break
                except BrowserLost as exc:
                    log.warning(
                        "session %s generation %d lost its browser: %s", session_id, generation, exc
                    )
                    reason = f"browser lost: {exc}"
                    generation += 1
                except FleetError as exc:
                    reason = f"no browser: {exc}"
                    break
                except ModelGaveUp as exc:
                    reason = str(exc)
                    break
                except LoopCancelled:
                    status, reason = "cancelled", "the run was cancelled"
                    break
        except asyncio.CancelledError:
            if not self._closing:
                self._store.mark_session(session_id, "cancelled", reason="the run was cancelled")
                self._write_session(run_id, session_id, None, "the run was cancelled")
            raise
        self._store.mark_session(session_id, status, reason=reason)
        self._write_session(run_id, session_id, finish, reason)

    def _write_session(
        self, run_id: str, session_id: str, finish: Finish | None, reason: str
    ) -> None:
        try:
            self._reports.write_session(run_id, session_id, finish, reason)
        except Exception:
            log.exception("the report of session %s could not be written", session_id)

    async def _generation(
        self,
        run_id: str,
        plan: dict[str, Any],
        session_id: str,
        persona: PersonaProfile,
        model: Model,
        generation: int,
    ) -> Finish:
        profile = await self._fleet.acquire(session_id, timeout_s=ACQUIRE_TIMEOUT_S)
        broken = False
        try:
            origin = _origin(plan["target_url"])
            understudy_session = self._understudy.session(
                allowed_origins=[origin],
                profile_state_key=_profile_key(self._settings, profile),
                device_id=profile.device_id,
            )
            try:
                await understudy_session.open()
            except (ProblemError, UnderstudyError) as exc:
                broken = True
                raise BrowserLost(
                    f"could not open a session on {profile.device_id}: {exc}"
                ) from exc
            self._store.mark_session(
                session_id,
                "running",
                generation=generation,
                device_id=profile.device_id,
                understudy_session_id=str(understudy_session.id),
            )
            try:
                progress = self._store.run_sessions(run_id)
                next_turn = next(s["next_turn"] for s in progress if s["session_id"] == session_id)
                gen = Generation(
                    run_id=run_id,
                    session_id=session_id,
                    persona=persona,
                    task=plan["task"],
                    target_url=plan["target_url"],
                    turn_budget=int(plan["turn_budget"]),
                    generation=generation,
                    next_turn=int(next_turn),
                    prior_reactions=[
                        PriorReaction(r["step"], r["sentiment"], r["note"], r["url"])
                        for r in self._store.prior_reactions(session_id)
                    ],
                )
                loop = PersonaLoop(model, understudy_session, self._store, self._screenshots)
                return await loop.run(gen)
            except BrowserLost:
                broken = True
                raise
            finally:
                with contextlib.suppress(Exception):
                    await understudy_session.close()
        finally:
            broken = broken or not self._fleet.alive(profile)
            await self._fleet.release(profile, broken=broken)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _profile_key(settings: OrchestratorSettings, profile: Profile) -> str:
    """Names the browser state a session expects: one fresh state per launch of a profile."""
    return f"{settings.profile_state_prefix}/{profile.device_id}#{profile.generation}"


def _persona(data: dict[str, Any]) -> PersonaProfile:
    return PersonaProfile(
        name=data["name"],
        background=data.get("background", ""),
        goals=tuple(data.get("goals", ())),
        digital_literacy=data.get("digital_literacy", "medium"),
        patience=data.get("patience", "medium"),
        device=data.get("device", "desktop"),
        locale=data.get("locale", "en-US"),
    )
