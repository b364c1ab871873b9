"""The apply step: the winner's patch goes to the source folder, or is published on its repository.

Either way it is one gated call of the winner (bound to the digest of exactly that patch), asked
once, reported like a tool call, and done by trusted code: `git apply` with the trusted git
environment for a folder (`workspace.source`), a commit, push and pull request for a repository
(`workspace.repository`, see `orchestrator.repos.publish`). The request carries the whole diff
(`context["diff"]`) and names every sensitive path in it (`context["sensitive_paths"]`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from approvals.permissions import Action, action_digest
from orchestrator.errors import OrchestratorError
from orchestrator.events import ToolCalled, ToolDecided, ToolStarted
from orchestrator.ports import ToolOutcome
from orchestrator.repos import Credentials, plan_publish, publish, sensitive_paths
from orchestrator.tools.gate import GateCall
from orchestrator.tools.workspace import apply_patch_to_source, patch_paths

if TYPE_CHECKING:
    from orchestrator.tools.toolbox import WorkspaceRunTools

_PREVIEW = 300
_EVENT_ARG_CHARS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyPlan:
    """One apply step as the gate sees it and as it runs once allowed."""

    tool: str
    actions: tuple[Action, ...]
    request_action: Action
    digest: str
    context: Mapping[str, str]
    arguments: Mapping[str, str]
    run: Callable[[], Awaitable[ToolOutcome]]


def source_plan(source: Path, patch: str, paths: tuple[str, ...]) -> ApplyPlan:
    """Write the patch into `source` (each file a write the engine judges; one request for all)."""
    files = ", ".join(paths)
    sensitive = sensitive_paths(paths)

    async def run() -> ToolOutcome:
        try:
            await asyncio.to_thread(apply_patch_to_source, patch, source)
        except (OSError, OrchestratorError) as exc:
            return ToolOutcome(content=str(exc), is_error=True)
        return ToolOutcome(content=f"applied {len(paths)} file(s) to {source}")

    return ApplyPlan(
        tool="apply_patch",
        actions=tuple(Action(kind="write", target=str(source / rel)) for rel in paths),
        request_action=Action(kind="write", target=str(source)),
        digest=action_digest("apply_patch", {"source": str(source), "patch": patch}),
        context={
            "files": files[:2000],
            "diff": patch,
            "diff_sha256": hashlib.sha256(patch.encode()).hexdigest(),  # what "View diff" checks
            "sensitive_paths": ", ".join(sensitive),
        },
        arguments={"source": str(source), "files": files[:_EVENT_ARG_CHARS]},
        run=run,
    )


def repository_plan(tools: WorkspaceRunTools, patch: str, paths: tuple[str, ...], task: str) -> ApplyPlan:
    """Publish the patch as a pull request (a side effect: one agent, final phase, asked)."""
    ctx = tools.ctx
    binding = ctx.team.workspace.repository
    assert binding is not None
    plan = plan_publish(binding, patch, paths, run_id=ctx.run_id, requester=ctx.requester, task=task)
    credentials = tools.credentials or Credentials()

    async def run() -> ToolOutcome:
        try:
            made = await asyncio.to_thread(publish, plan, credentials)
        except OrchestratorError as exc:
            return ToolOutcome(content=f"publish failed: {exc}", is_error=True)
        where = made.url or f"branch {made.branch} (pushed; no forge)"
        verb = "opened" if made.created else "updated"
        return ToolOutcome(content=f"{verb} {where}: {made.title} ({made.stat})", pull_request=made)

    target = f"{binding.repository.name}:{binding.branch}"
    return ApplyPlan(
        tool="publish_pull_request",
        actions=(Action(kind="tool", target="publish_pull_request"),),
        request_action=Action(kind="tool", target=f"publish_pull_request {target}"),
        digest=plan.digest,
        context=plan.context(),
        arguments={"repository": binding.repository.name, "branch": binding.branch, "stat": plan.stat},
        run=run,
    )


async def gated_apply(
    tools: WorkspaceRunTools, agent_id: str, patch: str, *, awaiting: str | None = None
) -> ToolOutcome:
    """Apply (or publish) `patch` for `agent_id` after the engine (and usually a human) agree."""
    ctx = tools.ctx
    workspace = ctx.team.workspace
    source = workspace.source
    if source is None:
        return ToolOutcome(content="no workspace.source to apply the patch to", is_error=True)
    try:
        paths = patch_paths(patch)
    except OrchestratorError as exc:
        return ToolOutcome(content=str(exc), is_error=True)
    if workspace.repository is not None:
        plan = repository_plan(tools, patch, paths, ctx.task)
    else:
        plan = source_plan(source, patch, paths)
    call = GateCall(
        agent_id=agent_id,
        tool=plan.tool,
        actions=plan.actions,
        digest=plan.digest,
        phase="final",
        request_action=plan.request_action,
        context=plan.context,
    )
    # Reported like a model's tool call, so logs, the terminal and Slack show it the same way.
    call_id = f"apply-{plan.digest[:12]}"
    if awaiting is None:  # a resumed call was reported when it was first made
        await ctx.emit(
            ToolCalled(agent_id=agent_id, call_id=call_id, tool=plan.tool, arguments=dict(plan.arguments))
        )
    result = await tools.gate.check(tools.engine(agent_id), call, awaiting=awaiting)
    outcome = None
    if result.allowed and (result.request is None or result.request.digest == plan.digest):
        request_id = result.request.id if result.request is not None else None
        await ctx.persist(
            ToolStarted(agent_id=agent_id, call_id=call_id, tool=plan.tool, request_id=request_id)
        )
        outcome = await plan.run()
    from orchestrator.tools.toolbox import what_happened

    decided = ToolDecided(
        agent_id=agent_id,
        call_id=call_id,
        tool=plan.tool,
        action=" + ".join(map(str, plan.actions))[:_PREVIEW],
        decision="allow" if outcome is not None else "deny",
        risk=result.decision.risk,
        layer="policy" if result.deferred else result.decision.layer,
        reason=result.reason,
        executed=outcome is not None,
        result_preview=outcome.content[:_PREVIEW] if outcome is not None else "",
        **what_happened(plan.tool, result, outcome),
    )
    await ctx.emit(decided)
    return outcome or ToolOutcome(content=result.reason, is_error=True)
