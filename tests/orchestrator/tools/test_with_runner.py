"""The real toolbox under the real runner: scripted models call the tools, the winner's patch lands."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from orchestrator.events import RunFinished, ToolDecided
from orchestrator.ports import RunContext, RunTools
from orchestrator.run import start_run
from orchestrator.testing import Script, ScriptedModels, Turn, call, scripted_team
from orchestrator.toolbox import build_run_tools
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
    finished = await asyncio.wait_for(handle.wait(), timeout=20)
    assert isinstance(finished, RunFinished)
    assert finished.patch is not None
    assert f"+BUG = False  # {finished.winner}" in finished.patch
    assert (source / "fix.py").read_text() == "BUG = True\n"  # the source changes only by apply-back
    writes = [e for e in harness.events if isinstance(e, ToolDecided) and e.tool == "write_file"]
    assert [(e.decision, e.executed) for e in writes] == [("allow", True), ("allow", True)]
    assert not (tmp_path / "ws" / handle.run_id).exists()  # the runner closed the toolbox
