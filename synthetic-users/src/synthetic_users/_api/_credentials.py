"""The credentials operations: store a log-in for the target site, list, read, delete it.

No answer ever carries the password: the views are built from `CredentialRecord`, which has
none. A run's `credential_id` must name one of the customer's credentials (`check_run_credential`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from litestar import Request, Response, delete, get, post
from litestar.params import FromPath

from synthetic_users._api._parse import json_body, limit_and_cursor, validate
from synthetic_users._api._problems import ProblemError, field_error
from synthetic_users._store import BadCursor
from synthetic_users._store._credentials import CredentialNotFound
from synthetic_users._store._records import rfc3339
from synthetic_users._store._store import _decode_cursor, _encode_cursor
from synthetic_users.generated import models

if TYPE_CHECKING:
    from synthetic_users._safety._credentials import Credentials
    from synthetic_users._store._credentials import CredentialRecord

_CREDENTIAL_ID: Final = re.compile(r"cred_[0-9a-f]{32}")
_NOT_FOUND: Final = "no credential with this id"


def _credentials(request: Request[Any, Any, Any]) -> Credentials:
    credentials: Credentials | None = request.app.state.api.credentials
    if credentials is None:  # pragma: no cover - create_app always sets one
        raise ProblemError(500, "internal_error", "credentials are not configured")
    return credentials


def _customer(request: Request[Any, Any, Any]) -> str:
    from synthetic_users._api._routes import customer  # the routes module imports this one

    return customer(request)


def credential_view(record: CredentialRecord) -> dict[str, Any]:
    body: dict[str, Any] = {
        "credential_id": record.credential_id,
        "name": record.name,
        "username": record.username,
        "created_at": rfc3339(record.created_at),
    }
    if record.origin is not None:
        body["origin"] = record.origin
    return models.Credential.model_validate(body).to_wire()


def _record(request: Request[Any, Any, Any], who: str, credential_id: str) -> CredentialRecord:
    if not _CREDENTIAL_ID.fullmatch(credential_id):
        raise ProblemError(404, "credential_not_found", _NOT_FOUND)
    try:
        return _credentials(request).get(who, credential_id)
    except CredentialNotFound:
        raise ProblemError(404, "credential_not_found", _NOT_FOUND) from None


def check_run_credential(
    credentials: Credentials | None, who: str, credential_id: str | None
) -> None:
    """`400` on `/credential_id` unless it is None or names one of `who`'s credentials."""
    if credential_id is None:
        return
    try:
        if credentials is None:
            raise CredentialNotFound(credential_id)
        credentials.get(who, credential_id)
    except CredentialNotFound:
        raise field_error(
            "/credential_id", "no such credential; store one with POST /credentials"
        ) from None


def store_credential(credentials: Credentials, who: str, document: Any) -> CredentialRecord:
    """Validate a `CredentialInput` document and store it sealed: `POST /credentials`'s work.

    The dashboard's credential form calls this too, so both refuse the same documents with the
    same errors (none of which repeats a value sent).

    Raises:
        ProblemError: `400 validation_failed`, naming each bad field by its JSON pointer.
    """
    given = validate(models.CredentialInput, document)
    return credentials.create(
        who,
        name=given.name,
        username=given.username,
        password=given.password,
        origin=given.origin,
    )


@post("/credentials", status_code=201)
async def create_credential(request: Request[Any, Any, Any]) -> Response[Any]:
    who = _customer(request)
    record = store_credential(_credentials(request), who, await json_body(request))
    return Response(
        credential_view(record),
        status_code=201,
        media_type="application/json",
        headers={"Location": f"/credentials/{record.credential_id}"},
    )


@get("/credentials")
async def list_credentials(request: Request[Any, Any, Any]) -> Response[Any]:
    who = _customer(request)
    limit, cursor = limit_and_cursor(request)
    try:
        after = _decode_cursor(cursor) if cursor is not None else None
    except BadCursor as exc:
        raise field_error("cursor", str(exc)) from None
    records = _credentials(request).page(who, limit, after)
    body: dict[str, Any] = {"credentials": [credential_view(r) for r in records[:limit]]}
    if len(records) > limit:
        last = records[limit - 1]
        body["next_cursor"] = _encode_cursor(last.created_at, last.credential_id)
    return Response(body, media_type="application/json")


@get("/credentials/{credential_id:str}")
async def get_credential(
    request: Request[Any, Any, Any], credential_id: FromPath[str]
) -> Response[Any]:
    who = _customer(request)
    return Response(
        credential_view(_record(request, who, credential_id)), media_type="application/json"
    )


@delete("/credentials/{credential_id:str}", status_code=204)
async def delete_credential(request: Request[Any, Any, Any], credential_id: FromPath[str]) -> None:
    who = _customer(request)
    _record(request, who, credential_id)
    try:
        _credentials(request).delete(who, credential_id)
    except CredentialNotFound:
        raise ProblemError(404, "credential_not_found", _NOT_FOUND) from None


CREDENTIAL_ROUTES: Final = [
    create_credential,
    list_credentials,
    get_credential,
    delete_credential,
]
