"""Which endpoint URLs a customer may register.

HTTPS only, to a public name or address: private, loopback, link-local and unique-local
addresses, and `.internal`, `.local` and `localhost` names, are refused, so a webhook cannot be
pointed at the service's own network. With the operator's loopback-for-development setting on,
`http://` and `https://` to a loopback address (`127.0.0.1`, `::1`, `localhost`) are allowed too.
Names are checked as written here, at registration; `resolved_problem` checks every address a
name resolves to before each delivery attempt, so a public name pointed at a private address
(DNS rebinding) is refused when it matters.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Final
from urllib.parse import urlsplit

MAX_URL: Final = 2048
_LOOPBACK_NAMES: Final = ("localhost",)
_PRIVATE_SUFFIXES: Final = (".internal", ".local", ".localhost")


def endpoint_problem(url: str, *, allow_loopback: bool = False) -> str | None:
    """What is wrong with `url` as a webhook endpoint, or None when it is acceptable."""
    if len(url) > MAX_URL:
        return f"at most {MAX_URL} characters"
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 (parsing it is the check)
    except ValueError:
        return "the port is not a number between 0 and 65535"
    host = (parts.hostname or "").rstrip(".").lower()
    if parts.scheme not in ("http", "https") or not host:
        return "must be an absolute https URL, like https://hooks.example.com/synthetic-users"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password"
    if parts.fragment:
        return "must not have a #fragment"
    loopback = host in _LOOPBACK_NAMES or _is_loopback(host)
    if loopback and allow_loopback:
        return None
    if parts.scheme != "https":
        return "must use https (http is allowed only for loopback in development)"
    if loopback or host.endswith(_PRIVATE_SUFFIXES) or _is_private(host):
        return "must be a public host: private, loopback and link-local addresses are refused"
    return None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _is_loopback(host: str) -> bool:
    address = _address(host)
    return address is not None and address.is_loopback


def _is_private(host: str) -> bool:
    address = _address(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


async def resolved_problem(url: str, *, allow_loopback: bool = False) -> str | None:
    """Why `url` must not be sent to now (a name resolving to a private address), or None."""
    parts = urlsplit(url)
    host = (parts.hostname or "").strip("[]")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"the name does not resolve: {exc.strerror or exc}"
    for info in infos:
        address = str(info[4][0])
        if _is_loopback(address) and allow_loopback:
            continue
        if _is_private(address):
            return f"refused: the name resolves to a non-public address ({address})"
    return None
