"""A run on a named repository ends in one pushed branch and one PR/MR, only after the click.

Real git (a local bare remote over file://), the real approval service and gate, the project's
GitHub and GitLab stand-ins, scripted models. Planted hooks and config in the agents' workspaces
would write a canary file if any git step ran them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

import pytest

from approvals.models import ApprovalRequest, Principal
from bot.playground.forge import ForgeStandIn
from orchestrator.config.repos import RepoCredentials, RepositoryConfig
from orchestrator.config.team import TeamConfig
from orchestrator.events import RunFinished
from orchestrator.ports import RunContext, RunTools
from orchestrator.repos import Credentials, RepoCache, bind_repository, branch_for
from orchestrator.run.driver import drive_run
from orchestrator.testing import ScriptedModels, Turn, call, scripted_team
from orchestrator.tools.toolbox import build_run_tools
from tests.orchestrator.repos.remotes import bare_remote, branches, git, without_index_lines
from tests.orchestrator.tools.fakes import Harness

APPROVER = Principal(id="U_APPROVER")
TOKEN = "forge-secret-token"
HOOKS = ("pre-commit", "commit-msg", "post-commit", "pre-push", "reference-transaction", "post-checkout")
Forge = Literal["github", "gitlab"]


def _canary_hooks(folder: Path, canary: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = folder / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {canary}\n")
        hook.chmod(0o755)


def plant(workspace: Path, canary: Path) -> None:
    """What a hostile agent leaves behind: hooks in `.git`, a nested repo's hooks, a `.gitconfig`."""
    _canary_hooks(workspace / ".git" / "hooks", canary)
    _canary_hooks(workspace / "vendor" / "lib" / ".git" / "hooks", canary)
    _canary_hooks(workspace / "tools" / "hooks", canary)
    (workspace / ".git" / "config").write_text(f"[core]\n\thooksPath = {workspace / 'tools' / 'hooks'}\n")
    hooks = workspace / "tools" / "hooks"
    nested = f"[core]\n\thooksPath = {hooks}\n\tfsmonitor = {hooks / 'pre-push'}\n"
    (workspace / "vendor" / "lib" / ".gitconfig").write_text(nested)


def _team(tmp: Path, remote: Path, forge: ForgeStandIn, kind: Forge) -> TeamConfig:
    team = scripted_team(2).model_copy(update={"sandbox": "none"})
    repository = RepositoryConfig(
        name="billing",
        url=f"file://{remote}",
        forge=kind,
        api_url=forge.url if kind == "github" else forge.gitlab_url,
        project="acme/billing",
        credentials=RepoCredentials(token_env="FORGE_TOKEN"),
    )
    return team.model_copy(
        update={
            "repositories": [repository],
            "approvals": team.approvals.model_copy(update={"approvers": [APPROVER.id]}),
        }
    )


async def _run(
    tmp: Path,
    team: TeamConfig,
    harness: Harness,
    run_id: str,
    *,
    approve: bool,
    content: str,
    canary: Path,
    follow_up: str | None = None,
) -> tuple[RunFinished, ApprovalRequest]:
    credentials = Credentials({"FORGE_TOKEN": TOKEN})
    bound = await asyncio.to_thread(
        bind_repository, team, RepoCache(tmp / "state"), "billing", run_id,
        follow_up_branch=follow_up, credentials=credentials,
    )  # fmt: skip
    models = ScriptedModels(
        {
            agent: [
                Turn(
                    calls=(
                        call("write_file", path="fix.py", content=f"{content}  # {agent}\n"),
                        call("write_file", path=".gitconfig", content="[core]\n\thooksPath = tools/hooks\n"),
                    )
                )
            ]
            for agent in ("a0", "a1")
        }
    )

    async def tools(ctx: RunContext) -> RunTools:
        made = await build_run_tools(ctx, approvals=harness.service, root=tmp / f"ws-{run_id}")
        made.credentials = credentials
        for agent in ctx.agent_ids:
            plant(made.workspace(agent), canary)
        return made

    driven = asyncio.ensure_future(
        drive_run(
            bound, "fix the flaky test", approvals=harness.service, models=models, tools=tools,
            subscribers=[harness.emit], run_id=run_id, requester="U_ASKER",
        )
    )  # fmt: skip
    request = await asyncio.wait_for(harness.requested.get(), timeout=30)
    await harness.service.decide(request.id, APPROVER, approve=approve, reason=None if approve else "no")
    finished = await asyncio.wait_for(driven, timeout=30)
    assert isinstance(finished, RunFinished)
    return finished, request


@pytest.mark.parametrize("kind", ["github", "gitlab"])
async def test_approved_publish_pushes_one_branch_and_opens_one_request(tmp_path: Path, kind: Forge) -> None:
    remote = bare_remote(tmp_path, {"fix.py": "BUG = True\n", "README": "billing\n"})
    canary = tmp_path / "canary"
    with ForgeStandIn({"acme/billing": remote}, token=TOKEN) as forge:
        team = _team(tmp_path, remote, forge, kind)
        harness = Harness()
        finished, request = await _run(
            tmp_path, team, harness, "run-1", approve=True, content="BUG = False", canary=canary
        )
        branch = branch_for("run-1")
        # The request shows where, what and the whole diff; the click approved exactly that diff.
        assert request.action.kind == "tool"
        assert request.context["repository"] == "billing"
        assert request.context["branch"] == branch
        assert request.context["diff"] == finished.patch
        # fix.py, the agent's .gitconfig and what it planted outside `.git` (the walk skips `.git`).
        assert request.context["diff_stat"] == "9 files changed, 18 insertions(+), 1 deletion(-)"
        planted = [".gitconfig", *(f"tools/hooks/{name}" for name in sorted(HOOKS)), "vendor/lib/.gitconfig"]
        assert request.context["sensitive_paths"] == ", ".join(planted)
        assert finished.applied is True, finished.apply_reason
        pr = finished.pull_request
        assert pr is not None
        assert (pr.branch, pr.created, pr.number) == (branch, True, 1)
        assert branches(remote) == sorted(["main", branch])
        assert len(forge.state.requests) == 1
        made = forge.state.requests[0]
        assert (made.head, made.base) == (branch, "main")
        assert pr.url is not None
        assert pr.url.endswith("/pull/1" if kind == "github" else "/-/merge_requests/1")
        assert finished.patch is not None
        assert without_index_lines(forge.diff(made)) == finished.patch
        # One commit on top of main: the requester wrote it, the bot committed it.
        log = git(f"--git-dir={remote}", "log", "--format=%an|%cn|%P", f"main..{branch}")
        main = git(f"--git-dir={remote}", "rev-parse", "main").strip()
        assert log.splitlines() == [f"U_ASKER|massgen-bot|{main}"]
        assert pr.commit == git(f"--git-dir={remote}", "rev-parse", branch).strip()
    assert not canary.exists(), canary.read_text()


async def test_a_denied_click_pushes_nothing_and_opens_nothing(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, {"fix.py": "BUG = True\n"})
    canary = tmp_path / "canary"
    with ForgeStandIn({"acme/billing": remote}, token=TOKEN) as forge:
        team = _team(tmp_path, remote, forge, "github")
        finished, _ = await _run(
            tmp_path, team, Harness(), "run-2", approve=False, content="BUG = False", canary=canary
        )
        assert finished.applied is False
        assert finished.pull_request is None
        assert branches(remote) == ["main"]
        assert forge.state.requests == []
        assert [c for c in forge.state.calls if c[0] == "POST"] == []
    assert not canary.exists()


@pytest.mark.parametrize("kind", ["github", "gitlab"])
async def test_a_follow_up_adds_one_commit_to_the_same_request(tmp_path: Path, kind: Forge) -> None:
    remote = bare_remote(tmp_path, {"fix.py": "BUG = True\n"})
    canary = tmp_path / "canary"
    with ForgeStandIn({"acme/billing": remote}, token=TOKEN) as forge:
        team = _team(tmp_path, remote, forge, kind)
        first, _ = await _run(
            tmp_path, team, Harness(), "run-3", approve=True, content="BUG = 1", canary=canary
        )
        assert first.pull_request is not None
        branch = first.pull_request.branch
        again, request = await _run(
            tmp_path,
            team,
            Harness(),
            "run-4",
            approve=True,
            content="BUG = 2",
            canary=canary,
            follow_up=branch,
        )
        assert request.context["branch"] == branch
        pr = again.pull_request
        assert pr is not None, again.apply_reason
        assert (pr.branch, pr.created, pr.number, pr.url) == (branch, False, 1, first.pull_request.url)
        assert len(forge.state.requests) == 1
        assert branches(remote) == sorted(["main", branch])
        parents = git(f"--git-dir={remote}", "log", "--format=%P", f"main..{branch}").split()
        assert parents[0] == first.pull_request.commit  # the new commit sits on the first one
        assert len(parents) == 2
        assert git(f"--git-dir={remote}", "show", f"{branch}:fix.py").startswith("BUG = 2")
    assert not canary.exists()


def test_the_planted_hooks_would_run_under_plain_git(tmp_path: Path) -> None:
    """Control: the canary is live, so its absence above means the trusted steps never ran it."""
    repo = tmp_path / "ws"
    git("init", "--quiet", str(repo))
    canary = tmp_path / "canary"
    plant(repo, canary)
    (repo / "f").write_text("x\n")
    git("add", "f", cwd=repo)
    git("commit", "--quiet", "-m", "x", cwd=repo)
    assert "pre-commit" in canary.read_text()
