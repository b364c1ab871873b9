"""The shipped Docker/Kubernetes seccomp profile: well-formed, grants bubblewrap's calls, keeps the
kernel-wide ones refused; loaded by a real Docker daemon where one is usable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

PROFILE = Path(__file__).resolve().parents[3] / "deploy" / "seccomp" / "massgen.json"
ACTIONS = {
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_TRAP",
    "SCMP_ACT_LOG",
}
OPS = {
    "SCMP_CMP_EQ",
    "SCMP_CMP_NE",
    "SCMP_CMP_LT",
    "SCMP_CMP_LE",
    "SCMP_CMP_GT",
    "SCMP_CMP_GE",
    "SCMP_CMP_MASKED_EQ",
}
BWRAP_NEEDS = {"clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "setns", "execve", "prctl"}
NEVER = {
    "bpf",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "perf_event_open",
    "add_key",
    "keyctl",
    "request_key",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "ptrace",
    "process_vm_writev",
    "open_by_handle_at",
    "iopl",
    "ioperm",
    "acct",
}


def _profile() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PROFILE.read_text())
    return data


def _allowed(data: dict[str, Any]) -> set[str]:
    return {name for rule in data["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]}


def test_the_profile_has_docker_s_shape() -> None:
    data = _profile()
    assert data["defaultAction"] == "SCMP_ACT_ERRNO"  # an allowlist: unknown calls are refused
    assert isinstance(data["defaultErrnoRet"], int)
    for arch in data["archMap"]:
        assert arch["architecture"].startswith("SCMP_ARCH_")
        assert all(sub.startswith("SCMP_ARCH_") for sub in arch["subArchitectures"])
    for rule in data["syscalls"]:
        assert set(rule) <= {"names", "action", "args", "comment", "includes", "excludes", "errnoRet"}
        assert rule["action"] in ACTIONS
        assert rule["names"]
        assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", name) for name in rule["names"])
        for arg in rule.get("args", []):
            assert set(arg) <= {"index", "value", "valueTwo", "op"}
            assert 0 <= arg["index"] <= 5
            assert arg["op"] in OPS


def test_bubblewrap_s_calls_are_granted_and_kernel_wide_ones_are_not() -> None:
    allowed = _allowed(_profile())
    assert allowed >= BWRAP_NEEDS
    assert not (allowed & NEVER)


def test_docker_loads_the_profile(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if (
        docker is None
        or subprocess.run([docker, "info"], capture_output=True, timeout=20, check=False).returncode
    ):
        pytest.skip("no usable Docker daemon here: the structure is validated above")
    images = subprocess.run([docker, "images", "-q"], capture_output=True, text=True, timeout=20, check=False)
    image = images.stdout.split()[0] if images.stdout.split() else None
    if image is None:
        pytest.skip("no local image to start (no registry pulls in tests)")
    run = subprocess.run(
        [
            docker,
            "run",
            "--rm",
            "--security-opt",
            f"seccomp={PROFILE}",
            "--entrypoint",
            "/bin/sh",
            image,
            "-c",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
