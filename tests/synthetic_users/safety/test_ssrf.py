"""The target policy against URLs built to reach what the service can reach and callers cannot."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from synthetic_users._safety._ssrf import (
    TargetNotAllowed,
    TargetPolicy,
    TargetUnresolvable,
    address_kind,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

PUBLIC = "93.184.215.14"


@dataclass
class Resolver:
    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[tuple[str, int]] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        found = self.answers.get(host, [PUBLIC])
        if not found:
            raise OSError("Name or service not known")
        return found


# Each refused before any lookup: the scheme, the authority, the host's spelling or its name.
HOSTILE = [
    # schemes
    "http://shop.example.com/",
    "ftp://shop.example.com/",
    "file:///etc/passwd",
    "gopher://shop.example.com/",
    # loopback, written every way a browser reads it
    "https://127.0.0.1/",
    "https://127.255.255.254/",
    "https://[::1]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://2130706433/",
    "https://0177.0.0.1/",
    "https://0x7f.0.0.1/",
    "https://0x7f000001/",
    "https://127.1/",
    "https://127.0.1/",
    "https://017700000001/",
    "https://127.0.0.1./",
    "https://\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11/",  # full-width 127.0.0.1
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::127.0.0.1]/",
    "https://[64:ff9b::127.0.0.1]/",
    "https://[2002:7f00:1::]/",
    # private, shared, link-local, unique-local, multicast, unspecified, reserved
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1/",
    "https://[::ffff:192.168.1.1]/",
    "https://[64:ff9b::10.0.0.1]/",
    "https://[2002:c0a8:101::1]/",
    "https://100.64.0.1/",
    "https://169.254.169.254/latest/meta-data/",
    "https://[fe80::1]/",
    "https://[fd00::1]/",
    "https://[fc00::1]/",
    "https://[fec0::1]/",
    "https://224.0.0.1/",
    "https://[ff02::1]/",
    "https://0.0.0.0/",
    "https://0.1.2.3/",
    "https://0/",
    "https://[::]/",
    "https://198.18.0.1/",
    "https://192.0.2.1/",
    "https://240.0.0.1/",
    "https://255.255.255.255/",
    "https://[2001:db8::1]/",
    "https://[64:ff9b:1::a00:1]/",
    "https://[fe80::1%25eth0]/",
    # numeric hosts not written as a dotted quad, even when they mean a public address
    "https://1.2.3/",
    "https://08.8.8.8/",
    "https://8.8.8.8.8/",
    # local names
    "https://localhost/",
    "https://LOCALHOST./",
    "https://admin.localhost/",
    "https://printer.local/",
    "https://metadata.google.internal/",
    "https://router.home.arpa/",
    "https://intranet/",
    "https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",  # full-width localhost
    # authority tricks
    "https://user:pass@shop.example.com/",
    "https://shop.example.com@127.0.0.1/",
    "https://127.0.0.1\\@shop.example.com/",
    "https://%31%32%37.0.0.1/",
    "https://shop.example.com:0/",
    "https://shop_example.com/",
    "https://-shop.example.com/",
]


@pytest.mark.parametrize("url", HOSTILE)
async def test_a_hostile_target_is_refused_before_any_lookup(url: str) -> None:
    resolver = Resolver()
    with pytest.raises(TargetNotAllowed) as refused:
        await TargetPolicy(resolver=resolver).check(url)
    assert resolver.asked == []
    assert refused.value.reason
    assert refused.value.code == "target_not_allowed"


def test_the_table_covers_at_least_forty_forms() -> None:
    assert len(set(HOSTILE)) >= 40


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.example.com/",
        "HTTPS://Shop.Example.COM:8443/path?q=1#top",
        "https://93.184.215.14/",
        "https://[2606:4700::1111]/",
        "https://bücher.example/",  # IDNA: looked up as xn--bcher-kva.example
        "https://shop.example.com./",
    ],
)
async def test_a_public_https_target_is_allowed(url: str) -> None:
    await TargetPolicy(resolver=Resolver()).check(url)


async def test_an_idn_host_is_checked_and_resolved_in_its_punycode_form() -> None:
    resolver = Resolver()
    target = await TargetPolicy(resolver=resolver).check("https://Bücher.example/")
    assert target.host == "xn--bcher-kva.example"
    assert resolver.asked == [("xn--bcher-kva.example", 443)]


@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        ([PUBLIC, "10.1.2.3"], "a private network address"),
        (["2606:4700::1111", "::1"], "a loopback address"),
        ([PUBLIC, "fe80::1%eth0"], "a link-local address"),
        ([PUBLIC, "fd12:3456::1"], "a unique-local address"),
        (["169.254.169.254"], "a link-local address"),
        (["::ffff:10.0.0.1", PUBLIC], "a private network address"),
        (["100.100.1.1"], "a shared (carrier-grade NAT) address"),
        (["127.0.0.1"], "a loopback address"),  # a public-looking name (`127.0.0.1.nip.io`)
        (["0.0.0.0"], "an unspecified address"),  # noqa: S104 (an answer, not a bind)
    ],
)
async def test_a_name_with_any_refused_address_is_refused_without_naming_it(
    answers: list[str], kind: str
) -> None:
    resolver = Resolver({"mixed.example.com": answers})
    with pytest.raises(TargetNotAllowed) as refused:
        await TargetPolicy(resolver=resolver).check("https://mixed.example.com/")
    assert refused.value.reason == f"the host name resolves to {kind}, which is not allowed"
    for address in answers:
        assert address.split("%")[0] not in refused.value.reason


async def test_a_name_that_does_not_resolve_is_unresolvable() -> None:
    resolver = Resolver({"nowhere.example.com": []})
    with pytest.raises(TargetUnresolvable) as refused:
        await TargetPolicy(resolver=resolver).check("https://nowhere.example.com/")
    assert refused.value.code == "target_unresolvable"


async def test_a_lookup_that_hangs_is_unresolvable_after_the_timeout() -> None:
    async def hangs(host: str, port: int) -> Sequence[str]:
        import asyncio

        await asyncio.sleep(60)
        return [PUBLIC]  # pragma: no cover

    policy = TargetPolicy(resolver=hangs, resolve_timeout_s=0.05)
    with pytest.raises(TargetUnresolvable, match="did not resolve within"):
        await policy.check("https://slow.example.com/")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/shop",
        "https://127.0.0.1:8443/",
        "http://127.3.2.1/",
        "http://[::1]:9000/",
        "http://localhost:3000/",
        "https://app.localhost/",
    ],
)
async def test_loopback_targets_are_allowed_only_with_the_setting(url: str) -> None:
    resolver = Resolver({"localhost": ["127.0.0.1", "::1"], "app.localhost": ["127.0.0.1"]})
    with pytest.raises(TargetNotAllowed):
        await TargetPolicy(resolver=resolver).check(url)
    await TargetPolicy(allow_loopback=True, resolver=resolver).check(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.example.com/",  # http stays refused off loopback
        "https://10.0.0.1/",
        "https://169.254.169.254/",
        "https://0.0.0.0/",  # connects to this machine, but is not a loopback address
        "https://2130706433/",
        "http://localhost.example.com/",  # not a loopback name; http refused
    ],
)
async def test_the_loopback_setting_allows_loopback_and_nothing_else(url: str) -> None:
    with pytest.raises(TargetNotAllowed):
        await TargetPolicy(allow_loopback=True, resolver=Resolver()).check(url)


async def test_with_the_setting_localhost_must_still_resolve_to_loopback_only() -> None:
    resolver = Resolver({"localhost": ["127.0.0.1", "10.0.0.5"]})
    with pytest.raises(TargetNotAllowed, match="private network"):
        await TargetPolicy(allow_loopback=True, resolver=resolver).check("http://localhost/")


async def test_refusal_says_why_or_none() -> None:
    policy = TargetPolicy(resolver=Resolver({"in.example.com": ["192.168.0.9"]}))
    assert await policy.refusal("https://ok.example.com/") is None
    reason = await policy.refusal("https://in.example.com/")
    assert reason == "the host name resolves to a private network address, which is not allowed"


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("2002:808:808::1", None),  # 6to4 of a public address
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("127.0.0.1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("64:ff9b::a9fe:a9fe", "a link-local address"),
        ("2002:a9fe:a9fe::", "a link-local address"),
        ("192.168.0.1", "a private network address"),
        ("fc00::1", "a unique-local address"),
        ("ff05::2", "a multicast address"),
        ("2001::1", "a reserved address"),  # Teredo
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind
