"""The egress filter: an HTTP and CONNECT proxy open only to the hosts an approval names.

A command always runs in its own network namespace, where nothing but loopback exists. When its
egress was approved, the sandbox starts one `EgressProxy` for that command on a unix socket (a file,
so it crosses the namespace: sandbox-runtime's design), bind-mounts the socket, and a tiny bridge
inside (`BRIDGE`) listens on 127.0.0.1 so `HTTP_PROXY`/`HTTPS_PROXY` work for ordinary tools.

The proxy resolves each name itself, refuses any address that is not public (loopback, private,
link-local and cloud metadata, multicast, unspecified, reserved, also behind IPv4-mapped, 6to4 and
NAT64 IPv6 forms), and connects to exactly the address it checked, so a name cannot be re-resolved
to an internal one between the check and the connection. `fetch_url` uses the same `pin`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_HEAD_LIMIT = 65536
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 15.0
_CHUNK = 65536
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")
PROXY_PORT = 3128  # where the bridge listens inside the sandbox


@dataclass(frozen=True, slots=True, kw_only=True)
class EgressRules:
    """How names are resolved for egress; `allow_private` is for tests with a local server only."""

    resolver: Resolver | None = None
    allow_private: bool = False

    def proxy(self, hosts: Sequence[str]) -> EgressProxy:
        """One command's proxy, open to `hosts`."""
        return EgressProxy(hosts, resolver=self.resolver, allow_private=self.allow_private)


DEFAULT_EGRESS = EgressRules()


class EgressRefused(Exception):
    """Why a connection was not made; the text goes to the command (and the tool result)."""


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses `host` resolves to, through the host's resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_public(address: str) -> bool:
    """Whether `address` is a globally routable unicast address (never loopback, private, metadata...)."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return False
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    return ip.is_global and not (
        ip.is_multicast
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_unspecified
    )


def host_allowed(host: str, port: int, allowed: Sequence[str]) -> bool:
    """Whether `host:port` is on the approval's list (`name`, `name:port` or `*.domain`)."""
    name = host.lower().rstrip(".")
    for entry in allowed:
        pattern, _, entry_port = entry.lower().rstrip(".").partition(":")
        if entry.startswith("[") or (entry_port and not entry_port.isdigit()):
            pattern, entry_port = entry.lower(), ""  # an IPv6 literal: no port suffix
        if entry_port and int(entry_port) != port:
            continue
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
        if name == pattern.strip("[]"):
            return True
    return False


async def pin(host: str, port: int, *, resolver: Resolver | None = None, allow_private: bool = False) -> str:
    """The one address to connect to for `host`, checked; raise `EgressRefused` if none may be used.

    A name that resolves to any non-public address is refused as a whole (a rebinding name mixes
    them). `allow_private` exists for tests that reach a local server under a fake public name.
    """
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare.split("%")[0])
        if not allow_private and not is_public(bare):
            raise EgressRefused(f"{bare} is not a public address: refused")
        addresses: Sequence[str] = [bare]
    except ValueError:
        try:
            addresses = await (resolver or system_resolver)(bare, port)
        except OSError as exc:
            raise EgressRefused(f"{host} does not resolve: {exc}") from None
    if not addresses:
        raise EgressRefused(f"{host} does not resolve")
    if not allow_private:
        inner = [a for a in addresses if not is_public(a)]
        if inner:
            raise EgressRefused(f"{host} resolves to a non-public address ({inner[0]}): refused")
    return addresses[0]


class EgressProxy:
    """One command's proxy: serves a unix socket, open only to `hosts`, and notes what it refused."""

    def __init__(
        self, hosts: Sequence[str], *, resolver: Resolver | None = None, allow_private: bool = False
    ) -> None:
        self.hosts = tuple(hosts)
        self.refused: list[str] = []
        self._resolver = resolver
        self._allow_private = allow_private
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, path: Path) -> None:
        """Listen on the unix socket `path` (its folder should be private to the bot)."""
        self._server = await asyncio.start_unix_server(self._serve, path=str(path), limit=_HEAD_LIMIT)

    async def close(self) -> None:
        """Stop listening and cut every open tunnel."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        first, _, rest = head.partition(b"\r\n")
        parts = first.decode("latin-1").split(" ")
        if len(parts) != 3:
            return await _reply(writer, 400, "malformed request line")
        method, target, version = parts
        try:
            host, port, path = _target(method, target)
        except ValueError as exc:
            return await _reply(writer, 400, str(exc))
        if not host_allowed(host, port, self.hosts):
            self.refused.append(f"{host}:{port} (not on the approval)")
            return await _reply(writer, 403, f"{host} is not among the approved hosts {list(self.hosts)}")
        try:
            address = await pin(host, port, resolver=self._resolver, allow_private=self._allow_private)
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(address, port), _CONNECT_TIMEOUT_S
            )
        except (EgressRefused, OSError, TimeoutError) as exc:
            self.refused.append(f"{host}:{port} ({exc or type(exc).__name__})")
            return await _reply(writer, 403 if isinstance(exc, EgressRefused) else 502, str(exc))
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(_origin_request(method, path, version, rest))
            await _pipe(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()


def _target(method: str, target: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of a proxy request."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError("CONNECT needs host:port")
        return host.strip("[]"), int(port), ""
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("only absolute http:// URLs (use CONNECT for https)")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return url.hostname, url.port or 80, path


def _origin_request(method: str, path: str, version: str, rest: bytes) -> bytes:
    headers = [
        line
        for line in rest.split(b"\r\n")
        if line and line.split(b":")[0].strip().lower() not in _HOP_HEADERS
    ]
    lines = [f"{method} {path} {version}".encode("latin-1"), *headers, b"Connection: close", b"", b""]
    return b"\r\n".join(lines)


async def _reply(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"massgen egress proxy: {reason}\n".encode()
    title = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    writer.write(
        f"HTTP/1.1 {status} {title}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


async def _pipe(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    async def one_way(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await source.read(_CHUNK):
                sink.write(chunk)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()

    await asyncio.gather(one_way(a_reader, b_writer), one_way(b_reader, a_writer))


# Run inside the sandbox by the system's python3: listen on 127.0.0.1:PORT, relay each connection
# to the proxy's unix socket, and exec the command (the bridge dies with the sandbox's pid namespace).
BRIDGE = r"""
import os, socket, sys, threading
path, port, program, argv = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4:]
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(128)
if os.fork():
    listener.close()
    # The command's side: the seccomp filter (no unix sockets) first, as bubblewrap would load it.
    try:
        import ctypes
        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        code = ctypes.create_string_buffer(program, len(program))
        prog = Prog(len(program) // 8, ctypes.addressof(code))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
            raise OSError(ctypes.get_errno(), "prctl")
    except Exception as exc:
        print(f"sandbox: the seccomp filter could not be installed ({exc}); the command was not run",
              file=sys.stderr)
        os._exit(126)
    os.execv(argv[0], argv)
os.setsid()
for fd in (0, 1, 2):
    os.dup2(os.open(os.devnull, os.O_RDWR), fd)
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
while True:
    client, _ = listener.accept()
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        continue
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
"""
