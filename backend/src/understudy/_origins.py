"""Canonical web origins: the ``allowedOrigins`` of an unattended session.

The extension compares each navigation with ``new URL(url).origin``, so the canonical form here
must be what a browser would produce: lower-case scheme, lower-case host in IDNA (punycode) form,
and the port only when it is not the scheme's default. Anything a browser would normalise in a way
we cannot reproduce exactly is refused rather than guessed, so a session's policy can only ever be
narrower than intended.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Sequence

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_MAX_ORIGIN_CHARS: Final = 2048
_EXAMPLE: Final = "like https://example.com"
_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
_NUMERIC_LABEL = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9]+)")
# Characters that IDNA 2003 (Python's "idna" codec) and UTS #46 non-transitional processing
# (browsers) encode differently: sharp s, final sigma, zero-width joiner and non-joiner.
_IDNA_DEVIATIONS: Final = frozenset("\u00df\u03c2\u200c\u200d")


class OriginError(ValueError):
    """An origin was refused.

    Attributes:
        index: Position of the offending value in the list.
        reason: What is wrong and what to do, without the field prefix.
        message: ``"<field>[<index>]: <reason>"``, ready for a problem ``detail``.
    """

    def __init__(self, field: str, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        self.message = f"{field}[{index}]: {reason}"
        super().__init__(self.message)


class _Refused(Exception):
    pass


def is_loopback_host(host: str) -> bool:
    """Return True for ``localhost``, any 127.0.0.0/8 address and ``::1`` (bracketed or not)."""
    host = host.lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def _canonical_host(netloc_host: str) -> str:
    if netloc_host.startswith("["):
        if not netloc_host.endswith("]") or "%" in netloc_host:
            raise _Refused("the IPv6 address is not valid; write it like https://[2001:db8::1]")
        try:
            return f"[{ipaddress.IPv6Address(netloc_host[1:-1]).compressed}]"
        except ValueError:
            raise _Refused(
                "the IPv6 address is not valid; write it like https://[2001:db8::1]"
            ) from None
    if not netloc_host:
        raise _Refused(f"the host is missing; give the origin {_EXAMPLE}")
    if _IDNA_DEVIATIONS & set(netloc_host):
        raise _Refused("the host contains ß, ς or a zero-width joiner; give its xn-- punycode form")
    try:
        host = netloc_host.lower().encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _Refused("the host is not a valid domain name") from None
    if not _HOST.fullmatch(host):
        raise _Refused("the host contains characters that are not allowed in a domain name")
    last_label = host.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last_label):
        # Browsers read hosts such as 127.1 or 0x7f.0.0.1 as IPv4 addresses; accept only the
        # dotted-quad spelling, which is already canonical.
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise _Refused(
                "the IPv4 address is not valid; write four decimal numbers, like http://127.0.0.1"
            ) from None
    return host


def _port(netloc: str, host_part: str) -> int | None:
    port_text = netloc[len(host_part) :].removeprefix(":")
    if port_text == "":
        return None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise _Refused("the port is not valid; use a number from 1 to 65535")
    return int(port_text)


def _origin(value: str, *, strict: bool) -> str:
    """Return the canonical origin of ``value``; ``strict`` refuses anything beyond an origin."""
    if "\\" in value:
        raise _Refused("backslashes are not allowed; give the origin " + _EXAMPLE)
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unbalanced "[" in the host
        raise _Refused(f"is not a valid URL; give the origin {_EXAMPLE}") from None
    scheme = parts.scheme
    if not scheme:
        raise _Refused(f"the scheme is missing; give the origin {_EXAMPLE}")
    if scheme not in _DEFAULT_PORTS:
        raise _Refused(
            f"only https origins are allowed (http for loopback hosts); give one {_EXAMPLE}"
        )
    if not value[len(scheme) + 1 :].startswith("//") or not parts.netloc:
        raise _Refused(f"the host is missing; give the origin {_EXAMPLE}")
    netloc = parts.netloc
    if "@" in netloc:
        if strict:
            raise _Refused("credentials are not allowed; remove the user:password@ part")
        netloc = netloc.rsplit("@", 1)[1]
    if strict:
        before_fragment, has_fragment, _ = value.partition("#")
        if parts.path not in ("", "/"):
            raise _Refused(f"paths are not allowed; give the origin only, {_EXAMPLE}")
        if "?" in before_fragment:
            raise _Refused(f"queries are not allowed; give the origin only, {_EXAMPLE}")
        if has_fragment:
            raise _Refused(f"fragments are not allowed; give the origin only, {_EXAMPLE}")
    if netloc.startswith("["):
        host_part = netloc[: netloc.find("]") + 1] if "]" in netloc else netloc
    else:
        host_part = netloc.rsplit(":", 1)[0]
    host = _canonical_host(host_part)
    port = _port(netloc, host_part)
    if strict and scheme == "http" and not is_loopback_host(host):
        raise _Refused(
            "http is allowed only for loopback hosts (localhost, 127.0.0.1, [::1]); use https"
        )
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def canonicalize_origins(values: Sequence[object], *, field: str = "allowedOrigins") -> list[str]:
    """Canonicalise, deduplicate and sort exact origins.

    Args:
        values: Origins as the caller gave them.
        field: Name used in error messages.

    Returns:
        The canonical origins, deduplicated and sorted.

    Raises:
        OriginError: the first value that is not an exact HTTPS origin (or HTTP on a loopback host).
    """
    canonical: set[str] = set()
    for index, value in enumerate(values):
        try:
            if not isinstance(value, str) or not value:
                raise _Refused(f"must be a non-empty string, {_EXAMPLE}")
            if len(value) > _MAX_ORIGIN_CHARS:
                raise _Refused(f"is longer than {_MAX_ORIGIN_CHARS} characters")
            if any(char.isspace() or not char.isprintable() for char in value):
                raise _Refused("whitespace and control characters are not allowed; remove them")
            if "*" in value:
                raise _Refused(f"wildcards are not allowed; list each exact origin, {_EXAMPLE}")
            canonical.add(_origin(value, strict=True))
        except _Refused as refused:
            raise OriginError(field, index, str(refused)) from None
    return sorted(canonical)


def origin_of_url(url: str) -> str | None:
    """Return the canonical origin of an http(s) URL; None for about:blank, chrome:// or invalid."""
    if not url or any(char.isspace() or not char.isprintable() for char in url):
        return None
    try:
        return _origin(url, strict=False)
    except (_Refused, ValueError):
        return None
