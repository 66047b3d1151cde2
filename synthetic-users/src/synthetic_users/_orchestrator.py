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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit
from uuid import UUID

from synthetic_users._fleet._base import FleetError
from synthetic_users._llm._base import PersonaProfile, PriorReaction
from synthetic_users._llm._factory import close_model
from synthetic_users._loop import (
    BrowserLost,
    Finish,
    Generation,
    LoopCancelled,
    ModelGaveUp,
    PersonaLoop,
)
from synthetic_users._store import IllegalTransition, RunState, SessionState
from understudy_connector import UnderstudyError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from synthetic_users._fleet._base import Fleet, Profile
    from synthetic_users._inbox import Mailbox
    from synthetic_users._llm._base import Model
    from synthetic_users._loop import Screenshots
    from synthetic_users._safety._login import LoginBroker, SessionLogin
    from synthetic_users._store import RunRecord, SessionRecord, Store
    from understudy_connector import AsyncClient, AsyncSession

log = logging.getLogger("synthetic_users.orchestrator")

ACQUIRE_TIMEOUT_S = 120.0
CLOSE_WAIT_S = 10.0  # how long a session may take to close before its browser is wiped
BROWSER_WATCH_S = 0.25  # how often a generation checks that its browser process still runs


class Publisher(Protocol):
    """Writes the reports once a persona session, or the whole run, has ended."""

    def session_ended(self, run_id: str, session_id: str, model_label: str) -> None: ...

    def run_ended(self, run_id: str) -> None: ...


@dataclass(frozen=True)
class OrchestratorSettings:
    max_generations: int = 3
    profile_state_prefix: str = "synthetic-users"


class Orchestrator:
    """Owns the asyncio tasks of every active run; the store says what each run is."""

    def __init__(
        self,
        store: Store,
        fleet: Fleet,
        understudy: AsyncClient,
        model_for: Callable[[RunRecord, SessionRecord], Model],
        screenshots: Screenshots,
        publisher: Publisher,
        settings: OrchestratorSettings | None = None,
        *,
        inbox: Mailbox | None = None,
        target_refusal: Callable[[str], Awaitable[str | None]] | None = None,
        logins: LoginBroker | None = None,
    ) -> None:
        """`target_refusal(url)` says why a run's target is refused now (None: allowed).

        It is asked when each run starts, before any browser is used: the name may resolve
        elsewhere than when the API accepted it (DNS rebinding). By default every target is
        allowed; the service passes `TargetPolicy.refusal`.
        """
        self._store = store
        self._fleet = fleet
        self._understudy = understudy
        self._model_for = model_for
        self._screenshots = screenshots
        self._publisher = publisher
        self._settings = settings or OrchestratorSettings()
        self._target_refusal = target_refusal or _allow_every_target
        self._inbox = inbox  # each session's own address and mail; None: personas have none
        self._logins = logins
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._closing = False

    async def start(self) -> list[str]:
        """Resume every queued and running run; returns their ids."""
        resumed = [r.run.run_id for r in self._store.claim_resumable_runs()]
        for run_id in resumed:
            self.submit(run_id)
        return resumed

    def submit(self, run_id: str) -> None:
        """Start a run's work (idempotent: a run already under way is left alone)."""
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
        """Until the run's work is over (for tests and the CLI)."""
        task = self._runs.get(run_id)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    async def close(self) -> None:
        """Stop every run without marking it: the next start resumes them."""
        self._closing = True
        tasks = list(self._runs.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, run_id: str) -> None:
        run = self._store.get_run(run_id)
        if run.status.terminal:
            return
        pending = [s for s in self._store.sessions(run_id) if not s.status.terminal]
        refused = await self._target_refusal(run.target_url)
        if refused is not None:
            log.warning("run %s: its target is refused now: %s", run_id, refused)
            reason = f"the target is not allowed when the run starts: {refused}"
            for row in pending:
                self._end_session(run_id, row.session_id, SessionState.FAILED, reason, run.model)
            self._end_run(run_id, RunState.FAILED, reason=reason)
            return
        for row in pending:
            if row.status is SessionState.RUNNING:
                # It was running when the service stopped: that generation's browser is gone,
                # and its Understudy session (still live there) would hold the device. Both are
                # settled before any persona starts again.
                await self._forget(row.understudy_session_id)
                self._store.bump_generation(row.session_id)
        try:
            await asyncio.gather(*(self._persona(run, s) for s in pending))
        except asyncio.CancelledError:
            if not self._closing:
                self._end_run(run_id, RunState.CANCELLED)
            raise
        except Exception as exc:
            log.exception("run %s failed", run_id)
            self._end_run(run_id, RunState.FAILED, reason=f"internal error: {exc}")
            return
        self._end_run(run_id, RunState.COMPLETED)

    def _end_run(self, run_id: str, status: RunState, reason: str | None = None) -> None:
        with contextlib.suppress(IllegalTransition):  # a cancel through the API came first
            if self._store.get_run(run_id).status is RunState.QUEUED:
                self._store.set_run_state(run_id, RunState.RUNNING)
            self._store.set_run_state(run_id, status, reason)
        try:
            self._publisher.run_ended(run_id)
        except Exception:
            log.exception("the aggregate report of run %s could not be written", run_id)

    def _end_session(
        self, run_id: str, session_id: str, status: SessionState, reason: str, label: str
    ) -> None:
        with contextlib.suppress(IllegalTransition):  # cancelled through the API meanwhile
            self._store.set_session_state(session_id, status, reason or None)
        try:
            self._publisher.session_ended(run_id, session_id, label)
        except Exception:
            log.exception("the report of session %s could not be written", session_id)

    async def _persona(self, run: RunRecord, row: SessionRecord) -> None:
        session_id = row.session_id
        status, reason, label = SessionState.FAILED, "", run.model
        model: Model | None = None
        login = self._logins.for_session(run, session_id) if self._logins is not None else None
        try:
            model = self._model_for(run, row)
            label = model.label
            attempts = 0
            while True:
                generation = self._store.get_session(session_id).generation
                attempts += 1
                if max(generation, attempts) > self._settings.max_generations:
                    reason = (
                        f"the browser was lost {attempts - 1} times "
                        f"(at most {self._settings.max_generations} generations); last: {reason}"
                    )
                    break
                try:
                    finish = await self._generation(run, session_id, model, generation, login)
                except BrowserLost as exc:
                    log.warning(
                        "%s generation %d lost its browser: %s", session_id, generation, exc
                    )
                    reason = str(exc)
                    if self._store.get_session(session_id).status is SessionState.RUNNING:
                        self._store.bump_generation(session_id)
                    continue
                status = SessionState.COMPLETED
                reason = "" if finish.success else finish.summary
                break
        except FleetError as exc:
            reason = f"no browser for this persona: {exc}"
        except ModelGaveUp as exc:
            reason = str(exc)
        except LoopCancelled:
            status, reason = SessionState.CANCELLED, "the run was cancelled"
        except asyncio.CancelledError:
            if not self._closing:
                cancelled = "the run was cancelled"
                self._end_session(run.run_id, session_id, SessionState.CANCELLED, cancelled, label)
            raise
        finally:
            if login is not None:
                await login.clear()  # the password leaves Understudy's vault with the session
            if model is not None:
                with contextlib.suppress(Exception):
                    await close_model(model)  # the SDK adapters' HTTP connections
        self._end_session(run.run_id, session_id, status, reason, label)

    async def _watched(self, work: Coroutine[Any, Any, Finish], profile: Profile) -> Finish:
        """Run a generation's loop, and end it the moment its browser process dies.

        Without this the loop would learn of a crash only from Understudy, after the command in
        flight times out and the connector's retries for an unavailable session run out (about
        a minute and a half, measured); the process is the first thing to know.
        """
        loop = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(self._until_dead(profile))
        try:
            await asyncio.wait({loop, watch}, return_when=asyncio.FIRST_COMPLETED)
            if loop.done():
                return loop.result()
            raise BrowserLost(f"the browser of {profile.device_id} exited")
        finally:
            for task in (loop, watch):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    async def _until_dead(self, profile: Profile) -> None:
        # Polled: the fleet reports a process's exit only when asked (`Popen.poll`).
        while self._fleet.alive(profile):  # noqa: ASYNC110
            await asyncio.sleep(BROWSER_WATCH_S)

    async def _close(self, session: AsyncSession, *, alive: bool) -> None:
        """End the Understudy session before its browser is wiped.

        With the browser still running, wait until the session is closed: a browser killed while
        its session is `closing` never confirms the close, and Understudy keeps the device's
        capacity held (measured: still `closing` a minute later).
        """
        with contextlib.suppress(Exception):
            await session.close(wait=alive, wait_timeout=CLOSE_WAIT_S if alive else None)

    async def _forget(self, understudy_session_id: str | None) -> None:
        """Delete a lost generation's Understudy session (best effort: it may be gone)."""
        if understudy_session_id is None:
            return
        try:
            await self._understudy.delete_session(UUID(understudy_session_id))
        except UnderstudyError as exc:
            log.info("the old session %s was not deleted: %s", understudy_session_id, exc)

    async def _generation(
        self,
        run: RunRecord,
        session_id: str,
        model: Model,
        generation: int,
        login: SessionLogin | None = None,
    ) -> Finish:
        origin = _origin(run.target_url)
        profile = await self._fleet.acquire(
            session_id, timeout_s=ACQUIRE_TIMEOUT_S, allowed_origins=[origin]
        )
        broken = False
        try:
            understudy_session = self._understudy.session(
                allowed_origins=[origin],
                profile_state_key=_profile_key(self._settings, session_id, generation),
                device_id=profile.device_id,
            )
            try:
                await understudy_session.open()
            except UnderstudyError as exc:
                broken = True
                raise BrowserLost(f"no session on {profile.device_id}: {exc}") from exc
            try:
                session = self._store.start_session(
                    session_id,
                    understudy_session_id=str(understudy_session.id),
                    device_id=profile.device_id,
                )
                persona = _persona(session.persona)
                if self._inbox is not None:
                    persona = replace(persona, email=self._inbox.address_for(session_id))
                gen = Generation(
                    run_id=run.run_id,
                    session_id=session_id,
                    persona=persona,
                    task=run.task,
                    target_url=run.target_url,
                    turn_budget=run.turn_budget,
                    generation=generation,
                    next_turn=session.turn + 1,
                    prior_reactions=[
                        PriorReaction(r.step, r.sentiment, r.note, r.url)
                        for r in self._store.reactions(session_id=session_id)
                    ],
                )
                loop = PersonaLoop(
                    model,
                    understudy_session,
                    self._store,
                    self._screenshots,
                    inbox=self._inbox,
                    login=login,
                )
                return await self._watched(loop.run(gen), profile)
            except BrowserLost:
                broken = True
                raise
            finally:
                await self._close(understudy_session, alive=self._fleet.alive(profile))
        finally:
            broken = broken or not self._fleet.alive(profile)
            await self._fleet.release(profile, broken=broken)


async def _allow_every_target(url: str) -> None:
    return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _profile_key(settings: OrchestratorSettings, session_id: str, generation: int) -> str:
    """Names the browser state a generation expects: its own, on a freshly wiped profile.

    The seed's container key, `<session>#<generation>`: no two generations share one.
    """
    return f"{settings.profile_state_prefix}/{session_id}#{generation}"


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
