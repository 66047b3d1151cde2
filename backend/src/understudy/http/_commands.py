"""`/v1/sessions/{id}/commands`: submit a command, poll it, and the outcome table of the spec."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from litestar import Request, Response, get, post
from litestar.params import FromPath

from understudy._problems import ProblemError, invalid_request
from understudy._write_protocol import http_answer
from understudy.generated import models as m
from understudy.http._auth import ConsumerDep, ServicesDep, consumer_guard, unless_revoked
from understudy.http._parsing import parse, parse_session_id, read_body
from understudy.http._responses import json_response

if TYPE_CHECKING:
    from understudy._services import Services
    from understudy._store.commands import CommandRow
    from understudy._write_protocol import HttpAnswer
    from understudy.http._auth import Consumer


def _outcome(session_id: str, row: CommandRow) -> Response[Any]:
    """The HTTP answer for a command's durable state (the outcome table of the spec)."""
    answer = http_answer(session_id, row)
    return json_response(answer.body, answer.status, answer.headers)


@post("/v1/sessions/{session_id:str}/commands", guards=[consumer_guard])
async def submit_command(
    request: Request[Any, Any, Any],
    services: ServicesDep,
    who: ConsumerDep,
    session_id: FromPath[str],
) -> Response[Any]:
    sid = parse_session_id(session_id)
    return await run_command(services, who, sid, await read_body(request))


async def run_command(services: Services, who: Consumer, sid: str, body: bytes) -> Response[Any]:
    """Admit the command in `body` and answer with its outcome, or what it is waiting for."""
    answer = await command_answer(services, who, sid, body)
    return json_response(answer.body, answer.status, answer.headers)


async def command_answer(services: Services, who: Consumer, sid: str, body: bytes) -> HttpAnswer:
    """What `run_command` answers, before it is a response: the route and the fast path of
    `_fast` share it, and answer alike."""
    if not body:
        raise invalid_request("send a CommandRequest body as application/json")
    req: m.CommandRequest = parse(m.CommandRequest, body, uuid_fields=("commandId",))
    agent = services.session_agent(sid)
    row = await agent.submit(who.tenant, who.actor, req)
    row = await unless_revoked(services, who, agent.wait_outcome(row.command_id))
    return http_answer(sid, row)


@get("/v1/sessions/{session_id:str}/commands/{command_id:str}", guards=[consumer_guard])
async def poll_command(
    services: ServicesDep,
    who: ConsumerDep,
    session_id: FromPath[str],
    command_id: FromPath[str],
) -> Response[Any]:
    sid = parse_session_id(session_id)
    session = services.repos.sessions.get(sid)
    if session is None or session.tenant != who.tenant:
        raise ProblemError(404, "session_not_found", "no session with this id in your tenant")
    try:
        cid = str(uuid.UUID(command_id))
    except ValueError:
        raise ProblemError(404, "command_not_found", "no command with this id") from None
    row = services.repos.commands.get(sid, cid)
    if row is None:
        raise ProblemError(404, "command_not_found", "no command with this id in this session")
    return _outcome(sid, row)
