"""Judging a `fetch(<url>)`: the URL normalised as a client would send it, then classes and rules.

Classes, decided here once:
- `data:`, `javascript:`, `vbscript:` and the SSRF-smuggling schemes (`gopher`, `dict`, `ldap`,
  `tftp`, `smb`, `telnet`…): deny. Cloud metadata (169.254.169.254 in any spelling, the whole
  link-local range, fd00:ec2::254, metadata.google.internal…): deny at the floor.
- `file://`: judged as a read of that path, and asked. Other schemes (`ftp`, `ws`, `sftp`…): ask.
- Loopback and private addresses: ask; on an admin port (ssh, docker, etcd, kubelet, databases…)
  the ask is sensitive (no policy resolves it). Only a rule naming the host literally allows them.
- Anything else: deny and ask rules apply, then allow rules; without a rule, ask (egress).

Allow rules never match a URL whose address parsers disagree about (credentials, backslashes,
encoded slashes, a host that is not plain ASCII after IDNA). Dot segments are resolved after one
decoding pass (`%2E%2e` is `..`); a path servers may read differently still (`%252e`, `..;/`,
`%3b`, `%00`, `%u002e`) is not allowed by a rule that names paths, and a deny or ask rule naming
paths on that host applies to it (fails closed).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import unquote, urlsplit

from approvals.permissions.boundaries.access import path_finding
from approvals.permissions.boundaries.paths import Boundary
from approvals.permissions.model import DEFAULT_PORTS, DENIED_SCHEMES, URL, Finding, normalise
from approvals.permissions.policy import BUCKETS, RuleSet

_METADATA_HOSTS = frozenset(
    """metadata.google.internal metadata.goog metadata instance-data instance-data.ec2.internal
    metadata.azure.com metadata.tencentyun.com metadata.packet.net""".split()  # noqa: SIM905
)
_METADATA_IPS = frozenset(
    {"169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254", "fd00:ec2::23"}
)
_ADMIN_PORTS = frozenset(
    {22, 23, 2375, 2376, 2379, 2380, 3306, 5432, 5984, 6379, 6443, 8500, 9000, 9090, 9200, 10250,
     10255, 11211, 15672, 27017, 4243, 8080, 8443, 1433, 1521, 5000, 7001, 8001, 8888, 9999}
)  # fmt: skip


def address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a host spells, in any notation a resolver accepts (decimal, hex, octal, short)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
        if host and re.fullmatch(r"[0-9a-fx.]{1,64}", host) and host[0].isdigit():
            try:
                ip = ipaddress.IPv4Address(socket.inet_aton(host))
            except OSError:
                return None
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.IPv6Network("64:ff9b::/96"):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and int(ip) >> 32 == 0 and int(ip) > 1:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)  # ::169.254.169.254
        return embedded or ip
    return ip


_REBINDING = (".nip.io", ".sslip.io", ".xip.io", ".traefik.me", ".localtest.me", ".lvh.me")
_EMBEDDED_IP = re.compile(r"(?:^|[.-])(\d{1,3}(?:[.-]\d{1,3}){3})(?=[.-]|$)")


def _embedded_address(host: str) -> str | None:
    """`169.254.169.254.nip.io`, `10-0-0-1.sslip.io`: wildcard DNS answering with the name's address."""
    if not host.endswith(_REBINDING):
        return None
    match = _EMBEDDED_IP.search(host)
    return match.group(1).replace("-", ".") if match else "127.0.0.1"  # localtest.me, lvh.me: loopback


def url_class(url: URL) -> str:
    """`metadata`, `local`, `private`, `public` (for http(s)); the scheme decides the rest."""
    host = url.host
    if host in _METADATA_HOSTS:
        return "metadata"
    host = _embedded_address(host) or host
    ip = address(host)
    if ip is not None:
        if str(ip) in _METADATA_IPS or ip.is_link_local:
            return "metadata"
        if ip.is_loopback or ip.is_unspecified:
            return "local"
        if ip.is_private or ip.is_reserved or ip.is_multicast or ip in ipaddress.ip_network("100.64.0.0/10"):
            return "private"
        return "public"
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal", ".lan", ".home.arpa")):
        return "local"
    return "public"


def judge_fetch(target: str, boundary: Boundary, rules: RuleSet) -> Iterator[Finding]:
    """Every finding for one fetch action."""
    url = normalise(target)
    if isinstance(url, str):
        yield Finding("ask", "high", "risk", f"{url}: {target!r}", egress=True, broad=True)
        return
    if url.scheme in DENIED_SCHEMES:
        yield Finding("deny", "high", "policy", f"{url.scheme}: URLs are never fetched", broad=True)
        return
    if url.scheme == "file":
        yield path_finding(boundary, rules, unquote(urlsplit(target.strip()).path) or "/", write=False)
        yield Finding("ask", "high", "risk", "a file:// URL reads a local file", broad=True)
        return
    klass = url_class(url) if url.host else "public"
    if klass == "metadata":
        yield Finding(
            "deny", "critical", "floor", f"cloud metadata address ({url.host})", egress=True, broad=True
        )
        return
    yield from fetch_findings(url, klass, rules)


def fetch_findings(url: URL, klass: str, rules: RuleSet) -> Iterator[Finding]:
    """Deny and ask rules, then allow rules (not for tricky URLs, other schemes or local hosts)."""
    where = url.host or url.text
    for bucket in BUCKETS:
        for rule in rules.of(bucket, "fetch"):
            if bucket == "allow" and (url.tricky or url.scheme not in ("http", "https")):
                continue
            if url.readings and rule.constrains_path() and rule.matches_url_host(url):
                # Another path the server may serve: allow only if the rule allows every reading,
                # deny or ask if the rule names any (fails closed).
                matching = [rule.matches_url(replace(url, path=r)) for r in url.readings]
                if bucket == "allow" and not all(matching):
                    continue
                if bucket != "allow" and any(matching):
                    reason = f"{bucket} rule {rule.text}: {url.path_tricky}"
                    yield Finding(bucket, "high", "rule", reason, rule=rule.text, egress=True)
                    return
            if bucket == "allow" and klass in ("local", "private") and not rule.names_host(url.host):
                continue
            if rule.matches_url(url):
                yield Finding(
                    bucket, "high", "rule", f"{bucket} rule {rule.text}", rule=rule.text, egress=True
                )
                return
    if url.scheme not in ("http", "https"):
        yield Finding("ask", "high", "risk", f"a {url.scheme}:// URL ({where})", egress=True, broad=True)
    elif klass in ("local", "private"):
        admin = (url.port or DEFAULT_PORTS.get(url.scheme, 0)) in _ADMIN_PORTS
        reason = f"{'an admin port on ' if admin else ''}a {klass} address ({url.text})"
        yield Finding("ask", "high", "boundary", reason, egress=True, broad=True, sensitive=admin)
    else:
        yield Finding("ask", "high", "risk", f"network request to {where}", egress=True, broad=True)
