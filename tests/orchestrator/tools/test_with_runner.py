"""The real toolbox under the real runner: scripted models call the tools, the winner's patch lands."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from pathlib import Path

from approvals.models import Principal
from orchestrator import drive_run, start_run
from orchestrator.events import RunFinished, ToolDecided
from orchestrator.llm.base import ToolResultMessage
from orchestrator.ports import RunContext, RunTools
from orchestrator.testing import Request, Script, ScriptedModels, Turn, call, ended, protocol, scripted_team
from orchestrator.tools.toolbox import build_run_tools
from tests.orchestrator.tools.fakes import Harness


async def test_agents_edit_their_workspaces_and_the_winner_patch_is_reported(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    source.mkdir()
    (source / "fix.py").write_text("BUG = True\n")
    team = scripted_team(2).model_copy(update={"sandbox": "none"})
    team = team.model_copy(update={"workspace": team.workspace.model_copy(update={"source": source})})
    harness = Harness()
    edits: dict[str, Sequence[Turn | Script]] = {
        agent: [Turn(calls=(call("write_file", path="fix.py", content=f"BUG = False  # {agent}\n"),))]
        for agent in ("a0", "a1")
    }
    models = ScriptedModels(edits)

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=harness.service, root=tmp_path / "ws")

    handle = await start_run(team, "fix the bug", models=models, tools=tools, subscribers=[harness.emit])
    finished = await asyncio.wait_for(ended(handle), timeout=20)
    assert isinstance(finished, RunFinished)
    assert finished.patch is not None
    assert f"+BUG = False  # {finished.winner}" in finished.patch
    assert (source / "fix.py").read_text() == "BUG = True\n"  # the source changes only by apply-back
    writes = [e for e in harness.events if isinstance(e, ToolDecided) and e.tool == "write_file"]
    assert [(e.decision, e.executed) for e in writes] == [("allow", True), ("allow", True)]
    assert not (tmp_path / "ws" / handle.run_id).exists()  # the runner closed the toolbox


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


async def test_every_agent_wants_to_push_but_only_the_winner_does_once(tmp_path: Path) -> None:
    remote, source = tmp_path / "remote.git", tmp_path / "repo"
    _git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    source.mkdir()
    _git("init", "-q", "-b", "main", cwd=source)
    (source / "app.py").write_text("v1\n")
    _git("add", ".", cwd=source)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init", cwd=source)
    _git("remote", "add", "origin", str(remote), cwd=source)
    team = scripted_team(3).model_copy(update={"sandbox": "none"})
    team = team.model_copy(
        update={
            "workspace": team.workspace.model_copy(update={"source": source}),
            "approvals": team.approvals.model_copy(update={"approvers": ["U_APPROVER"]}),
        }
    )
    push = "git push -q origin main"

    def push_when_presenting(request: Request) -> Turn:
        presenting = not request.tool_names & {"new_answer", "vote"}
        pushed = any(isinstance(m, ToolResultMessage) for m in request.messages[-1:])
        if presenting and not pushed:
            return Turn(calls=(call("run_command", command=push),))
        return protocol(request)

    def push_first(request: Request) -> Turn:  # from the request alone: a resumed segment's new client
        coordinating = "new_answer" in request.tool_names
        if coordinating and not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return Turn(calls=(call("run_command", command=push),))
        return push_when_presenting(request)

    harness = Harness()
    models = ScriptedModels(then=push_first)

    async def approve_all() -> None:
        while True:
            request = await harness.requested.get()
            await harness.service.decide(request.id, Principal(id="U_APPROVER"), approve=True)

    approver = asyncio.create_task(approve_all())

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=harness.service, root=tmp_path / "ws")

    driving = drive_run(
        team, "ship it", approvals=harness.service, models=models, tools=tools, subscribers=[harness.emit]
    )
    finished = await asyncio.wait_for(driving, timeout=30)  # the winner's push parks the run once
    approver.cancel()
    assert isinstance(finished, RunFinished)
    pushes = [e for e in harness.events if isinstance(e, ToolDecided) and e.tool == "run_command"]
    assert sum(e.executed for e in pushes) == 1
    assert sum(e.reason.startswith("deferred") for e in pushes) == 3
    (executed,) = [e for e in pushes if e.executed]
    assert executed.agent_id == finished.winner
    assert "main" in _git("branch", "--list", cwd=remote)
