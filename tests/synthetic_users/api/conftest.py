"""A running Synthetic Users API for tests: uvicorn on 127.0.0.1, SQLite and artifacts in tmp."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import jsonschema
import pytest
import uvicorn

from codegen._bundle import load_synthetic_users
from synthetic_users._api import RunDefaults, create_app
from synthetic_users._artifacts import DirectoryStore
from synthetic_users._safety._ssrf import TargetPolicy
from synthetic_users._store import Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    from litestar import Litestar

    from synthetic_users._store import RunRecord

SPEC = load_synthetic_users()
PERSONA = {"name": "Margaret", "digital_literacy": "low", "patience": "medium"}
RUN = {"target_url": "https://shop.example/", "task": "Buy a kettle", "personas": [PERSONA]}


PUBLIC_V4 = "93.184.215.14"  # a public address: what every name resolves to unless told otherwise
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"


@dataclass
class StubResolver:
    """`getaddrinfo` for tests: `answers[host]` (default: one public address), no network."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        found = self.answers.get(host, [PUBLIC_V4])
        if not found:
            raise OSError("Name or service not known")  # socket.gaierror is an OSError
        return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class RecordingServices:
    """`Services` that remember what the API told them."""

    events: list[str] = field(default_factory=list)
    created: list[RunRecord] = field(default_factory=list)
    cancelled: list[RunRecord] = field(default_factory=list)

    async def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")

    def run_created(self, run: RunRecord) -> None:
        self.created.append(run)

    def run_cancelled(self, run: RunRecord) -> None:
        self.cancelled.append(run)


@dataclass
class Api:
    client: httpx.AsyncClient
    store: Store
    artifacts: DirectoryStore
    services: RecordingServices
    key: str
    other_key: str
    resolver: StubResolver

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def create_run(
        self, body: dict[str, Any] | None = None, *, key: str | None = None
    ) -> httpx.Response:
        """`POST /runs` as the first customer, with `key` as its Idempotency-Key."""
        headers = {**self.auth(), **({"Idempotency-Key": key} if key else {})}
        return await self.client.post("/runs", json=body or RUN, headers=headers)


@contextlib.asynccontextmanager
async def serving(app: Litestar) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port) until the block ends; its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
        if task.done():
            task.result()  # it failed to start: raise why
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def running_api(
    tmp_path: Path, *, allow_loopback: bool = False, **options: Any
) -> AsyncIterator[Api]:
    """The API over a fresh store, names resolved by a `StubResolver`; `options` to `create_app`."""
    store = Store.open(tmp_path / "su.db", **options.pop("store_options", {}))
    artifacts = DirectoryStore(tmp_path / "artifacts")
    services = RecordingServices()
    resolver = StubResolver()
    app = create_app(
        store,
        artifacts,
        services=services,
        defaults=RunDefaults(30, "heuristic"),
        targets=TargetPolicy(allow_loopback=allow_loopback, resolver=resolver),
        **options,
    )
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield Api(
            client,
            store,
            artifacts,
            services,
            store.create_key("acme"),
            store.create_key("globex"),
            resolver,
        )
    store.close()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with running_api(tmp_path) as running:
        yield running


def conforms(body: Any, schema_name: str) -> None:
    """`body` is valid against the spec's schema `schema_name` (checked apart from the models)."""
    validator = jsonschema.Draft202012Validator(
        {**SPEC.defs[schema_name], "$defs": SPEC.defs}, format_checker=jsonschema.FormatChecker()
    )
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(body)]
    assert errors == []


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The problem+json body of `response`, after checking its status, type and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    conforms(body, "Problem")
    return body


def paths(body: dict[str, Any]) -> list[str]:
    return [e["path"] for e in body.get("errors", [])]
