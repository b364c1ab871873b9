"""Egress, executed: the proxy reaches only the approved hosts and never a non-public address,
fetch_url follows the same rules, and no host unix socket is reachable from a command."""

from __future__ import annotations

import shutil
import socket
import threading
import uuid
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.tools.fetch import fetch_text
from orchestrator.tools.proxy import EgressRefused, EgressRules, host_allowed, is_public, pin
from orchestrator.tools.sandbox import Sandbox, SandboxSpec
from tests.orchestrator.tools.conftest import needs_bwrap

FAKE_PUBLIC = "docs.example.test"


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"reached {self.path} as {self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def _to_loopback(host: str, port: int) -> Sequence[str]:
    """A resolver for tests: the fake public name is the local server; nothing else resolves."""
    if host == FAKE_PUBLIC:
        return ["127.0.0.1"]
    raise OSError(f"unknown host {host}")


# The test-only flag: the local server stands in for a public one. Without it, the same name is refused.
LOCAL = EgressRules(resolver=_to_loopback, allow_private=True)
STRICT = EgressRules(resolver=_to_loopback)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.100.100.200",  # shared address space (a cloud's metadata too)
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",  # NAT64 of the metadata address
        "2002:7f00:1::",  # 6to4 of loopback
        "fe80::1",
        "fd00:ec2::254",
        "ff02::1",
        "fe80::1%eth0",
        "not an address",
    ],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert is_public(address)


def test_host_matching() -> None:
    assert host_allowed("GitHub.com.", 443, ["github.com"])
    assert host_allowed("api.github.com", 443, ["*.github.com"])
    assert not host_allowed("github.com.evil.io", 443, ["github.com"])
    assert not host_allowed("evilgithub.com", 443, ["*.github.com"])
    assert host_allowed("pypi.org", 8443, ["pypi.org:8443"])
    assert not host_allowed("pypi.org", 443, ["pypi.org:8443"])
    assert not host_allowed("pypi.org", 443, [])


async def test_pin_refuses_a_name_that_resolves_to_any_inner_address() -> None:
    async def rebinding(host: str, port: int) -> Sequence[str]:
        return ["93.184.216.34", "127.0.0.1"]

    with pytest.raises(EgressRefused, match="non-public"):
        await pin("rebind.example", 80, resolver=rebinding)
    with pytest.raises(EgressRefused, match="not a public address"):
        await pin("[::ffff:127.0.0.1]", 80)
    assert await pin("x", 80, resolver=lambda h, p: _const(["93.184.216.34"])) == "93.184.216.34"


async def _const(value: Sequence[str]) -> Sequence[str]:
    return value


def _spec(ws: Path, hosts: tuple[str, ...]) -> SandboxSpec:
    return SandboxSpec(workspace=ws, network=True, hosts=hosts, timeout_s=30)


@needs_bwrap
async def test_an_approved_host_is_reachable_through_the_proxy_by_http_and_connect(
    tmp_path: Path, port: int
) -> None:
    sandbox = Sandbox("bwrap", egress=LOCAL)
    for flags in ("", "-p"):  # plain proxying, then a CONNECT tunnel (what https uses)
        result = await sandbox.run(
            f"curl -sS {flags} http://{FAKE_PUBLIC}:{port}/x", _spec(tmp_path, (FAKE_PUBLIC,))
        )
        assert f"reached /x as {FAKE_PUBLIC}:{port}" in result.output.decode(), result.render()


@needs_bwrap
@pytest.mark.parametrize(
    ("rules", "url", "hosts", "why"),
    [
        # The name is approved but resolves to loopback: refused after resolution.
        (STRICT, f"http://{FAKE_PUBLIC}:{{port}}/x", (FAKE_PUBLIC,), "non-public"),
        (EgressRules(), "http://localhost:{port}/x", ("localhost",), "non-public"),
        (EgressRules(), "http://127.0.0.1:{port}/x", ("127.0.0.1",), "not a public address"),
        # Another host than the approval's, even one the proxy could reach.
        (LOCAL, "http://other.example.test:{port}/x", (FAKE_PUBLIC,), "not on the approval"),
        (LOCAL, f"http://{FAKE_PUBLIC}:{{port}}/x", (), "not on the approval"),
    ],
)
async def test_the_proxy_refuses_what_the_approval_does_not_name_and_every_inner_address(
    tmp_path: Path, port: int, rules: EgressRules, url: str, hosts: tuple[str, ...], why: str
) -> None:
    sandbox = Sandbox("bwrap", egress=rules)
    for flags in ("", "-p"):
        result = await sandbox.run(f"curl -sS {flags} {url.format(port=port)}", _spec(tmp_path, hosts))
        assert "reached" not in result.output.decode()
        assert any(why in refused for refused in result.egress_refused), result.render()
        assert "[egress refused: " in result.render()


@needs_bwrap
async def test_direct_connections_bypassing_the_proxy_reach_nothing(tmp_path: Path, port: int) -> None:
    sandbox = Sandbox("bwrap", egress=LOCAL)
    command = f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/x; echo rc=$?"
    result = await sandbox.run(command, _spec(tmp_path, ("127.0.0.1",)))
    assert "reached" not in result.output.decode()
    assert "rc=7" in result.output.decode()  # could not connect: only loopback exists inside


async def test_fetch_url_refuses_inner_addresses_behind_any_name(port: int) -> None:
    for url, rules in [
        (f"http://localhost:{port}/x", EgressRules()),
        (f"http://127.0.0.1:{port}/x", EgressRules()),
        (f"http://[::ffff:127.0.0.1]:{port}/x", EgressRules()),
        (f"http://{FAKE_PUBLIC}:{port}/x", STRICT),
    ]:
        result = await fetch_text(url, timeout_s=5, limit=1000, rules=rules)
        assert result.startswith("fetch refused: "), (url, result)


async def test_fetch_url_connects_to_the_pinned_address_with_the_name_as_host(port: int) -> None:
    result = await fetch_text(f"http://{FAKE_PUBLIC}:{port}/page", timeout_s=5, limit=1000, rules=LOCAL)
    assert result.startswith("HTTP 200")
    assert result.endswith(f"reached /page as {FAKE_PUBLIC}:{port}")


def _listen(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    return server


@needs_bwrap
@pytest.mark.parametrize("base", ["/run", "/tmp", "/var/tmp", "/dev/shm"])
async def test_no_host_unix_socket_is_reachable(tmp_path: Path, base: str) -> None:
    folder = Path(base) / f"massgen-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError:
        pytest.skip(f"cannot create a socket folder in {base} here")
    try:
        sock = folder / "host.sock"
        server = _listen(sock)
        probe = (
            f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r}); print('CONNECTED')"
        )
        with server:
            for network in (False, True):
                spec = SandboxSpec(workspace=tmp_path, network=network, timeout_s=20)
                result = await Sandbox("bwrap").run(f'python3 -c "{probe}"; echo rc=$?', spec)
                assert "CONNECTED" not in result.output.decode()
                assert "rc=1" in result.output.decode()
            # The probe itself works: on the host it connects.
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(sock))
            client.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@needs_bwrap
async def test_home_is_scratch_and_the_workspace_git_config_is_not_global(tmp_path: Path) -> None:
    (tmp_path / ".gitconfig").write_text("[alias]\n\tst = !touch PWNED\n[core]\n\thooksPath = /tmp\n")
    (tmp_path / ".config" / "git").mkdir(parents=True)
    (tmp_path / ".config" / "git" / "config").write_text("[user]\n\tname = planted\n")
    sandbox = Sandbox("bwrap")
    spec = SandboxSpec(workspace=tmp_path, timeout_s=20)
    command = (
        "echo HOME=$HOME; git config --get alias.st; git config --get core.hooksPath; "
        "git config --get user.name; echo secret > ~/.note; ls -A ~"
    )
    first = (await sandbox.run(command, spec)).output.decode()
    assert "HOME=/tmp/home" in first
    assert "PWNED" not in first
    assert "planted" not in first
    assert "hooksPath" not in first
    assert ".note" in first
    second = (await sandbox.run("ls -A ~ | wc -l", spec)).output.decode()
    assert second.strip() == "0"  # fresh per command
    assert not (tmp_path / ".note").exists()  # and never in the workspace (so never copied back)


async def test_unconfined_commands_get_a_scratch_home_too(tmp_path: Path) -> None:
    result = await Sandbox("none").run("echo $HOME; touch ~/x", SandboxSpec(workspace=tmp_path, timeout_s=10))
    home = result.output.decode().splitlines()[0]
    assert home != str(tmp_path)
    assert "massgen-home-" in home
    assert not Path(home).exists()  # removed after the command
