"""A fetch target read as a client would send it: one normalised URL, or why it cannot be read.

The rules match it (`fetch(...)` patterns) and the fetch judge classifies it; both read the same
normalisation, so a rule and the judge never disagree about where a URL goes.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}:")
DENIED_SCHEMES = frozenset(
    "data javascript vbscript gopher dict ldap ldaps tftp smb telnet jar netdoc mailto".split()  # noqa: SIM905
)
_HOST_CHARS = re.compile(r"[a-z0-9.\-_]{1,253}")
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}


@dataclass(frozen=True, slots=True)
class URL:
    """A URL as a client sends it: scheme and host lowercased, default port dropped, dots removed."""

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    tricky: str | None  # why parsers may disagree about this URL (allow rules then do not apply)
    # Why servers may read the PATH differently (`%252e`, `..;/`, `%2f`): path rules then fail closed.
    path_tricky: str | None = None
    readings: tuple[str, ...] = ()  # those other paths, normalised

    @property
    def text(self) -> str:
        """The normalised URL (no credentials, no fragment)."""
        port = f":{self.port}" if self.port is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}{port}{self.path}{query}"


def normalise(url: str) -> URL | str:
    """The normalised URL, or why it cannot be read as one."""
    text = url.strip()
    if not _SCHEME.match(text) or text.lower().startswith(("localhost:", "127.0.0.1:")):
        text = "https://" + text
    scheme = text.split(":", 1)[0].lower()
    if scheme in DENIED_SCHEMES:
        return URL(scheme, "", None, "", "", "scheme")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        return f"malformed URL ({exc})"
    tricky = None
    if "@" in parts.netloc:
        tricky = "credentials in the address"
    elif any(ch in text for ch in "\\ \t\r\n") or any(ord(ch) < 32 for ch in text):
        tricky = "backslashes, spaces or control characters"
    host, host_trick = _host(parts.hostname or "")
    tricky = tricky or host_trick
    path = _path(parts.path)
    if "%2f" in parts.path.lower() or "%5c" in parts.path.lower():
        tricky = tricky or "an encoded slash in the path"
    if port == DEFAULT_PORTS.get(scheme):
        port = None
    path_tricky, readings = _path_trick(parts.path, path)
    return URL(scheme, host, port, path, parts.query, tricky, path_tricky, readings)


_PERCENT_U = re.compile(r"%u([0-9a-fA-F]{4})")


def _readings(raw: str) -> set[str]:
    """The paths servers may serve for `raw`, normalised.

    Decoded once or twice (`%252e`), `;` path parameters dropped (Tomcat, Spring: `..;/`),
    backslashes as slashes, IIS `%uXXXX`, cut at an encoded NUL or without it.
    """
    text = _PERCENT_U.sub(lambda m: chr(int(m.group(1), 16)), raw.replace("\\", "/"))
    once = unquote(text)
    readings = {once, unquote(once)}
    readings |= {"/".join(seg.split(";", 1)[0] for seg in r.split("/")) for r in list(readings)}
    readings |= {v for r in list(readings) for v in (r.split("\x00", 1)[0], r.replace("\x00", ""))}
    readings |= {r.replace("\\", "/") for r in list(readings)}
    return {_path(r) for r in readings}


def _path_trick(raw: str, path: str) -> tuple[str | None, tuple[str, ...]]:
    """Why servers may resolve this path to another one than `path`, and those other paths."""
    if "%" not in raw and ";" not in raw and "\\" not in raw:
        return None, ()
    plain = unquote(path)
    others = tuple(sorted(r for r in _readings(raw) if r not in (plain, path)))
    if not others:
        return None, ()
    return f"a path servers may read as {others[0]}", others


def _host(raw: str) -> tuple[str, str | None]:
    host = unquote(raw).lower().rstrip(".")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return host, "a host name that is not valid IDNA"
        return host, "a non-ASCII host name (homoglyphs)"
    if ":" in host:  # IPv6 (urlsplit has removed the brackets)
        return host, "an IPv6 zone" if "%" in host else None
    if not _HOST_CHARS.fullmatch(host):
        return host, "unusual characters in the host"
    return host, None


def _path(raw: str) -> str:
    """Percent-decoded dots and unreserved characters, dot segments removed (`/a/../admin` → `/admin`)."""
    decoded = re.sub(
        r"%([0-9A-Fa-f]{2})",
        lambda m: chr(int(m.group(1), 16)) if chr(int(m.group(1), 16)) in _UNRESERVED else m.group(0),
        raw,
    )
    if not decoded:
        return "/"
    normal = posixpath.normpath("/" + decoded.lstrip("/"))
    normal = "/" + normal.lstrip("/")
    return normal + "/" if decoded.endswith("/") and normal != "/" else normal


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
