"""The HTTP layer: the routes of spec/openapi.yaml and the two WebSocket routes, on Litestar.

Handlers parse bodies with the generated models (so the spec, not this package, says what is
valid) and hand the work to the actors. Every error is problem+json.

- `_app`: `create_app`, the route list, the durable-response middleware.
- `_auth`: the consumer, device and operator credentials as guards; `services`, `who` and
  `device` as dependencies; `unless_revoked` for a consumer's long waits.
- `_parsing`: bodies (size, media type, depth, duplicate keys, strict models) and path ids.
- `_responses`, `_errors`: JSON answers, and problem+json for every error.
- `_sessions`, `_commands`, `_devices`, `_operator`, `_operations`: the routes, by resource.
- `_sockets`: the device and session sockets, one handler.
- `_fast`: `FastCommands`, in front of the app (`_server.server_config`): the command route's
  plain requests through the route's own steps, without the framework's per-request work.
"""

from understudy.http._app import create_app

__all__ = ["create_app"]
