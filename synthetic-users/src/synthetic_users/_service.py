"""What `synthetic-users serve` runs beside the API: the fleet, the orchestrator and the reports.

`RunServices` implements the API's `Services`: the app's lifespan starts it (enable unattended
sessions for the fleet's Understudy tenant through the operator API, get a consumer key, start
the fleet, resume the runs the store says were queued or running) and stops it (close every run
without marking it, so the next start resumes them; stop every browser). `POST /runs` and
`DELETE /runs/{id}` tell it of each run created and cancelled. It also owns the retention
sweeper (`_retention.py`), and gives the orchestrator the target policy (`_safety/_ssrf.py`) to
check each run's target again when it starts.

Unless `SYNTHETIC_USERS_SMTP_PORT` is 0 it also runs the inbox's SMTP server (started before the
orchestrator, so resumed sessions get their mail; stopped after it), and each persona session
gets its own address at `SYNTHETIC_USERS_INBOX_DOMAIN`.

The Understudy consumer key the service uses is created once through the operator API and kept
in `<data dir>/understudy-api-key` (mode 0600), unless `UNDERSTUDY_API_KEY` names one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING

from synthetic_users._artifacts import session_prefix
from synthetic_users._fleet import LocalChromiumFleet
from synthetic_users._inbox import InboxServer, InboxUnavailable, Mailbox
from synthetic_users._llm._factory import model_from_settings
from synthetic_users._orchestrator import Orchestrator, OrchestratorSettings
from synthetic_users._publish import Publisher
from synthetic_users._retention import RetentionSweeper
from synthetic_users._safety._login import LoginBroker
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._usage import BillerSettings, StripeBiller, UsageStore
from synthetic_users._webhooks import WebhookStore, WebhookWorker, WorkerSettings
from understudy_connector import AsyncClient, AsyncOperatorClient

if TYPE_CHECKING:
    from pathlib import Path

    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._config import Settings
    from synthetic_users._llm._base import Model
    from synthetic_users._safety._credentials import Credentials
    from synthetic_users._store import RunRecord, SessionRecord, Store

log = logging.getLogger("synthetic_users.service")

TENANT = "synthetic-users"
KEY_FILE = "understudy-api-key"


class ServiceConfigError(RuntimeError):
    """The service cannot start with these settings; the message says what to set."""


class Screenshots:
    """Stores a session's screenshots under its artifact prefix."""

    def __init__(self, store: Store, artifacts: ArtifactStore) -> None:
        self._store = store
        self._artifacts = artifacts
        self._prefix: dict[str, str] = {}

    def save(self, session_id: str, name: str, png: bytes) -> None:
        prefix = self._prefix.get(session_id)
        if prefix is None:
            session = self._store.get_session(session_id)
            run = self._store.get_run(session.run_id)
            prefix = self._prefix[session_id] = session_prefix(
                run.customer_id, run.run_id, session_id
            )
        self._artifacts.put(f"{prefix}/screenshots/{name}", png)


class RunServices:
    """The orchestrator and what it needs, started and stopped with the app."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        artifacts: ArtifactStore,
        *,
        credentials: Credentials | None = None,
    ) -> None:
        if not settings.understudy_operator_token:
            raise ServiceConfigError(
                "UNDERSTUDY_OPERATOR_TOKEN is not set: create one with "
                "`understudy operator-tokens create --name synthetic-users` on the Understudy "
                "service and set it here, so the fleet can enroll its browsers"
            )
        if (
            settings.extension_dir is None
            or not (settings.extension_dir / "manifest.json").exists()
        ):
            raise ServiceConfigError(
                "SYNTHETIC_USERS_EXTENSION_DIR must name the built Understudy extension "
                f"(a folder with manifest.json; `make extension` builds extension/dist), got "
                f"{settings.extension_dir}"
            )
        self._settings = settings
        self._store = store
        self._artifacts = artifacts
        self._operator: AsyncOperatorClient | None = None
        self._client: AsyncClient | None = None
        self._fleet: LocalChromiumFleet | None = None
        self._orchestrator: Orchestrator | None = None
        self._cancels: set[asyncio.Task[None]] = set()
        self._sweeper = RetentionSweeper(
            store,
            artifacts,
            default_days=settings.retention_days,
            interval_s=settings.retention_sweep_minutes * 60.0,
        )
        # Usage events and the webhook outbox are written inside the store's end-of-session
        # and end-of-run transactions; the worker and the biller send them after.
        self._webhooks = WebhookStore(store)
        self._webhooks.install()
        self._usage = UsageStore(store)
        self._usage.install()
        self._worker: WebhookWorker | None = None
        self._biller: StripeBiller | None = None
        self._mailbox: Mailbox | None = None
        self._smtp: InboxServer | None = None
        # Runs with a credential log in through Understudy's vault (`_safety/_login.py`).
        self._credentials = credentials

    async def start(self) -> None:
        s = self._settings
        token, extension = s.understudy_operator_token, s.extension_dir
        if token is None or extension is None:  # checked in __init__
            raise ServiceConfigError("the operator token and the extension are required")
        self._operator = AsyncOperatorClient(s.understudy_url, token)
        await self._operator.set_unattended(TENANT, True)
        self._client = AsyncClient(s.understudy_url, await self._consumer_key(self._operator))
        self._fleet = LocalChromiumFleet(
            s.understudy_url,
            self._operator,
            root=s.data_dir / "fleet",
            extension_dir=extension,
            max_browsers=s.fleet_max_browsers,
            tenant=TENANT,
            headless=not s.headed,
        )
        await self._fleet.start()
        await self._start_inbox()
        self._orchestrator = Orchestrator(
            self._store,
            self._fleet,
            self._client,
            self._model_for,
            Screenshots(self._store, self._artifacts),
            Publisher(self._store, self._artifacts),
            OrchestratorSettings(max_generations=s.max_generations),
            target_refusal=TargetPolicy(allow_loopback=s.allow_loopback_targets).refusal,
            inbox=self._mailbox,
            logins=(
                LoginBroker(self._credentials, self._operator, TENANT)
                if self._credentials is not None
                else None
            ),
        )
        self._start_delivery()
        resumed = await self._orchestrator.start()
        if resumed:
            log.info("resumed %d run(s): %s", len(resumed), ", ".join(resumed))
        await self._sweeper.start()

    def _start_delivery(self) -> None:
        """Start the webhook worker and (with a Stripe key) the biller; both resume from rows."""
        s = self._settings
        worker = WebhookWorker(
            self._webhooks,
            settings=WorkerSettings(
                retry_schedule=s.webhook_retry_schedule,
                timeout_s=s.webhook_timeout_s,
                allow_loopback=s.allow_loopback,
            ),
        )
        worker.start()
        self._worker = worker
        self._store.run_ended_hooks.append(lambda _: worker.wake())
        self._store.session_ended_hooks.append(lambda _: worker.wake())
        if s.stripe_api_key:
            biller = StripeBiller(
                self._usage,
                BillerSettings(
                    api_key=s.stripe_api_key, api_base=s.stripe_api_base, meters=s.stripe_meters
                ),
            )
            biller.start()
            self._biller = biller
            self._store.session_ended_hooks.append(lambda _: biller.wake())

    async def stop(self) -> None:
        await self._sweeper.stop()
        if self._orchestrator is not None:
            await self._orchestrator.close()
        if self._worker is not None:
            await self._worker.stop()
        if self._biller is not None:
            await self._biller.stop()
        for task in list(self._cancels):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._stop_inbox()
        if self._fleet is not None:
            await self._fleet.close()
        if self._client is not None:
            await self._client.aclose()
        if self._operator is not None:
            await self._operator.aclose()

    # -- the inbox ------------------------------------------------------------------------------

    async def _start_inbox(self) -> None:
        s = self._settings
        if s.smtp_port == 0:
            log.info("the inbox is off (SYNTHETIC_USERS_SMTP_PORT=0)")
            return
        mailbox = Mailbox(self._store, s.inbox_domain)
        server = InboxServer(
            mailbox, host=s.smtp_host, port=s.smtp_port, max_bytes=s.inbox_max_bytes
        )
        try:
            await server.start()
        except InboxUnavailable as exc:
            raise ServiceConfigError(str(exc)) from exc
        self._mailbox, self._smtp = mailbox, server

    async def _stop_inbox(self) -> None:
        if self._smtp is not None:
            await self._smtp.stop()
            self._smtp = None

    @property
    def inbox_port(self) -> int | None:
        """The port the inbox listens on, or None when it is off."""
        return self._smtp.port if self._smtp is not None else None

    def run_created(self, run: RunRecord) -> None:
        if self._orchestrator is not None:
            self._orchestrator.submit(run.run_id)

    def run_cancelled(self, run: RunRecord) -> None:
        if self._orchestrator is None:
            return
        task = asyncio.get_running_loop().create_task(self._orchestrator.cancel(run.run_id))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    def _model_for(self, run: RunRecord, session: SessionRecord) -> Model:
        s = self._settings
        if s.model == "heuristic":
            # One seed per persona of the run, so three personas do not explore alike.
            return model_from_settings("heuristic", seed=s.heuristic_seed + session.position)
        return model_from_settings(
            s.model,
            model=s.model_name,
            base_url=s.model_base_url,
            api_key=s.model_api_key,
            timeout_s=s.model_timeout_s,
        )

    async def _consumer_key(self, operator: AsyncOperatorClient) -> str:
        if self._settings.understudy_api_key:
            return self._settings.understudy_api_key
        path = self._settings.data_dir / KEY_FILE
        kept = _read_key(path)
        if kept:
            return kept
        created = await operator.create_api_key(TENANT, "synthetic-users")
        _write_key(path, created.api_key)
        return created.api_key


def _read_key(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def _write_key(path: Path, key: str) -> None:
    """Keep the key readable by this user only (it is a credential)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
