"""Request samples for the API references: one curl and one Python call per operation.

Every value comes from the spec: the first server, path and header parameters from their schema's
`examples`, the body from the operation's (or its schema's) first example, the credential from the
security scheme (read from an environment variable named after it, so no sample shows a secret).
The Python sample calls the connector where it has a method for the operation (`CONNECTOR`), and
httpx otherwise.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from codegen._bundle import resolve

if TYPE_CHECKING:
    from collections.abc import Callable

    from codegen._bundle import Json, Spec

PythonClient = Literal["connector", "httpx"]
# A stable value for a header the spec has no example of (the same page every run).
UUID_SAMPLE = "6f9619ff-8b86-4d11-b42d-00c04fc964ff"
HEADER_SAMPLE = "retry-1"


@dataclass(frozen=True)
class Request:
    """One operation's sample request, values filled in from the spec's examples."""

    method: str
    base: str
    url: str
    path_values: dict[str, Any]
    uuids: frozenset[str]  # path parameters whose schema is a UUID
    headers: dict[str, str]
    credential: str | None  # the environment variable holding the bearer token
    body: Any
    download: str | None  # a file name when the answer is a file (an image, a gzip), not text


def build(
    spec: Spec, path: str, method: str, op: Json, params: list[Json], norm: Callable[[Any], Any]
) -> Request:
    """The sample request of one operation (`norm` rewrites OpenAPI refs to bundled names)."""
    api = spec.openapi
    base = (api.get("servers") or [{"url": "http://127.0.0.1"}])[0]["url"].rstrip("/")
    values: dict[str, Any] = {}
    uuids: set[str] = set()
    headers: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    for param in params:
        value = _example(spec, param, norm)
        if param["in"] == "path":
            values[param["name"]] = value
            if _format(spec, param, norm) == "uuid":
                uuids.add(param["name"])
        elif param["in"] == "header" and (
            param.get("required") or param["name"].lower() == "idempotency-key"
        ):
            headers[param["name"]] = str(value)
        elif param["in"] == "query" and param.get("required"):
            query.append((param["name"], str(value)))
    url = base + re.sub(r"\{([^}]+)\}", lambda m: str(values.get(m.group(1), m.group(0))), path)
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query)
    security = op["security"] if "security" in op else api.get("security") or []
    names = [name for requirement in security for name in requirement]
    credential = _env_name(names[0]) if names else None
    body = _body(spec, op, norm)
    download = url.rsplit("/", 1)[-1] if _binary(spec, op) else None
    return Request(method, base, url, values, frozenset(uuids), headers, credential, body, download)


def _binary(spec: Spec, op: Json) -> bool:
    """Whether the first success answer is a file rather than JSON or text."""
    for status, raw in op.get("responses", {}).items():
        if str(status).startswith("2"):
            types = list(_deref(spec.openapi, raw).get("content", {}))
            return bool(types) and not any("json" in t or t.startswith("text/") for t in types)
    return False


def curl(request: Request) -> str:
    """A curl command line, one option a line."""
    lines = [f"curl -sS -X {request.method.upper()} {shlex.quote(request.url)}"]
    if request.credential:
        lines.append(f'-H "Authorization: Bearer ${request.credential}"')
    lines += [f"-H {shlex.quote(f'{name}: {value}')}" for name, value in request.headers.items()]
    if request.body is not None:
        lines.append("-H 'Content-Type: application/json'")
        lines.append(f"--data {shlex.quote(json.dumps(request.body, ensure_ascii=False))}")
    if request.download:
        lines.append(f"-o {shlex.quote(request.download)}")
    return " \\\n  ".join(lines)


def python(spec: Spec, request: Request, op: Json, client: PythonClient) -> tuple[str, str]:
    """(label, code): the connector call when it has one for the operation, httpx otherwise."""
    if client == "connector" and op["operationId"] in CONNECTOR:
        return "Python (connector)", _connector(spec, request, op["operationId"])
    return "Python (httpx)", _httpx(request)


def _example(spec: Spec, param: Json, norm: Callable[[Any], Any]) -> Any:
    if "example" in param:
        return param["example"]
    for example in param.get("examples", {}).values():
        return example.get("value")
    schema = norm(param.get("schema", {}))
    target = resolve(spec, schema) if "$ref" in schema else schema
    for source in (schema, target):
        if source.get("examples"):
            return source["examples"][0]
        if "default" in source:
            return source["default"]
    if target.get("format") == "uuid":
        return UUID_SAMPLE
    return HEADER_SAMPLE if param["in"] == "header" else f"<{param['name']}>"


def _format(spec: Spec, param: Json, norm: Callable[[Any], Any]) -> Any:
    schema = norm(param.get("schema", {}))
    return (resolve(spec, schema) if "$ref" in schema else schema).get("format")


def _body(spec: Spec, op: Json, norm: Callable[[Any], Any]) -> Any:
    holder = op.get("requestBody")
    if not holder:
        return None
    holder = _deref(spec.openapi, holder)
    media = holder.get("content", {}).get("application/json")
    if media is None:
        return None
    for example in media.get("examples", {}).values():
        return example.get("value")
    if "example" in media:
        return media["example"]
    schema = norm(media.get("schema", {}))
    target = resolve(spec, schema) if "$ref" in schema else schema
    return (target.get("examples") or [{}])[0]


def _deref(api: Json, node: Json) -> Json:
    while str(node.get("$ref", "")).startswith("#/components/"):
        target: Any = api
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def _env_name(scheme: str) -> str:
    """`ConsumerApiKey` -> `CONSUMER_API_KEY`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", scheme).upper()


def _httpx(request: Request) -> str:
    lines = ["import os\n" if request.credential else "", "import httpx", ""]
    headers = [
        *(
            [f'"Authorization": f"Bearer {{os.environ[{request.credential!r}]}}"']
            if request.credential
            else []
        ),
        *(f"{json.dumps(n)}: {json.dumps(v)}" for n, v in request.headers.items()),
    ]
    args = [json.dumps(request.url)]
    if headers:
        args.append("headers={" + ", ".join(headers) + "}")
    if request.body is not None:
        args.append(f"json={literal(request.body, 4)}")
    call = f"httpx.{request.method.lower()}("
    lines.append(f"response = {call}\n    " + ",\n    ".join(args) + ",\n)")
    lines.append("response.raise_for_status()")
    if request.download:
        lines += ["with open(" + json.dumps(request.download) + ', "wb") as file:']
        lines += ["    file.write(response.content)"]
    else:
        lines.append("print(response.text)")
    return "\n".join(lines).lstrip("\n")


def literal(value: Any, indent: int = 0) -> str:
    """`value` as a Python literal (JSON's true/false/null spelt the Python way)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = " " * (indent + 4)
        items = ",\n".join(
            f"{pad}{json.dumps(k)}: {literal(v, indent + 4)}" for k, v in value.items()
        )
        return "{\n" + items + ",\n" + " " * indent + "}"
    if isinstance(value, list):
        if not any(isinstance(v, dict | list) and v for v in value):
            return "[" + ", ".join(literal(v, indent) for v in value) + "]"
        pad = " " * (indent + 4)
        items = ",\n".join(f"{pad}{literal(v, indent + 4)}" for v in value)
        return "[\n" + items + ",\n" + " " * indent + "]"
    if isinstance(value, bool) or value is None:
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


# -- the connector's methods, by operationId -----------------------------------------------------

ConnectorCall = tuple[str, str]  # (client class, call expression after `client.`)


def _call(method: str, args: list[str]) -> str:
    """`method(a, b)`, one argument a line when that is too long for one."""
    flat = f"{method}({', '.join(args)})"
    if len(flat) <= 70:
        return flat
    return f"{method}(\n    " + ",\n    ".join(args) + ",\n)"


def _uuid(value: Any) -> str:
    return f"UUID({json.dumps(str(value))})"


def _command(spec: Spec, command: Json) -> str:
    mapping = spec.defs["Command"]["discriminator"]["mapping"]
    model = mapping[command["name"]].rsplit("/", 1)[-1]
    return f"models.{model}.model_validate({literal(command, 4)})"


def _create_session(spec: Spec, r: Request) -> ConnectorCall:
    body = r.body or {}
    args = [
        f"allowed_origins={literal(body.get('allowedOrigins', []))}",
        f"profile_state_key={json.dumps(body.get('profileStateKey', ''))}",
    ]
    if "deviceId" in body:
        args.append(f"device_id={json.dumps(body['deviceId'])}")
    return "Client", _call("create_session", args)


def _submit(spec: Spec, r: Request) -> ConnectorCall:
    body = r.body or {}
    args = [_uuid(r.path_values["sessionId"]), _command(spec, body["command"])]
    if "commandId" in body:
        args.append(f"command_id={_uuid(body['commandId'])}")
    if body.get("dryRun"):
        args.append("dry_run=True")
    return "Client", _call("submit_command", args)


def _enroll(spec: Spec, r: Request) -> ConnectorCall:
    body = r.body or {}
    rotate = ", rotate=True" if body.get("rotate") else ""
    tenant, device = json.dumps(r.path_values["tenant"]), json.dumps(body.get("deviceId"))
    return "OperatorClient", f"enroll_device({tenant}, {device}{rotate})"


def _plain(client: str, method: str, *params: str, body: tuple[str, ...] = ()) -> Any:
    def call(spec: Spec, r: Request) -> ConnectorCall:
        text = [
            _uuid(r.path_values[p]) if p in r.uuids else json.dumps(r.path_values[p])
            for p in params
        ]
        text += [literal((r.body or {}).get(field)) for field in body]
        return client, _call(method, text)

    return call


CONNECTOR: dict[str, Callable[[Spec, Request], ConnectorCall]] = {
    "createSession": _create_session,
    "getSession": _plain("Client", "get_session", "sessionId"),
    "deleteSession": _plain("Client", "delete_session", "sessionId"),
    "submitCommand": _submit,
    "pollCommand": _plain("Client", "poll_command", "sessionId", "commandId"),
    "listDevices": _plain("Client", "list_devices"),
    "listTenantDevices": _plain("OperatorClient", "list_devices", "tenant"),
    "enrollDevice": _enroll,
    "revokeDevice": _plain("OperatorClient", "revoke_device", "tenant", "deviceId"),
    "createApiKey": _plain("OperatorClient", "create_api_key", "tenant", body=("actor",)),
    "updateTenantSettings": _plain(
        "OperatorClient", "set_unattended", "tenant", body=("unattendedEnabled",)
    ),
    "putVaultSecret": _plain("OperatorClient", "put_secret", "tenant", "name", body=("value",)),
    "deleteVaultSecret": _plain("OperatorClient", "delete_secret", "tenant", "name"),
}
CREDENTIAL_ARG = {"Client": "api_key", "OperatorClient": "operator_token"}


def _connector(spec: Spec, request: Request, oid: str) -> str:
    client, call = CONNECTOR[oid](spec, request)
    imports = ["import os"]
    if "UUID(" in call:
        imports.append("from uuid import UUID")
    imports += ["", f"from understudy_connector import {client}"]
    if "models." in call:
        imports.append("from understudy_connector.generated import models")
    env = request.credential or "CONSUMER_API_KEY"
    return "\n".join(
        [
            *imports,
            "",
            f"with {client}({json.dumps(request.base)}, "
            f"{CREDENTIAL_ARG[client]}=os.environ[{json.dumps(env)}]) as client:",
            "    result = client." + call.replace("\n", "\n    "),
            "    print(result)",
        ]
    )
