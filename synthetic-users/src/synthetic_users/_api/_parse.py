"""Request bodies and parameters to generated models, or `400`s naming each bad field."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from synthetic_users._api._problems import ProblemError, field_error, validation_failed
from synthetic_users.generated import models

if TYPE_CHECKING:
    from litestar import Request

M = TypeVar("M", bound=BaseModel)
MAX_BODY_BYTES: Final = 256 * 1024
MAX_ERRORS: Final = 20
# What a generic pydantic message says for these patterns, said for people.
_PATTERN_MESSAGES: Final = {
    "target_url": "must be an absolute http(s) URL, like https://shop.example.com/",
    "persona_id": "not a persona id (per_ and 32 hex digits)",
    "credential_id": "not a credential id (cred_ and 32 hex digits)",
    "model": "must be heuristic, openai:<model> or anthropic:<model>",
    "locale": "must be a BCP 47 language tag, like en-GB",
}


async def json_body(request: Request[Any, Any, Any]) -> Any:
    """The request's JSON document; `400 invalid_json` when it is not one."""
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise ProblemError(413, "payload_too_large", f"bodies are at most {MAX_BODY_BYTES} bytes")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ProblemError(400, "invalid_json", "send the body as application/json")
    try:
        return json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_unique_keys,
            parse_float=_integral,
            parse_constant=_no_constant,
        )
    except _DuplicateKeyError as exc:
        raise ProblemError(
            400, "invalid_json", f"an object names the key {json.dumps(exc.key)} twice"
        ) from None
    except (ValueError, RecursionError):
        raise ProblemError(400, "invalid_json", "the body is not valid JSON") from None


def _integral(text: str) -> float | int:
    # JSON Schema counts 3.0 as an integer; strict validation would refuse it as a float.
    number = float(text)
    return int(number) if number.is_integer() else number


def _no_constant(text: str) -> Any:
    # NaN and Infinity are not JSON (RFC 8259 §6), though Python's parser takes them.
    raise ValueError(f"{text} is not JSON")


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key[:64]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last duplicate, another parser on the way may keep the first; refuse.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKeyError(key)
        data[key] = value
    return data


def validate(model: type[M], data: Any, prefix: str = "") -> M:
    """`data` as `model` (strict, as JSON Schema is), or `400 validation_failed`."""
    errors = _errors(model, data, prefix)
    if errors:
        raise validation_failed(errors)
    return model.model_validate_json(json.dumps(data), strict=True)


def _errors(model: type[BaseModel], data: Any, prefix: str) -> list[dict[str, str]]:
    try:
        model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        return [_error(err, prefix) for err in exc.errors(include_url=False)[:MAX_ERRORS]]
    return []


def _error(err: Any, prefix: str) -> dict[str, str]:
    # Union branches and validators show up in `loc` as class names and `function-after[…]`;
    # fields here are snake_case, so anything else is not part of the JSON pointer.
    parts = [str(p) for p in err["loc"] if isinstance(p, int) or (p[:1].islower() and "[" not in p)]
    message = str(err["msg"])
    if err["type"] == "string_pattern_mismatch" and parts and parts[-1] in _PATTERN_MESSAGES:
        message = _PATTERN_MESSAGES[parts[-1]]
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    return {"path": prefix + "".join(f"/{_escape(p)}" for p in parts), "message": message}


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def run_request(data: Any) -> models.RunRequest:
    """A `RunRequest`, with each persona checked on its own (inline, or by `persona_id`).

    Checking each persona against the one shape it means gives one clear error per field,
    where the union would report every branch's complaints.
    """
    errors: list[dict[str, str]] = []
    if isinstance(data, dict) and isinstance(data.get("personas"), list):
        for i, item in enumerate(data["personas"]):
            shape: type[BaseModel] = (
                models.PersonaRef
                if isinstance(item, dict) and "persona_id" in item
                else models.PersonaInput
            )
            errors += _errors(shape, item, f"/personas/{i}")
    errors += [
        e
        for e in _errors(models.RunRequest, data, "")
        if not (e["path"].startswith("/personas/") and e["path"].count("/") >= 2)
    ]
    if not errors:
        request = models.RunRequest.model_validate_json(json.dumps(data), strict=True)
        problem = _target_problem(request.target_url)
        if problem:
            errors.append({"path": "/target_url", "message": problem})
    if errors:
        raise validation_failed(errors[:MAX_ERRORS])
    return request


def _target_problem(url: str) -> str | None:
    """What is wrong with a target the pattern let through (a bad port, credentials)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host that is not an IPv6 address: `https://[c]/`
        return "the host in brackets is not an IPv6 address"
    try:
        parts.port  # noqa: B018 (parsing it is the check)
    except ValueError:
        return "the port is not a number between 0 and 65535"
    if not parts.hostname:
        return _PATTERN_MESSAGES["target_url"]
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password; store credentials with the API"
    return None


def limit_and_cursor(
    request: Request[Any, Any, Any], *, other: tuple[str, ...] = ()
) -> tuple[int, str | None]:
    """The `limit` (1-100, default 20) and `cursor` query parameters (`other` names allowed)."""
    params = request.query_params
    for name in params:
        if name not in ("limit", "cursor", *other):
            raise field_error(name, "unknown parameter")
    limit_values = params.getall("limit", [])
    cursor_values = params.getall("cursor", [])
    if len(limit_values) > 1 or len(cursor_values) > 1:
        raise field_error("limit" if len(limit_values) > 1 else "cursor", "send it once")
    limit = 20
    if limit_values:
        text = limit_values[0]
        if not text.isdigit() or not 1 <= int(text) <= 100:
            raise field_error("limit", "must be a whole number from 1 to 100")
        limit = int(text)
    cursor = cursor_values[0] if cursor_values else None
    if cursor is not None and not (0 < len(cursor) <= 200 and _is_token(cursor)):
        raise field_error("cursor", "not a cursor this service wrote; pass next_cursor as it came")
    return limit, cursor


def _is_token(text: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "-_") for c in text)


def idempotency_key(request: Request[Any, Any, Any]) -> str | None:
    """The `Idempotency-Key` header (1-255 printable ASCII characters), when sent."""
    keys = request.headers.getall("idempotency-key", [])
    if len(keys) > 1:
        # Which one a proxy or a retry library would keep is anyone's guess; refuse both.
        raise field_error("Idempotency-Key", "send it once")
    if not keys:
        return None
    key = keys[0]
    if not 1 <= len(key) <= 255 or not all("\x21" <= c <= "\x7e" for c in key):
        raise field_error("Idempotency-Key", "1 to 255 printable ASCII characters, no spaces")
    return key
