"""`massgen-bot run --repo NAME`: real process, loopback provider, a bare remote, a GitHub stand-in."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from bot.playground.forge import ForgeStandIn
from tests.bot.cli.test_run import ROOT, massgen_bot, team_file
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply
from tests.orchestrator.repos.remotes import bare_remote, branches, git

TOKEN = "cli-forge-token"


def fix_first(request: ProviderRequest) -> Reply:
    """Fix the bug in the workspace once, then follow the protocol."""
    wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "write_file" in request.tools and not wrote:
        return Reply(tool_calls=[("write_file", {"path": "fix.py", "content": "BUG = False\n"})])
    return protocol_agent(request)


def _repositories(remote: Path, api_url: str) -> str:
    return (
        "sandbox: none\nrepositories:\n"
        f"  - {{name: billing, url: 'file://{remote}', forge: github, api_url: '{api_url}',"
        " project: acme/billing, credentials: {token_env: FORGE_TOKEN}}\n"
    )


async def test_run_on_a_repository_prints_the_pull_request_after_the_terminal_approves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_TOKEN", TOKEN)
    remote = bare_remote(tmp_path, {"fix.py": "BUG = True\n"})
    master, slave = os.openpty()
    with ForgeStandIn({"acme/billing": remote}, token=TOKEN) as forge:
        async with ProviderServer(fix_first) as server:
            team = team_file(tmp_path, server, _repositories(remote, forge.url), both_sdks=False)
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "--json", "--team", str(team), "--repo", "billing",
                "fix the bug", stdin=slave, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=ROOT, env=dict(os.environ),
            )  # fmt: skip
            os.close(slave)
            assert process.stderr is not None
            assert process.stdout is not None
            prompts, seen = 0, ""
            stdout_task = asyncio.ensure_future(process.stdout.read())
            while chunk := await asyncio.wait_for(process.stderr.read(4096), timeout=90):
                seen += chunk.decode()
                while seen.count("Approve?") > prompts:
                    prompts += 1
                    os.write(master, b"y\n")
            out = (await stdout_task).decode()
            code = await process.wait()
        os.close(master)
        assert code == 0, seen
        assert prompts == 1, seen  # the publish, once: nothing else asked
        assert "repository billing · branch massgen/run-" in seen
        assert "+BUG = False" in seen  # the diff is on the prompt
        finished = json.loads(out.splitlines()[-1])
        pr = finished["pull_request"]
        assert f"pull request: {pr['url']} · {pr['title']} · 1 file changed" in seen
        assert pr["url"].startswith(forge.url) or pr["url"].startswith("http://127.0.0.1")
        assert len(forge.state.requests) == 1
        assert branches(remote) == sorted(["main", pr["branch"]])
        assert git(f"--git-dir={remote}", "show", f"{pr['branch']}:fix.py") == "BUG = False\n"


async def test_an_unknown_repository_is_one_line_naming_the_allowed_ones(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, {"fix.py": "BUG = True\n"})
    async with ProviderServer(protocol_agent) as server:
        team = team_file(tmp_path, server, _repositories(remote, "http://127.0.0.1:9"), both_sdks=False)
        code, out, err = await massgen_bot("--team", str(team), "--repo", "nope", "task")
    assert code == 1
    assert out == ""
    assert err.splitlines()[-1] == "massgen-bot run: unknown repository 'nope'; you may use: billing"
    assert not (tmp_path / "state" / "repos").exists()  # refused before anything was fetched
