"""File tools cannot escape: malformed arguments are refused with a reason, and a path swapped for a
symlink (or a `..` trick) after it was pinned opens nothing outside its root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.tools import beneath
from orchestrator.tools.beneath import has_openat2, open_real
from orchestrator.tools.sandbox import Sandbox
from orchestrator.tools.specs import ToolArgumentError, ToolEnv, execute, parse_args


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        ("read_file", {"path": "a\x00b"}, "NUL byte"),
        ("write_file", {"path": "x.txt", "content": "a\x00b"}, "NUL byte"),
        ("run_command", {"command": "echo \x00"}, "NUL byte"),
        ("read_file", {"path": "bad\udcff.txt"}, "lone surrogate|unicode string"),
        ("write_file", {"path": "x.txt", "content": "\ud800"}, "lone surrogate|unicode string"),
        ("search_files", {"pattern": "\udfff"}, "lone surrogate|unicode string"),
        ("list_files", {"path": "é/" * 1400}, "longer than 4095 bytes"),
        ("read_file", {"path": "d/" + "n" * 256}, "component longer than 255"),
    ],
)
def test_malformed_arguments_are_refused_with_a_reason(
    tool: str, arguments: dict[str, str], reason: str
) -> None:
    with pytest.raises(ToolArgumentError, match=reason):
        parse_args(tool, arguments)


@pytest.fixture(params=["openat2", "components"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2" and not has_openat2():
        pytest.skip("no openat2 on this kernel")
    if request.param == "components":
        monkeypatch.setattr(beneath, "_available", False)  # the fallback path, on the same kernel
    return str(request.param)


def test_a_component_swapped_for_a_symlink_is_refused(tmp_path: Path, mode: str) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "docs").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    pinned = str(ws / "docs" / "secret.txt")  # judged while docs/ was a plain folder
    (ws / "docs").rmdir()
    (ws / "docs").symlink_to(outside)  # then swapped by the agent's command
    with pytest.raises(PermissionError, match="symlink"):
        open_real(pinned, os.O_RDONLY, roots=(str(ws),))
    with pytest.raises(PermissionError, match="symlink"):
        open_real(str(ws / "docs" / "new.txt"), os.O_WRONLY | os.O_CREAT, roots=(str(ws),), create_dirs=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_beneath_cannot_climb_out_of_its_root(tmp_path: Path) -> None:
    if not has_openat2():
        pytest.skip("no openat2 on this kernel")
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "up.txt").write_text("outside")
    root = os.open(ws, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(PermissionError, match="leads outside"):
            beneath.openat2(root, "../up.txt", os.O_RDONLY)
        with pytest.raises(PermissionError, match="leads outside"):
            beneath.openat2(root, "/etc/passwd", os.O_RDONLY)
    finally:
        os.close(root)


async def test_file_tools_report_the_refusal_as_a_result(tmp_path: Path, mode: str) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "ok.txt").write_text("fine")
    env = ToolEnv(workspace=ws, sandbox=Sandbox("none"))
    real = str(ws / "sub" / "ok.txt")
    assert await execute(parse_args("read_file", {"path": "sub/ok.txt"}), env, real=real) == "fine"
    (ws / "sub" / "ok.txt").unlink()
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to("/etc")
    with pytest.raises(PermissionError, match="symlink"):
        await execute(parse_args("write_file", {"path": "sub/ok.txt", "content": "x"}), env, real=real)
    assert not Path("/etc/ok.txt").exists()
