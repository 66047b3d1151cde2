"""The dashboard's credentials page, over the API's own operations (`_api/_credentials.py`).

- `/dashboard/credentials`: the customer's stored log-ins for their site (name, user name,
  origin, when added; never the password), a form to add one and a button to delete each.
  The form is validated by `store_credential`, the very function behind `POST /credentials`;
  its errors sit beside the control they name.

The password goes one way: from the form into `Credentials.create`, which seals it at once.
No page shows it: a form sent back with an error has its password field empty (the person
types it again), a stored credential answers with a redirect (nothing to reload or cache),
and no error message or log line repeats a value sent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from litestar import Response, get, post
from litestar.params import FromPath

from synthetic_users._api._credentials import store_credential
from synthetic_users._api._problems import ProblemError
from synthetic_users._dashboard._auth import DashboardError
from synthetic_users._dashboard._forms import FormErrors, credential_document, credential_field
from synthetic_users._dashboard._pages import Req, _api, _see_other, posted, signed_in
from synthetic_users._dashboard._render import page
from synthetic_users._store._credentials import CredentialNotFound

if TYPE_CHECKING:
    from synthetic_users._dashboard._auth import SignIn
    from synthetic_users._safety._credentials import Credentials

_CREDENTIAL_ID: Final = re.compile(r"cred_[0-9a-f]{32}")
# The page lists this many; a customer keeps a handful of test accounts, not hundreds.
LISTED: Final = 100
BLANK: Final = {"name": "", "username": "", "origin": ""}
# What pydantic says of a pattern, said for people (the API keeps its own wording).
_ORIGIN_MESSAGE: Final = "must be an origin: http(s):// and a host, like https://shop.example.com"
NOTICES: Final = {
    "created": "Credential stored. Its password is sealed and will not be shown again.",
    "deleted": "Credential deleted.",
}


def _credentials(request: Req) -> Credentials:
    credentials: Credentials | None = _api(request).credentials
    if credentials is None:  # pragma: no cover - create_app always sets one
        raise DashboardError(500, "Something went wrong", "credentials are not configured")
    return credentials


def _not_found() -> DashboardError:
    return DashboardError(404, "Credential not found", "there is no credential with this id")


def _credentials_page(
    request: Req,
    who: SignIn,
    values: dict[str, str] | None = None,
    errors: FormErrors | None = None,
    status: int = 200,
    notice: str | None = None,
) -> Response[Any]:
    stored = _credentials(request).page(who.customer_id, LISTED)
    return page(
        "dashboard/credentials.html",
        who,
        "credentials",
        status,
        stored=stored,
        # Never a password here: the form's password control is always rendered empty.
        values=values or dict(BLANK),
        errors=errors or FormErrors(),
        notice=notice,
    )


@get("/credentials", include_in_schema=False)
async def credentials(request: Req) -> Response[Any]:
    who = signed_in(request)
    notice = NOTICES.get(request.query_params.get("done", ""))
    return _credentials_page(request, who, notice=notice)


@post("/credentials", include_in_schema=False)
async def create_credential(request: Req) -> Response[Any]:
    who, data = await posted(request)
    document = credential_document(data)
    try:
        store_credential(_credentials(request), who.customer_id, document)
    except ProblemError as exc:
        errors = FormErrors()
        for error in exc.errors or [{"path": "", "message": exc.detail or exc.code}]:
            name = credential_field(error["path"])
            message = error["message"]
            if name == "origin" and message.startswith("String should match pattern"):
                message = _ORIGIN_MESSAGE
            errors.add(name, message)
        values = {k: document.get(k, "") for k in BLANK}
        return _credentials_page(request, who, values, errors, 400)
    return _see_other("/dashboard/credentials?done=created")


@post("/credentials/{credential_id:str}/delete", include_in_schema=False)
async def delete_credential(request: Req, credential_id: FromPath[str]) -> Response[Any]:
    who, _data = await posted(request)
    try:
        if not _CREDENTIAL_ID.fullmatch(credential_id):
            raise CredentialNotFound(credential_id)
        _credentials(request).delete(who.customer_id, credential_id)
    except CredentialNotFound:
        raise _not_found() from None
    return _see_other("/dashboard/credentials?done=deleted")


CREDENTIAL_HANDLERS: Final = [credentials, create_credential, delete_credential]
__all__ = ["CREDENTIAL_HANDLERS"]
