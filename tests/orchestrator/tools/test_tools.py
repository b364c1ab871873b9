"""The six tools on their own: argument validation, execution, caps, symlink handling, fetch."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from approvals.permissions import Action
from orchestrator.tools.proxy import EgressRules
from orchestrator.tools.sandbox import Sandbox
from orchestrator.tools.specs import (
    TOOL_NAMES,
    ToolArgumentError,
    ToolEnv,
    actions_for,
    cap,
    execute,
    parse_args,
    tool_specs,
)

MAIN = "import os\n\ndef main():\n    print('hi')\n"


@pytest.fixture
def env(tmp_path: Path) -> ToolEnv:
    ws, peer = tmp_path / "alpha", tmp_path / "beta"
    (ws / "src").mkdir(parents=True)
    peer.mkdir()
    (ws / "src" / "main.py").write_text(MAIN)
    (ws / "notes.md").write_text("line1\nline2\nline3\n")
    (ws / "img.bin").write_bytes(b"\x89PNG\x00\x00\x01")
    (peer / "theirs.txt").write_text("peer answer\n")
    return ToolEnv(workspace=ws, peers=(peer,), sandbox=Sandbox("none"), output_limit=2048)


async def run(tool: str, args: dict[str, Any], env: ToolEnv) -> str:
    return await execute(parse_args(tool, args), env)


def test_specs_cover_every_tool_with_a_json_schema() -> None:
    specs = {spec.name: spec for spec in tool_specs()}
    assert (
        set(specs)
        == TOOL_NAMES
        == {"read_file", "write_file", "list_files", "search_files", "run_command", "fetch_url"}
    )
    assert specs["write_file"].parameters["required"] == ["path", "content"]
    assert specs["write_file"].parameters["additionalProperties"] is False
    assert all(spec.description for spec in specs.values())


def test_specs_are_built_once_and_each_call_gets_its_own_list() -> None:
    first, second = tool_specs(), tool_specs()
    assert first == second
    assert first is not second  # a caller may extend its list (the workflow tools are added)
    # The schemas are not rebuilt per turn.
    assert all(a.parameters is b.parameters for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("read_file", {}, "path: Field required"),
        ("read_file", {"path": 3}, "path: Input should be a valid string"),
        ("read_file", {"path": "a", "start_line": 0}, "start_line"),
        ("write_file", {"path": "a"}, "content: Field required"),
        ("write_file", {"path": "a", "content": "x", "mode": "w"}, "mode: Extra inputs are not permitted"),
        ("list_files", {"max_entries": 0}, "max_entries"),
        ("search_files", {"path": "."}, "pattern: Field required"),
        ("run_command", {"command": ""}, "command"),
        ("fetch_url", {"url": "file:///etc/passwd"}, "http:// or https://"),
        ("fetch_url", {"url": "http://a b/"}, "http:// or https://"),
        ("delete_everything", {}, "unknown tool"),
    ],
)
def test_bad_arguments_give_a_readable_error(tool: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolArgumentError, match=message):
        parse_args(tool, args)


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("read_file", {"path": "src/main.py"}, Action(kind="read", target="{ws}/src/main.py")),
        ("read_file", {"path": "../beta/theirs.txt"}, Action(kind="read", target="{peer}/theirs.txt")),
        ("write_file", {"path": "./out/../o.txt", "content": ""}, Action(kind="write", target="{ws}/o.txt")),
        ("list_files", {}, Action(kind="read", target="{ws}")),
        ("search_files", {"pattern": "x", "path": "/etc"}, Action(kind="read", target="/etc")),
        ("run_command", {"command": "ls -la"}, Action(kind="command", target="ls -la")),
        ("fetch_url", {"url": "https://example.com/x"}, Action(kind="fetch", target="https://example.com/x")),
    ],
)
def test_tool_to_action_mapping(env: ToolEnv, tool: str, args: dict[str, Any], expected: Action) -> None:
    target = expected.target.format(ws=env.workspace, peer=env.peers[0])
    assert actions_for(parse_args(tool, args), env.workspace) == (Action(kind=expected.kind, target=target),)


def test_home_is_expanded_so_the_engine_sees_the_real_path(env: ToolEnv) -> None:
    (action,) = actions_for(parse_args("read_file", {"path": "~/.ssh/id_rsa"}), env.workspace)
    assert action.target == os.path.expanduser("~/.ssh/id_rsa")


async def test_read_file_text_window_and_binary(env: ToolEnv) -> None:
    assert await run("read_file", {"path": "src/main.py"}, env) == MAIN
    assert await run("read_file", {"path": "notes.md", "start_line": 2, "max_lines": 1}, env) == "line2\n"
    assert "binary file (7 bytes)" in await run("read_file", {"path": "img.bin"}, env)
    assert await run("read_file", {"path": str(env.peers[0] / "theirs.txt")}, env) == "peer answer\n"


async def test_write_file_creates_directories_inside_the_workspace(env: ToolEnv) -> None:
    result = await run("write_file", {"path": "pkg/new/mod.py", "content": "X = 1\n"}, env)
    assert result == "wrote 6 bytes to pkg/new/mod.py"
    assert (env.workspace / "pkg" / "new" / "mod.py").read_text() == "X = 1\n"


@pytest.mark.parametrize("path", ["../beta/theirs.txt", "/tmp/outside.txt", "escape/pwned.txt"])
async def test_write_file_never_leaves_the_workspace(env: ToolEnv, path: str, tmp_path: Path) -> None:
    (env.workspace / "escape").symlink_to(tmp_path)  # a symlinked directory pointing out
    with pytest.raises(PermissionError, match="write_file writes only inside your own workspace"):
        await run("write_file", {"path": path, "content": "pwned"}, env)
    assert (env.peers[0] / "theirs.txt").read_text() == "peer answer\n"
    assert not (tmp_path / "pwned.txt").exists()


async def test_write_through_a_symlinked_file_is_refused(env: ToolEnv, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    (env.workspace / "trap.txt").symlink_to(victim)
    # The realpath of the link leaves the workspace: refused before any open.
    with pytest.raises(PermissionError):
        await run("write_file", {"path": "trap.txt", "content": "pwned"}, env)
    assert victim.read_text() == "original"


async def test_list_files_flat_and_recursive(env: ToolEnv) -> None:
    (env.workspace / "link").symlink_to("/etc")
    flat = await run("list_files", {}, env)
    assert flat.splitlines() == ["img.bin (7 bytes)", "link -> (symlink)", "notes.md (18 bytes)", "src/"]
    deep = await run("list_files", {"recursive": True}, env)
    assert f"src/main.py ({len(MAIN)} bytes)" in deep
    assert "passwd" not in deep  # the symlink to /etc is listed, never entered
    capped = await run("list_files", {"recursive": True, "max_entries": 2}, env)
    assert capped.splitlines()[-1] == "[stopped after 2 entries]"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pattern": r"def \w+"}, ["src/main.py:3: def main():"]),
        ({"pattern": "LINE2", "ignore_case": True}, ["notes.md:2: line2"]),
        ({"pattern": "print(", "regex": False}, ["src/main.py:4:     print('hi')"]),
        ({"pattern": "line", "glob": "*.py"}, ["no matches"]),
        ({"pattern": "line", "max_results": 1}, ["notes.md:1: line1", "[stopped after 1 matches]"]),
        ({"pattern": "("}, None),
    ],
)
async def test_search_files(env: ToolEnv, args: dict[str, Any], expected: list[str] | None) -> None:
    result = await run("search_files", args, env)
    if expected is None:
        assert result.startswith("invalid regular expression")
    else:
        assert result.splitlines() == expected


async def test_run_command_reports_exit_code(env: ToolEnv) -> None:
    assert await run("run_command", {"command": "ls src; exit 4"}, env) == "main.py\n[exit code 4]"


async def test_every_result_is_capped(env: ToolEnv) -> None:
    (env.workspace / "big.txt").write_text("y" * 10_000)
    result = await run("read_file", {"path": "big.txt"}, env)
    assert result.endswith("\n[truncated 7952 bytes]")
    assert cap("ünïcode" * 1000, 11).startswith("ünïcode")


async def test_fetch_url_text_redirect_binary_and_cap(env: ToolEnv, http_server: str) -> None:
    env = replace(env, egress=EgressRules(allow_private=True))  # the test server is on loopback
    hello = await run("fetch_url", {"url": f"{http_server}/hello"}, env)
    assert hello.startswith("HTTP 200 OK")
    assert hello.endswith("hello from loopback")
    moved = await run("fetch_url", {"url": f"{http_server}/moved"}, env)
    assert "redirect not followed" in moved
    assert "example.invalid" in moved
    image = await run("fetch_url", {"url": f"{http_server}/image"}, env)
    assert "not a text document (image/png)" in image
    big = await run("fetch_url", {"url": f"{http_server}/big"}, env)
    assert big.endswith(f"[truncated {300_000 - 2048} bytes]")
    missing = await run("fetch_url", {"url": "http://127.0.0.1:9/closed"}, env)
    assert missing.startswith("fetch failed: ConnectError")
