"""Canonical origins for allowedOrigins, and the origin of a navigated URL."""

from __future__ import annotations

import pytest

from understudy._origins import (
    OriginError,
    canonicalize_origins,
    is_loopback_host,
    origin_of_url,
)


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("HTTPS://Example.COM:443/", "https://example.com"),
        ("https://example.com", "https://example.com"),
        ("https://example.com:8443", "https://example.com:8443"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.5.6.7", "http://127.5.6.7"),
        ("http://localhost", "http://localhost"),
        ("http://LOCALHOST:80/", "http://localhost"),
        ("http://[::1]:3000", "http://[::1]:3000"),
        ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
        ("https://BÜCHER.example", "https://xn--bcher-kva.example"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
        ("https://login.example.com", "https://login.example.com"),
        ("https://203.0.113.9", "https://203.0.113.9"),
    ],
)
def test_accepted_origins_are_canonicalised(given: str, canonical: str) -> None:
    assert canonicalize_origins([given]) == [canonical]


@pytest.mark.parametrize(
    ("given", "complaint"),
    [
        ("https://*.example.com", "wildcards are not allowed"),
        ("https://example.*", "wildcards are not allowed"),
        ("https://user:pw@example.com", "credentials are not allowed"),
        ("https://user@example.com", "credentials are not allowed"),
        ("https://example.com/path", "paths are not allowed"),
        ("https://example.com//", "paths are not allowed"),
        ("https://example.com?", "queries are not allowed"),
        ("https://example.com/?a=1", "queries are not allowed"),
        ("https://example.com#", "fragments are not allowed"),
        ("https://example.com/#top", "fragments are not allowed"),
        ("http://example.com", "http is allowed only for loopback hosts"),
        ("http://localhost.example.com", "http is allowed only for loopback hosts"),
        ("http://10.0.0.1", "http is allowed only for loopback hosts"),
        ("ftp://example.com", "only https origins are allowed"),
        ("chrome-extension://abcdefghijklmnopabcdefghijklmnop", "only https origins are allowed"),
        ("example.com", "the scheme is missing"),
        ("https:example.com", "the host is missing"),
        ("https://", "the host is missing"),
        ("https://:443", "the host is missing"),
        ("https://example.com:99999", "the port is not valid"),
        ("https://example.com:0", "the port is not valid"),
        ("https://example.com:+80", "the port is not valid"),
        ("https://example.com:8o", "the port is not valid"),
        (" https://example.com", "whitespace"),
        ("https://example.com\n", "whitespace"),
        ("https://exa mple.com", "whitespace"),
        ("https://example.com\\evil", "backslashes are not allowed"),
        ("https://exa%6Dple.com", "not allowed in a domain name"),
        ("https://a..example", "not a valid domain name"),
        ("http://127.1", "IPv4 address is not valid"),
        ("http://0x7f.0.0.1", "IPv4 address is not valid"),
        ("https://[::1", "is not a valid URL"),
        ("https://[fe80::1%25eth0]", "IPv6 address is not valid"),
        ("https://faß.example", "punycode"),
        ("", "must be a non-empty string"),
        ("https://" + "a" * 2048 + ".example", "longer than 2048"),
    ],
)
def test_refused_origins_say_what_is_wrong(given: str, complaint: str) -> None:
    with pytest.raises(OriginError) as caught:
        canonicalize_origins([given])
    assert complaint in caught.value.reason
    assert caught.value.message.startswith("allowedOrigins[0]: ")
    assert str(caught.value) == caught.value.message


def test_path_error_message_is_actionable() -> None:
    with pytest.raises(OriginError) as caught:
        canonicalize_origins(["https://a.example", "https://b.example", "https://example.com/x"])
    assert caught.value.index == 2
    assert caught.value.message == (
        "allowedOrigins[2]: paths are not allowed; give the origin only, like https://example.com"
    )


def test_non_string_values_are_refused_with_their_index() -> None:
    with pytest.raises(OriginError) as caught:
        canonicalize_origins(["https://example.com", 42])
    assert caught.value.index == 1


def test_origins_are_deduplicated_and_sorted() -> None:
    given = [
        "https://b.example",
        "HTTPS://A.EXAMPLE:443",
        "https://a.example/",
        "http://localhost:3000",
        "https://b.example",
    ]
    assert canonicalize_origins(given) == [
        "http://localhost:3000",
        "https://a.example",
        "https://b.example",
    ]


def test_field_name_can_be_changed_for_other_settings() -> None:
    with pytest.raises(OriginError, match=r"^SOCKET_ORIGINS\[0\]: wildcards"):
        canonicalize_origins(["*"], field="SOCKET_ORIGINS")


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://Example.com:443/a/b?c=d#e", "https://example.com"),
        ("https://user:pw@example.com:8443/", "https://example.com:8443"),
        ("http://example.com/login", "http://example.com"),
        ("http://[::1]:9000/x", "http://[::1]:9000"),
        ("https://bücher.example/kasse", "https://xn--bcher-kva.example"),
        ("about:blank", None),
        ("chrome://newtab/", None),
        ("data:text/html,hello", None),
        ("javascript:alert(1)", None),
        ("file:///etc/passwd", None),
        ("https://[::1", None),
        ("https://example.com:99999/", None),
        ("", None),
        (" https://example.com", None),
    ],
)
def test_origin_of_url(url: str, origin: str | None) -> None:
    assert origin_of_url(url) == origin


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("app.localhost", False),
        ("128.0.0.1", False),
        ("example.com", False),
        ("[::2]", False),
        ("", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
