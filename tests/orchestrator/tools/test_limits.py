"""Resource limits, executed: a fork bomb, a memory bomb and disk fillers run through the real tool
path (`execute` -> sandbox -> bubblewrap) are contained, named in the tool result, and leave nothing."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from orchestrator.tools.limits import Limits, delegated_bases, limits_hit
from orchestrator.tools.sandbox import Sandbox
from orchestrator.tools.specs import ToolEnv, execute, parse_args
from tests.orchestrator.tools.conftest import needs_bwrap

pytestmark = pytest.mark.sandbox
SMALL = Limits(processes=64, memory_bytes=512 << 20, file_bytes=8 << 20, cpu_seconds=3, tmp_bytes=16 << 20)
# The kernel exempts the global root user from RLIMIT_NPROC: as root, only a cgroup bounds a fork bomb.
process_limit_enforced = pytest.mark.skipif(
    os.geteuid() == 0 and not delegated_bases(),
    reason="running as root with no delegated cgroup: RLIMIT_NPROC does not apply to root",
)


def _env(ws: Path, limits: Limits = SMALL) -> ToolEnv:
    return ToolEnv(workspace=ws, sandbox=Sandbox("bwrap"), command_timeout_s=60, limits=limits)


async def _run(command: str, env: ToolEnv) -> str:
    return await execute(parse_args("run_command", {"command": command}), env)


def _left(marker: str) -> list[int]:
    """Processes whose command line still carries `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@needs_bwrap
@process_limit_enforced
async def test_a_fork_bomb_is_contained_named_and_leaves_no_process(tmp_path: Path) -> None:
    marker = f"bomb{uuid.uuid4().hex[:8]}"
    # `exec sleep`: the command's own shell needs no fork to finish, while the bomb keeps trying.
    result = await _run(f"{marker}() {{ {marker} | {marker} & }}; {marker}; exec sleep 2", _env(tmp_path))
    assert "[stopped: process limit (64) reached]" in result
    assert _left(marker) == []


@needs_bwrap
@process_limit_enforced
async def test_a_bomb_that_waits_for_its_children_is_stopped_at_the_limit_not_the_timeout(
    tmp_path: Path,
) -> None:
    # bash retries a refused fork and goes on once a child exits: left alone, this loop would keep
    # the limit full for 600 x 8 s / 64, far past the command timeout.
    marker = f"bomb{uuid.uuid4().hex[:8]}"
    loop = f"for i in $(seq 600); do (exec -a {marker} sleep 8) & done; wait; echo {marker}-finished"
    started = time.monotonic()
    result = await _run(loop, _env(tmp_path))
    assert time.monotonic() - started < 6  # left to retry, bash takes 8 s or more here
    assert "[stopped: process limit (64) reached]" in result
    assert "timed out" not in result
    assert f"{marker}-finished" not in result
    assert _left(marker) == []


@needs_bwrap
async def test_a_memory_bomb_is_stopped_and_named(tmp_path: Path) -> None:
    marker = f"mem{uuid.uuid4().hex[:8]}"
    bomb = f"python3 -c 'chunks = []  # {marker}\nwhile True: chunks.append(bytearray(32 << 20))'"
    result = await _run(bomb, _env(tmp_path))
    assert "MemoryError" in result
    assert "[stopped: memory limit (512 MiB) reached]" in result
    assert _left(marker) == []


@needs_bwrap
async def test_a_disk_filler_stops_at_the_file_size_limit(tmp_path: Path) -> None:
    result = await _run("yes fill > fill.txt; echo after", _env(tmp_path))
    assert "[stopped: file size limit (8 MiB) reached]" in result
    assert (tmp_path / "fill.txt").stat().st_size <= 8 << 20
    assert "after" in result  # the command goes on; only the writer was stopped


@needs_bwrap
async def test_filling_the_scratch_tmp_stops_at_its_size(tmp_path: Path) -> None:
    result = await _run(
        "for i in 1 2 3 4; do head -c 6000000 /dev/zero > /tmp/f$i; done; df -k /tmp", _env(tmp_path)
    )
    assert "No space left on device" in result
    assert "[stopped: no space left on a device (the sandbox's /tmp and HOME hold 16 MiB)]" in result


@needs_bwrap
async def test_cpu_time_is_limited_and_named(tmp_path: Path) -> None:
    result = await _run("python3 -c 'while True: pass'", _env(tmp_path))
    assert "[stopped: CPU time limit (3 s) reached]" in result


@needs_bwrap
async def test_ordinary_commands_report_no_limit(tmp_path: Path) -> None:
    result = await _run("seq 1 20 | xargs -n1 -P4 echo > out.txt; wc -l < out.txt", _env(tmp_path))
    assert result == "20\n[exit code 0]"


@needs_bwrap
async def test_open_files_are_limited(tmp_path: Path) -> None:
    env = _env(tmp_path, Limits(open_files=64))
    script = "fs = [open('/dev/null') for _ in range(200)]"
    result = await _run(f'python3 -c "{script}"', env)
    assert "[stopped: open files limit (64) reached]" in result


def test_limits_are_named_from_the_signal_when_the_output_says_nothing() -> None:
    assert limits_hit(SMALL, "", 128 + 25) == ("file size limit (8 MiB) reached",)
    assert limits_hit(SMALL, "", -24) == ("CPU time limit (3 s) reached",)
    assert limits_hit(SMALL, "", 0) == ()
    assert limits_hit(SMALL, "all fine", None) == ()


def test_zero_leaves_a_limit_unset() -> None:
    assert len(Limits().rlimits()) == 5
    assert Limits(processes=0, cpu_seconds=0).rlimits() == [
        (kind, value) for kind, value in Limits().rlimits() if value not in (512, 600)
    ]


@needs_bwrap
async def test_runtimes_that_reserve_address_space_still_start(tmp_path: Path) -> None:
    # The memory limit counts what is written, not what is reserved (Node's WebAssembly reserves GBs).
    if not Path("/usr/bin/node").exists():
        pytest.skip("no node here")
    script = "new WebAssembly.Memory({initial: 1}); console.log('wasm ok')"
    result = await _run(f'node -e "{script}"', _env(tmp_path))
    assert result == "wasm ok\n[exit code 0]"


@needs_bwrap
async def test_the_limit_leads_the_result_so_a_short_preview_shows_it(tmp_path: Path) -> None:
    result = await _run("seq 1 100000; yes > fill.txt", _env(tmp_path))
    assert result.startswith("[stopped: file size limit (8 MiB) reached]\n1\n2\n")
    assert result.endswith("]")  # still ends with the exit status line


@needs_bwrap
async def test_many_files_each_under_the_size_limit_stop_at_the_disk_limit(tmp_path: Path) -> None:
    limits = Limits(file_bytes=8 << 20, disk_bytes=24 << 20)
    filler = "for i in $(seq 64); do head -c 4000000 /dev/zero > f$i; sleep 0.05; done; echo FILLED"
    result = await _run(filler, _env(tmp_path, limits))
    assert "[stopped: disk limit (24 MiB written to the workspace) reached]" in result
    assert "FILLED" not in result
    assert sum(f.stat().st_size for f in tmp_path.glob("f*")) < 64 * 4000000
