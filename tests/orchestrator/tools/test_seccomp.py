"""No unix socket from a command, by construction: executed through the real sandbox.

A host socket in a folder no scan hides (made after the scan, beside this file, which the sandbox
sees read-only) is unreachable with and without approved egress, while `socketpair` (what asyncio
and multiprocessing use between their own processes) still works and io_uring is refused.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.tools.sandbox import Sandbox, SandboxSpec
from orchestrator.tools.seccomp import SeccompUnsupported, unix_socket_filter
from tests.orchestrator.tools.conftest import needs_bwrap

pytestmark = pytest.mark.sandbox

CONNECT = (
    "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); "
    "s.sendall(b'hello'); print('CONNECTED')\""
)


@contextmanager
def host_socket() -> Iterator[tuple[Path, list[bytes]]]:
    """A listening unix socket outside every hidden folder, and what reached it."""
    folder = Path(__file__).parent / f".sock-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    path = folder / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            received.append(conn.recv(64) or b"(connected)")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path, received
    finally:
        stop.set()
        thread.join(timeout=2)
        server.close()
        path.unlink(missing_ok=True)
        folder.rmdir()


@needs_bwrap
@pytest.mark.parametrize("network", [False, True], ids=["closed", "egress-approved"])
async def test_a_host_unix_socket_no_scan_hides_cannot_be_reached(tmp_path: Path, network: bool) -> None:
    with host_socket() as (path, received):
        spec = SandboxSpec(workspace=tmp_path, network=network, hosts=("example.com",), timeout_s=20)
        result = await Sandbox("bwrap").run(CONNECT.format(path=path), spec)
    output = result.output.decode()
    assert "CONNECTED" not in output
    assert "PermissionError" in output, output
    assert received == []


@needs_bwrap
async def test_socketpair_still_works_and_io_uring_is_refused(tmp_path: Path) -> None:
    code = (
        "import ctypes, errno, socket; a, b = socket.socketpair(); a.send(b'x'); print('PAIR', b.recv(1)); "
        "libc = ctypes.CDLL(None, use_errno=True); params = ctypes.create_string_buffer(120); "
        "r = libc.syscall(425, 4, params); print('URING', r, errno.errorcode.get(ctypes.get_errno()))"
    )
    result = await Sandbox("bwrap").run(f'python3 -c "{code}"', SandboxSpec(workspace=tmp_path, timeout_s=20))
    output = result.output.decode()
    assert "PAIR b'x'" in output, output
    assert "URING -1 EPERM" in output, output


def test_the_program_denies_af_unix_io_uring_and_foreign_architectures() -> None:
    program = unix_socket_filter("x86_64")
    ins = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    rets = [k for code, _jt, _jf, k in ins if code == 0x06]
    assert rets == [0x7FFF0000, 0x7FFF0000, 0x00050001, 0x80000000]  # allow, allow, EPERM, kill
    assert (0x15, 0, len(ins) - 3, 0xC000003E) == ins[1], "another architecture is killed"
    assert {k for code, _a, _b, k in ins if code == 0x15} >= {41, 425, 426, 427, 1}
    arm = unix_socket_filter("aarch64")
    assert struct.unpack("<HBBI", arm[8:16])[3] == 0xC00000B7
    with pytest.raises(SeccompUnsupported):
        unix_socket_filter("riscv64")
