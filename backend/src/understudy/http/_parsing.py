"""Request bodies and path ids: parsed as strictly as the spec reads them.

A body is at most `MAX_BODY_BYTES` of `application/json`, UTF-8, nested at most
`MAX_JSON_DEPTH` levels, with no key repeated in an object; it is then validated by a generated
model in strict mode (JSON Schema has no coercion). Every refusal is `400 invalid_request` with
one entry per rejected field.

The body's bytes are validated once, by pydantic in JSON mode. Python's `json` reads them first
only for what pydantic would let through: a repeated key, `NaN`/`Infinity`, and the top-level
UUID spellings. Only a body with an integral float (`3.0`, `1e2`, which JSON Schema counts as an
integer) is validated in its re-serialised form, and a body the raw bytes fail is validated that
way too, so the answer is the same as if every body went that way.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from understudy._problems import ProblemError, invalid_request
from understudy.http._responses import JSON

if TYPE_CHECKING:
    from litestar import Request

MAX_BODY_BYTES = 256 * 1024
UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# Far deeper than any body of the spec (a command nests a few levels), far shallower than the
# recursion limits of json and pydantic-core.
MAX_JSON_DEPTH = 128
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


async def read_body(request: Request[Any, Any, Any]) -> bytes:
    """The raw body: at most `MAX_BODY_BYTES`, and JSON whenever there is one."""
    return check_body(await request.body(), request.headers.get("content-type", ""))


def check_body(body: bytes, content_type: str) -> bytes:
    """`body` if it is at most `MAX_BODY_BYTES` and, when there is one, sent as JSON."""
    if len(body) > MAX_BODY_BYTES:
        raise invalid_request(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if body and content_type.split(";")[0].strip() != JSON:
        raise invalid_request("send the body as application/json")
    return body


class _Floats:
    """`parse_float` for `json.loads`: JSON Schema counts 3.0 as an integer, pydantic's strict
    mode would refuse it; remembers whether any number was read that way."""

    __slots__ = ("integral",)

    def __init__(self) -> None:
        self.integral = False

    def __call__(self, text: str) -> float | int:
        number = float(text)
        if number.is_integer():
            self.integral = True
            return int(number)
        return number


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


class _DuplicateKeyError(ValueError):
    """An object names one key twice (RFC 8259 §4 leaves the meaning open; we refuse it)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key[:64]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last duplicate and pydantic would too, while another parser on the way
    # (a proxy, a gateway's audit log) may keep the first: `{"dryRun":true,"dryRun":false}`
    # would then be logged as a dry run and run as a real write.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKeyError(key)
        data[key] = value
    return data


def _too_deep(text: str) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `MAX_JSON_DEPTH`.

    Counted on the text with strings blanked out, before parsing: the parsers recurse once per
    level, and a body of 256 KiB of `[` would otherwise end in a RecursionError (a 500).
    """
    if len(text) <= 2 * MAX_JSON_DEPTH:
        return False  # each level takes two characters: too short to nest that deep
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub('""', text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False


def _not_json() -> ProblemError:
    return invalid_request(
        "/: the body is not valid JSON", [{"path": "/", "message": "invalid JSON"}]
    )


def parse(model: type[Any], body: bytes, *, uuid_fields: tuple[str, ...] = ()) -> Any:
    """`body` as an instance of the generated `model`, or `400 invalid_request`.

    Args:
        model: A generated wire model.
        body: The raw body, as `read_body` returns it.
        uuid_fields: Top-level fields that must hold a UUID in its one hyphenated spelling.
    """
    try:
        text = body.decode("utf-8")  # RFC 8259: JSON between systems is UTF-8
    except ValueError:
        raise _not_json() from None
    if _too_deep(text):
        message = f"nested deeper than {MAX_JSON_DEPTH} levels"
        raise invalid_request(f"/: {message}", [{"path": "/", "message": message}])
    floats = _Floats()
    try:
        data = json.loads(
            text,
            parse_float=floats,
            parse_constant=_no_constant,
            object_pairs_hook=_unique_keys,
        )
    except _DuplicateKeyError as exc:
        message = f"an object names the key {json.dumps(exc.key)} twice; send it once"
        raise invalid_request(f"/: {message}", [{"path": "/", "message": message}]) from None
    except (ValueError, RecursionError):
        raise _not_json() from None
    if isinstance(data, dict):
        for name in uuid_fields:
            # pydantic takes a UUID in any form uuid.UUID parses (braces, urn:uuid:, 32 bare
            # digits); the spec admits only the hyphenated form, so one id has one spelling.
            value = data.get(name)
            if isinstance(value, str) and not UUID.fullmatch(value):
                message = (
                    "not a UUID in the 8-4-4-4-12 form, like c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d"
                )
                raise invalid_request(
                    f"/{name}: {message}", [{"path": f"/{name}", "message": message}]
                )
    if not floats.integral:
        # Strict: JSON Schema has no coercion, so `false` or "3" is no integer and 1 no string.
        try:
            return model.model_validate_json(body, strict=True)
        except ValidationError:
            pass  # answered below exactly as before, from the re-serialised form
    try:
        return model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        errors = [
            {"path": "/" + "/".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in exc.errors(include_url=False)[:20]
        ]
        first = errors[0] if errors else {"path": "/", "message": "invalid"}
        raise invalid_request(f"{first['path']}: {first['message']}", errors) from None


def parse_session_id(value: str) -> str:
    """A session id from the path, canonical; 404 when it cannot name a session."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ProblemError(404, "session_not_found", "no session with this id") from None
