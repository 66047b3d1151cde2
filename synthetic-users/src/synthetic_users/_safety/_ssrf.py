"""Which targets a run may send browsers to: public HTTPS hosts only (server-side request forgery).

A persona's browser runs inside the service's network, so a target URL is a request the service
makes on the caller's behalf. `TargetPolicy` refuses every URL that could reach something the
caller could not reach from the internet:

- **Scheme**: `https` only. With the operator setting `SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS`
  (local development), `http` and `https` on loopback hosts as well, and nothing else.
- **Authority**: no user name or password; no `\\` or `%` (the WHATWG URL parser browsers use
  reads `\\` as `/` and percent-decodes hosts, so Python's parser and Chromium's would disagree
  on which host is meant); no IPv6 zone identifiers. Any port from 1 to 65535: the address check
  below is what keeps internal hosts out, a public host's other ports are on the internet anyway,
  and Chromium itself refuses its restricted ports (`ERR_UNSAFE_PORT`).
- **Host name**: IDNA-normalised first (full-width digits and ideographic full stops spell
  `127.0.0.1` to a browser), then
  letters, digits and hyphens in dotted labels; a name without a dot and the local-network
  suffixes (`localhost`, `*.localhost`, `.local`, `.internal`, `.home.arpa`, `.localdomain`,
  `.lan`) are refused before any lookup.
- **Numeric hosts**: a host whose last label is numeric is an IPv4 address to a browser, in any
  of `inet_aton`'s forms (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`); only the canonical
  dotted-quad form is accepted, so what is checked is what the browser connects to.
- **Addresses**: every address the name resolves to (A and AAAA, through `getaddrinfo`) must be
  public: not loopback, private (RFC 1918), shared (CGNAT `100.64.0.0/10`), link-local,
  unique-local, site-local, multicast, unspecified, benchmarking (`198.18.0.0/15`),
  documentation, or reserved; IPv4 inside IPv6 (mapped `::ffff:0:0/96`, compatible `::/96`,
  NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is unwrapped and checked as IPv4. One bad address
  refuses the whole name: a browser may connect to any of them.

The API checks at `POST /runs` and the orchestrator checks again when the run starts, because a
name may resolve elsewhere minutes later (DNS rebinding). Egress stays constrained by
Understudy's `allowedOrigins`, which pins every session of the run to the target's origin
(scheme, host and port): a persona can never be navigated, or navigate itself, to any other
origin, internal or not. What this does not close is a name that rebinds *after* the start check
while keeping its origin (a zero-TTL answer that changes between our lookup and the browser's);
pinning the checked addresses in the browser (Chromium's `--host-resolver-rules`) would.

Refusals never name an address the caller did not send: the reason says what kind of address
the name resolved to, not which.

    TargetError (ValueError)
    ├── TargetNotAllowed     the URL, its host or an address it resolves to is not allowed
    └── TargetUnresolvable   the host name does not resolve (or not in time)
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
RESOLVE_TIMEOUT_S: Final = 5.0

_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_NUMERIC_LABEL: Final = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
_LOCAL_SUFFIXES: Final = ("localhost", "local", "internal", "home.arpa", "localdomain", "lan")

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
# Kind of address -> networks, in the order a reason is picked. Written out rather than taken
# from `ipaddress`'s `is_global`, whose answers differ between Python versions (3.11 calls
# 224.0.0.1 and fec0::1 global).
_REFUSED: Final[tuple[tuple[str, tuple[_V4 | _V6, ...]], ...]] = (
    ("an unspecified address", (_V4("0.0.0.0/8"), _V6("::/128"))),
    ("a loopback address", (_V4("127.0.0.0/8"), _V6("::1/128"))),
    (
        "a private network address",
        (_V4("10.0.0.0/8"), _V4("172.16.0.0/12"), _V4("192.168.0.0/16")),
    ),
    ("a shared (carrier-grade NAT) address", (_V4("100.64.0.0/10"),)),
    ("a link-local address", (_V4("169.254.0.0/16"), _V6("fe80::/10"))),
    ("a unique-local address", (_V6("fc00::/7"),)),
    ("a site-local address", (_V6("fec0::/10"),)),
    ("a multicast address", (_V4("224.0.0.0/4"), _V6("ff00::/8"))),
    ("a benchmarking address", (_V4("198.18.0.0/15"), _V6("2001:2::/48"))),
    (
        "a documentation address",
        (
            _V4("192.0.2.0/24"),
            _V4("198.51.100.0/24"),
            _V4("203.0.113.0/24"),
            _V6("2001:db8::/32"),
            _V6("3fff::/20"),
        ),
    ),
    (
        "a reserved address",
        (
            _V4("192.0.0.0/24"),  # IETF protocol assignments
            _V4("192.88.99.0/24"),  # the former 6to4 relay anycast
            _V4("240.0.0.0/4"),  # includes 255.255.255.255
            _V6("100::/64"),  # discard-only
            _V6("64:ff9b:1::/48"),  # local-use NAT64 (RFC 8215): translates to anything
            _V6("2001::/23"),  # IETF protocol assignments, Teredo included
            _V6("5f00::/16"),  # segment routing SIDs
        ),
    ),
)
_LOOPBACK: Final = "a loopback address"


class TargetError(ValueError):
    """A run's target URL is refused; `reason` says why in plain words, for the caller."""

    code = "target_not_allowed"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TargetNotAllowed(TargetError):
    """The URL, its host, or an address the host resolves to, is not a public HTTPS target."""


class TargetUnresolvable(TargetError):
    """The host name does not resolve to any address (or not within the time allowed)."""

    code = "target_unresolvable"


def address_kind(address: IPAddress) -> str | None:
    """What kind of non-public address this is (`"a loopback address"`), or None when public."""
    embedded = _embedded_v4(address) if isinstance(address, ipaddress.IPv6Address) else None
    if embedded is not None:
        return address_kind(embedded)
    for kind, networks in _REFUSED:
        if any(address in network for network in networks):
            return kind
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and routes to, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    value = int(address)
    if value >> 32 == 0x0064_FF9B << 64:  # NAT64 well-known prefix 64:ff9b::/96
        return ipaddress.IPv4Address(value & 0xFFFF_FFFF)
    if value >> 32 == 0 and value > 1:  # IPv4-compatible ::a.b.c.d (deprecated, still parsed)
        return ipaddress.IPv4Address(value)
    return None


@dataclass(frozen=True)
class Target:
    """A target URL that passed the syntactic checks."""

    scheme: str
    host: str  # IDNA-normalised, lower case, no trailing dot; an IP literal without brackets
    port: int
    address: IPAddress | None  # set when the host is an IP literal


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (A and AAAA), as the system resolver answers."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class TargetPolicy:
    """Decides whether a run may target a URL (see the module docstring for the rules).

    Args:
        allow_loopback: Also allow `http` and `https` on loopback hosts (`127.0.0.0/8`, `::1`,
            `localhost`); for local development only.
        resolver: `(host, port) -> addresses`; the system resolver by default. Tests pass a stub.
        resolve_timeout_s: How long a lookup may take before the name counts as unresolvable.
    """

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        resolver: Callable[[str, int], Awaitable[Sequence[str]]] | None = None,
        resolve_timeout_s: float = RESOLVE_TIMEOUT_S,
    ) -> None:
        self.allow_loopback = allow_loopback
        self._resolve = resolver or system_resolver
        self._timeout_s = resolve_timeout_s

    def parse(self, url: str) -> Target:
        """The checks that need no lookup.

        Raises:
            TargetNotAllowed: the URL is refused; `reason` says why.
        """
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("https", "http"):
            raise TargetNotAllowed("only https:// targets are allowed")
        authority = parts.netloc
        if "@" in authority:
            raise TargetNotAllowed(
                "must not carry a user name or password; store credentials with the API"
            )
        if "\\" in authority or "%" in authority:
            raise TargetNotAllowed("the host must not contain '\\' or '%'")
        try:
            port = parts.port
        except ValueError:
            raise TargetNotAllowed("the port is not a number between 1 and 65535") from None
        if port == 0:
            raise TargetNotAllowed("the port is not a number between 1 and 65535")
        raw = parts.hostname or ""
        if not raw:
            raise TargetNotAllowed("the URL has no host")
        host, address = _host(raw, authority)
        target = Target(scheme, host, port or (443 if scheme == "https" else 80), address)
        loopback = _is_loopback_name(target)
        if scheme == "http" and not (self.allow_loopback and loopback):
            raise TargetNotAllowed("only https:// targets are allowed")
        if loopback and not self.allow_loopback:
            raise TargetNotAllowed("the host is this machine (loopback), which is not allowed")
        if target.address is not None:
            self._check_address(target.address, literal=True)
        elif not loopback:
            _check_name(target.host)
        return target

    async def check(self, url: str) -> Target:
        """`parse`, then resolve the host and check every address it resolves to.

        Raises:
            TargetNotAllowed: the URL, or one of its addresses, is refused.
            TargetUnresolvable: the name resolves to nothing (or not in time).
        """
        target = self.parse(url)
        if target.address is not None:
            return target
        try:
            async with asyncio.timeout(self._timeout_s):
                found = await self._resolve(target.host, target.port)
        except TimeoutError:
            raise TargetUnresolvable(
                f"the host name did not resolve within {self._timeout_s:g} s"
            ) from None
        except (OSError, UnicodeError):  # socket.gaierror is an OSError
            raise TargetUnresolvable("the host name does not resolve to any address") from None
        if not found:
            raise TargetUnresolvable("the host name does not resolve to any address")
        for text in found:
            try:
                # A link-local answer may carry a scope (`fe80::1%eth0`); the address decides.
                address = ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError:
                raise TargetNotAllowed(
                    "the host name resolves to something else than an address"
                ) from None
            self._check_address(address, literal=False)
        return target

    async def refusal(self, url: str) -> str | None:
        """Why `url` is refused now (`check` in one call, for the orchestrator), or None."""
        try:
            await self.check(url)
        except TargetError as exc:
            return exc.reason
        return None

    def _check_address(self, address: IPAddress, *, literal: bool) -> None:
        kind = address_kind(address)
        if kind is None or (kind == _LOOPBACK and self.allow_loopback):
            return
        subject = "the host is" if literal else "the host name resolves to"
        raise TargetNotAllowed(f"{subject} {kind}, which is not allowed")


def _host(raw: str, authority: str) -> tuple[str, IPAddress | None]:
    """The normalised host and, for an IP literal, its address."""
    if authority.rsplit("@", 1)[-1].startswith("["):
        if "%" in raw:
            raise TargetNotAllowed("IPv6 zone identifiers are not allowed")
        try:
            v6 = ipaddress.IPv6Address(raw)
        except ValueError:
            raise TargetNotAllowed("the host is not a valid IPv6 address") from None
        return str(v6), v6
    try:
        # Python's IDNA codec (IDNA 2003 with nameprep) maps what browsers map: full-width
        # digits and ideographic full stops, case, compatibility characters.
        host = raw.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise TargetNotAllowed("the host is not a valid domain name") from None
    host = host.removesuffix(".")
    labels = host.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # A browser reads this host as an IPv4 address, whatever form it is written in.
        try:
            v4 = ipaddress.IPv4Address(host)
        except ValueError:
            raise TargetNotAllowed(
                "a numeric host must be an IPv4 address written as four decimal numbers"
            ) from None
        return str(v4), v4
    if not all(_LABEL.fullmatch(label) for label in labels) or len(host) > 253:
        raise TargetNotAllowed("the host is not a valid domain name")
    return host, None


def _is_loopback_name(target: Target) -> bool:
    if target.address is not None:
        return address_kind(target.address) == _LOOPBACK
    return target.host == "localhost" or target.host.endswith(".localhost")


def _check_name(host: str) -> None:
    if "." not in host:
        raise TargetNotAllowed("the host must be a fully qualified domain name (it has no dot)")
    for suffix in _LOCAL_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            raise TargetNotAllowed(f"hosts under .{suffix} are local names, which are not allowed")
