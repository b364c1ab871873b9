"""The Landlock fallback, executed: a restricted child writes only beneath its folders and reaches
no TCP service; children inherit the restriction."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from orchestrator.tools.landlock import abi, restrict

pytestmark = pytest.mark.skipif(abi() < 1, reason="no Landlock on this kernel")


def test_writes_only_beneath_the_allowed_folders(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    script = (
        "echo in > ws/ok.txt; echo rc_in=$?; "
        "echo out > outside/no.txt; echo rc_out=$?; "
        "rm -f outside/keep.txt; echo rc_rm=$?; "
        "sh -c 'echo nested > outside/nested.txt'; echo rc_nested=$?"
    )
    proc = subprocess.run(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=lambda: restrict([str(ws), "/dev"]),
    )
    assert "rc_in=0" in proc.stdout
    for step in ("rc_out", "rc_rm", "rc_nested"):
        assert f"{step}=0" not in proc.stdout
        assert f"{step}=" in proc.stdout
    assert proc.stderr.count("Permission denied") == 3
    assert (ws / "ok.txt").read_text() == "in\n"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


def test_tcp_is_refused_from_abi_4(tmp_path: Path) -> None:
    if abi() < 4:
        pytest.skip("Landlock ABI < 4: no network rules")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')"
        )
        proc = subprocess.run(
            ["/usr/bin/python3", "-c", probe],
            capture_output=True,
            text=True,
            check=False,
            preexec_fn=lambda: restrict([str(tmp_path)]),
        )
    assert "CONNECTED" not in proc.stdout
    assert "PermissionError" in proc.stderr
