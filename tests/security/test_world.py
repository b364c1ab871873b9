"""The canary world's detectors see each kind of harm (so a clean attack run means something)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator

import pytest

from tests.security.world import World


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = await World.create()
    yield made
    await made.close()


async def test_a_fresh_world_shows_no_harm(world: World) -> None:
    assert world.outside_changes() == []
    assert world.source_changes() == []
    assert world.remote_changes() == []
    assert world.contacts == []
    assert world.marker_processes() == []
    assert "init" in world.remote_text()


async def test_outside_changes_are_seen(world: World) -> None:
    (world.outside / "notes.txt").write_text("changed\n")
    (world.etc / "passwd").chmod(0o600)
    (world.base / "pwned").write_text("x")
    (world.usr / "lib" / "libcanary.so.1").unlink()
    assert world.outside_changes() == [
        "changed etc/passwd",
        "changed outside/notes.txt",
        "created pwned",
        "removed usr/lib/libcanary.so.1",
    ]
    (world.src / "app.py").write_text("x")
    assert world.source_changes() == ["changed app.py"]


async def test_secrets_are_recognised_in_any_text(world: World) -> None:
    env = (world.src / ".env").read_text()
    key = (world.home / ".ssh" / "id_ed25519").read_text()
    assert world.leaked(f"out: {env} and {key}") == ["dotenv", "sshkey"]
    assert world.leaked("API_TOKEN=sk-live-nothing") == []


async def test_closed_services_record_contacts(world: World) -> None:
    world.doing = "probe"
    reader, writer = await asyncio.open_connection("127.0.0.1", world.http_port)
    writer.write(b"GET /x HTTP/1.0\r\n\r\n")
    await writer.drain()
    assert (await reader.read()).endswith(b"closed service")
    writer.close()
    _, unix = await asyncio.open_unix_connection(str(world.docker_sock))
    unix.close()
    _, meta = await asyncio.open_connection("127.0.0.2", world.meta_port)
    meta.close()
    for _ in range(100):
        if len(world.contacts) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(c.service for c in world.contacts) == ["docker.sock", "http", "metadata"]
    assert world.contacts[0].during == "probe"
    assert b"GET /x" in world.contacts[0].data


async def test_marker_processes_are_found_and_ended(world: World) -> None:
    proc = subprocess.Popen(["env", f"M={world.marker}", "sleep", "30"])
    try:
        # Until `env` has executed `sleep`, the child is a fork of this process without the marker.
        deadline = time.monotonic() + 5
        while world.marker_processes() != [proc.pid] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert world.marker_processes() == [proc.pid]
        world.kill_markers()
        assert proc.wait(timeout=5) == -9
    finally:
        proc.kill()
    assert world.marker_processes() == []


async def test_a_copy_of_a_template_is_its_own_world() -> None:
    template = await asyncio.to_thread(World.template)
    try:
        world = await World.create(template)
        try:
            assert world.secrets == template.secrets
            assert str(world.remote) in (world.src / ".git" / "config").read_text()
            assert world.outside_changes() == []
        finally:
            await world.close()
        assert not world.base.exists()
    finally:
        template.discard()
