"""`build_run_tools`: the run's workspaces, sandbox, gate and one toolbox per agent.

A call goes: validate (pydantic) → freeze the validated input and hash it → engine via the gate
(audit, ask, wait) → re-parse the frozen input and re-check its hash → execute exactly that.
Nothing raises out of `call`: every failure becomes a tool result the model can read.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from approvals.permissions import Action, PermissionConfig, PermissionEngine, action_digest, load_rules
from orchestrator.errors import OrchestratorError, RunStoreUnavailable
from orchestrator.events import (
    AgentState,
    AgentStatus,
    ToolCalled,
    ToolDecided,
    ToolStarted,
    WorkspaceRebuilt,
)
from orchestrator.llm.base import ToolCall, ToolSpec
from orchestrator.ports import ApprovalPort, Evaluator, RunContext, ToolOutcome, ToolPhase, WorkspaceStore
from orchestrator.repos import Credentials
from orchestrator.tools.apply import gated_apply
from orchestrator.tools.gate import GateCall, GateResult, PermissionGate, RunGrants, approvers_of
from orchestrator.tools.proxy import DEFAULT_EGRESS, EgressRules
from orchestrator.tools.sandbox import Sandbox, rendered_exit_code
from orchestrator.tools.specs import (
    ListFilesArgs,
    ReadFileArgs,
    SearchFilesArgs,
    ToolArgumentError,
    ToolEnv,
    WriteFileArgs,
    actions_for,
    execute,
    parse_args,
    pin,
    resolve,
    tool_specs,
)
from orchestrator.tools.unconfined import confine_engines
from orchestrator.tools.workspace import SECRET_FILES, RunWorkspaces, is_secret_name, secret_patterns
from orchestrator.tools.wsync import DEFAULT_LIMITS, SnapshotLimits, WorkspaceSync

log = logging.getLogger(__name__)

EngineFactory = Callable[[PermissionConfig], Evaluator]
_PREVIEW = 300
_EVENT_ARG_CHARS = 2000
_CONTEXT_INPUT_CHARS = 3000  # raw tool input shown with an approval request (pitfall 20)
_WRITING_TOOLS = frozenset({"write_file", "run_command"})  # may change the workspace: checkpoint after


def default_engine(config: PermissionConfig) -> Evaluator:
    """A `PermissionEngine` on the config (the default `EngineFactory`)."""
    return PermissionEngine(config)


async def build_run_tools(
    ctx: RunContext,
    *,
    approvals: ApprovalPort,
    root: Path | None = None,
    engine_factory: EngineFactory = default_engine,
    bwrap_path: str | None = None,
    hide: Sequence[Path] = (),
    snapshots: WorkspaceStore | None = None,
    limits: SnapshotLimits = DEFAULT_LIMITS,
    egress: EgressRules = DEFAULT_EGRESS,
) -> WorkspaceRunTools:
    """Create the run's workspaces (copies of `workspace.source`) and the per-agent toolboxes.

    `root` holds the workspaces (default: a temporary directory removed on `close`); `hide` lists
    directories that sandboxed commands see empty, on top of the home directories, the workspace
    root and the current directory (where a deployment's `.env` usually sits). With `snapshots`,
    the workspaces are checkpointed there (within `limits`) and a resumed run on another machine
    gets them back; a workspace that cannot be restored is rebuilt and a `WorkspaceRebuilt` recorded.
    """
    team = ctx.team
    buckets: dict[str, list[Any]] = {
        str(bucket): list(items) for bucket, items in team.permissions.rules.items()
    }
    # "Always" approvals persisted earlier are allow rules; deny rules, the floor and secrets still win.
    buckets.setdefault("allow", []).extend(await approvals.always_rules())
    # Raises on a bad rule: fail before any agent starts (the team loader normally caught it already).
    rules = load_rules(buckets)
    owned_root = root is None
    base = Path(tempfile.mkdtemp(prefix="massgen-ws-")) if root is None else root
    try:
        spaces, sync = await _open_workspaces(ctx, base, snapshots, limits)
    except BaseException:
        if owned_root:
            shutil.rmtree(base, ignore_errors=True)
        raise
    gate = PermissionGate(
        run_id=ctx.run_id,
        requester=ctx.requester,
        approvals=approvals,
        approvers=approvers_of(team.approvals),
        timeout=timedelta(seconds=team.approvals.timeout_seconds),
        emit=ctx.emit,
        checkpoint=ctx.persist,
        conversation=ctx.conversation,
    )
    # A resumed run's "for this run" approvals, each as far as its approval request confirms it.
    await gate.restore_grants(ctx.grants)
    engines = {
        agent_id: engine_factory(
            PermissionConfig(
                workspace=spaces.path(agent_id),
                policy=team.permissions.policy,
                rules=rules,
                readable_roots=spaces.peers(agent_id),
            )
        )
        for agent_id in ctx.agent_ids
    }
    hidden = tuple(dict.fromkeys([*(p for p in (Path.cwd(),) if p != Path("/")), spaces.root, *hide]))
    return WorkspaceRunTools(
        ctx=ctx,
        spaces=spaces,
        gate=gate,
        sandbox=Sandbox(team.sandbox, bwrap_path=bwrap_path, egress=egress),
        engines=confine_engines(engines, team.sandbox),  # sandbox: none -> every command asks
        owned_root=owned_root,
        hidden=hidden,
        sync=sync,
    )


async def _open_workspaces(
    ctx: RunContext, base: Path, store: WorkspaceStore | None, limits: SnapshotLimits
) -> tuple[RunWorkspaces, WorkspaceSync | None]:
    """The run's workspaces: created, reopened as this disk has them, or restored from the store."""
    run, agents, source = ctx.run_id, ctx.agent_ids, ctx.team.workspace.source
    secrets = secret_patterns(ctx.team.workspace)  # left out of the copies
    if store is None:
        opened = RunWorkspaces.reopen if ctx.resumed else RunWorkspaces.create
        made = functools.partial(
            opened, root=base, run_id=run, agent_ids=agents, source=source, secrets=secrets
        )
        return await asyncio.to_thread(made), None
    if not ctx.resumed:
        new = functools.partial(
            RunWorkspaces.create, root=base, run_id=run, agent_ids=agents, source=source, secrets=secrets
        )
        spaces = await asyncio.to_thread(new)
        sync = WorkspaceSync(store, spaces, limits)
        await sync.snapshot_source()
        return spaces, sync
    sync = WorkspaceSync(store, RunWorkspaces(root=base, run_id=run, agent_ids=agents, source=source), limits)
    for rebuilt in await sync.reopen():
        log.warning("run %s: workspace of %s rebuilt: %s", ctx.run_id, rebuilt.agent_id, rebuilt.reason)
        await ctx.persist(WorkspaceRebuilt(agent_id=rebuilt.agent_id, reason=rebuilt.reason))
    return sync.spaces, sync


class WorkspaceRunTools:
    """`RunTools` over real workspaces; also applies the winner's patch back through the gate."""

    def __init__(
        self,
        *,
        ctx: RunContext,
        spaces: RunWorkspaces,
        gate: PermissionGate,
        sandbox: Sandbox,
        engines: dict[str, Evaluator],
        owned_root: bool,
        hidden: tuple[Path, ...] = (),
        sync: WorkspaceSync | None = None,
    ) -> None:
        self.ctx = ctx
        self.credentials: Credentials | None = None  # forge tokens for a repository run (None: from env)
        self.sync = sync
        self.spaces = spaces
        self.gate = gate
        self.sandbox = sandbox
        self._engines = engines
        self._owned_root = owned_root
        limits = ctx.team.tools
        self._toolboxes = {
            agent_id: AgentTools(
                agent_id=agent_id,
                gate=gate,
                engine=engines[agent_id],
                ctx=ctx,
                sync=sync,
                env=ToolEnv(
                    workspace=spaces.path(agent_id),
                    peers=spaces.peers(agent_id),
                    hidden=hidden,
                    sandbox=sandbox,
                    command_timeout_s=limits.command_timeout_seconds,
                    output_limit=limits.output_limit_bytes,
                    egress=sandbox.egress,
                ),
            )
            for agent_id in ctx.agent_ids
        }

    @property
    def grants(self) -> RunGrants:
        """The run's "for this run" approvals, shared by every agent."""
        return self.gate.grants

    def workspace(self, agent_id: str) -> Path:
        """The agent's own workspace directory (for prompts and tests)."""
        return self.spaces.path(agent_id)

    def for_agent(self, agent_id: str) -> AgentTools:
        """The toolbox of `agent_id` (RunTools.for_agent); an unknown agent raises `OrchestratorError`."""
        try:
            return self._toolboxes[agent_id]
        except KeyError:
            raise OrchestratorError(f"no toolbox for agent {agent_id!r} in run {self.ctx.run_id}") from None

    async def winner_patch(self, agent_id: str) -> str | None:
        """Unified diff of the agent's workspace against the source, or None (RunTools.winner_patch)."""
        return await asyncio.to_thread(self.spaces.patch, agent_id)

    async def apply_patch(self, agent_id: str, patch: str, *, awaiting: str | None = None) -> ToolOutcome:
        """Write `patch` to the team's source folder, or publish it on the run's repository (all or nothing).

        One request for the whole patch (bound to its digest, carrying the diff): see `tools.apply`.
        """
        return await gated_apply(self, agent_id, patch, awaiting=awaiting)

    def engine(self, agent_id: str) -> Evaluator:
        """The permission engine of `agent_id` (its own workspace)."""
        return self._engines[agent_id]

    async def park(self) -> None:
        """The run parks: its workspaces (checkpointed) and pending approvals stay for the resume."""
        if self.sync is not None:
            await self.sync.checkpoint_all()

    async def close(self, reason: str) -> None:
        """Cancel the run's pending approvals (saying `reason`); remove its workspaces (and a temp root)."""
        try:
            await self.gate.approvals.cancel_run(self.ctx.run_id, reason)
        except Exception:  # closing must go on: the requests still expire on their own
            log.exception("could not cancel the pending approvals of run %s", self.ctx.run_id)
        if self.sync is not None:
            await self.sync.drop()
        await asyncio.to_thread(self.spaces.close)
        if self._owned_root:
            await asyncio.to_thread(shutil.rmtree, self.spaces.root, True)


class AgentTools:
    """`AgentToolbox` of one agent."""

    def __init__(
        self,
        *,
        agent_id: str,
        gate: PermissionGate,
        engine: Evaluator,
        ctx: RunContext,
        env: ToolEnv,
        sync: WorkspaceSync | None = None,
    ) -> None:
        self.agent_id = agent_id
        self._sync = sync
        self.env = env
        self._gate = gate
        self._engine = engine
        self._ctx = ctx

    def specs(self, phase: ToolPhase) -> Sequence[ToolSpec]:
        """Every tool, in both phases (AgentToolbox.specs); the gate decides what may run when."""
        # Same tools in both phases; the gate decides what may run in which phase.
        return tool_specs()

    async def call(self, call: ToolCall, *, phase: ToolPhase, awaiting: str | None = None) -> ToolOutcome:
        """Validate, gate, execute exactly the approved input; never raises for a bad call.

        Raises `ToolParked` when the call waits for a human (`awaiting` resumes it).
        """
        try:
            return await self._call(call, phase, awaiting)
        except RunStoreUnavailable:  # not stored, so not run; the run suspends
            raise
        except Exception as exc:  # a bug costs one tool call, not the agent; cancellation propagates
            log.exception("tool %s of agent %s failed", call.name, self.agent_id)
            return ToolOutcome(content=f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)

    async def _call(self, call: ToolCall, phase: ToolPhase, awaiting: str | None) -> ToolOutcome:
        emit = self._ctx.emit
        arguments = {k: _clip(v) for k, v in call.arguments.items()}  # events are logged and shown
        if awaiting is None:  # a resumed call was reported when it was first made
            await emit(
                ToolCalled(agent_id=self.agent_id, call_id=call.id, tool=call.name, arguments=arguments)
            )
        await emit(AgentStatus(agent_id=self.agent_id, status="tool", detail=call.name))
        try:
            args = parse_args(call.name, call.arguments)
        except ToolArgumentError as exc:
            denied = _Report(call, phase, f"{call.name}(invalid arguments)", "low", "validation")
            return await self._refuse(denied, str(exc))
        frozen = json.dumps(args.model_dump(mode="json"), sort_keys=True)
        digest = action_digest(call.name, json.loads(frozen))
        real = pin(args, self.env.workspace)
        actions = actions_for(args, self.env.workspace, real=real)
        question = GateCall(
            agent_id=self.agent_id,
            tool=call.name,
            actions=actions,
            digest=digest,
            phase=phase,
            # Through a symlink the approver sees the real path, which is what will be opened.
            request_action=actions[-1],
            context=_request_context(frozen, actions),
        )
        refusal = self._boundary_refusal(args, real)
        if refusal is not None:  # refused whatever a human would say: don't ask one
            await self._gate.refuse(question, refusal)
            return await self._refuse(_Report(call, phase, str(actions[0]), "high", "boundary"), refusal)
        result = await self._gate.check(self._engine, question, awaiting=awaiting)
        decision = result.decision
        layer = "policy" if result.deferred else decision.layer
        report = _Report(call, phase, " + ".join(map(str, actions)), decision.risk, layer)
        if not result.allowed:
            return await self._refuse(report, result.reason, result)
        return await self._run_bound(report, frozen, digest, result, real)

    def _secret_refusal(self, target: Path, real: str | None) -> str | None:
        mine = (self.env.workspace, *self.env.peers)
        secrets = (*SECRET_FILES, *self._ctx.team.workspace.secrets)  # the team's names too
        for path in dict.fromkeys([target, Path(real)] if real is not None else [target]):
            if any(path == root or root in path.parents for root in mine):
                continue
            if any(path == hidden or hidden in path.parents for hidden in self.env.hidden):
                return f"refused: {path} is a hidden place (secrets stay out of reach)"
            if any(is_secret_name(part, secrets) for part in path.parts):
                return f"refused: {path} is a secrets file (never read outside a workspace)"
        return None

    def _boundary_refusal(self, args: Any, real: str | None) -> str | None:
        """File writes stay in the own workspace whatever is approved; peers' are never writable.

        Reads outside the workspaces never reach a hidden place (the bot's home, its state, the
        folders `hide` names) or a secrets file (`.env*`, keys, credentials), approved or not:
        these tools run in the bot's process, so the sandbox does not hide them there.
        """
        if isinstance(args, ReadFileArgs | ListFilesArgs | SearchFilesArgs):
            return self._secret_refusal(resolve(args.path, self.env.workspace), real)
        if not isinstance(args, WriteFileArgs):
            return None
        target = resolve(args.path, self.env.workspace)
        own = Path(os.path.realpath(self.env.workspace))
        if self.env.workspace in target.parents and real is not None and own in Path(real).parents:
            return None
        if self.env.workspace in target.parents:
            return f"refused: {target} leads outside your workspace through a symlink (to {real})"
        for peer in self.env.peers:
            if target == peer or peer in target.parents:
                return f"refused: {target} is another agent's workspace (readable, never writable)"
        return (
            f"refused: write_file writes only inside your own workspace ({self.env.workspace}), not {target}"
        )

    async def _run_bound(
        self, report: _Report, frozen: str, digest: str, result: GateResult, real: str | None
    ) -> ToolOutcome:
        # Re-derive the input from the frozen text and re-check its hash: what runs is what was approved.
        name = report.call.name
        bound = parse_args(name, json.loads(frozen))
        if action_digest(name, bound.model_dump(mode="json")) != digest or (
            result.request is not None and result.request.digest != digest
        ):
            return await self._refuse(
                replace(report, layer="policy"), "refused: the input changed after approval", result
            )
        # Stored before it runs: a restart after this point reports "outcome unknown", never re-runs it.
        request_id = result.request.id if result.request is not None else None
        started = ToolStarted(
            agent_id=self.agent_id, call_id=report.call.id, tool=name, request_id=request_id
        )
        await self._ctx.persist(started)
        try:
            content = await execute(
                bound, self.env, network=result.network, real=real, hosts=result.decision.hosts
            )
            is_error = False
        except (OSError, OrchestratorError) as exc:
            content, is_error = f"{name} failed: {exc}", True
        if self._sync is not None and name in _WRITING_TOOLS:  # stored before the result is reported
            await self._sync.checkpoint(self.agent_id)
        done = ToolOutcome(content=content, is_error=is_error)
        await self._report(
            report, allowed=True, reason=result.reason, preview=content, done=done, gate=result
        )
        return done

    async def _refuse(self, report: _Report, reason: str, gate: GateResult | None = None) -> ToolOutcome:
        await self._report(report, allowed=False, reason=reason, gate=gate)
        return ToolOutcome(content=reason, is_error=True)

    async def _report(
        self,
        report: _Report,
        *,
        allowed: bool,
        reason: str,
        preview: str = "",
        done: ToolOutcome | None = None,
        gate: GateResult | None = None,
    ) -> None:
        event = ToolDecided(
            agent_id=self.agent_id,
            call_id=report.call.id,
            tool=report.call.name,
            action=report.action[:_PREVIEW],
            decision="allow" if allowed else "deny",
            risk=report.risk,
            layer=report.layer,
            reason=reason,
            executed=allowed,
            result_preview=preview[:_PREVIEW],
            **what_happened(report.call.name, gate, done),
        )
        await self._ctx.emit(event)
        status: AgentState = "thinking" if report.phase == "coordination" else "presenting"
        await self._ctx.emit(AgentStatus(agent_id=self.agent_id, status=status, detail=""))


@dataclass(frozen=True, slots=True)
class _Report:
    """What the ToolDecided event of one call says about it."""

    call: ToolCall
    phase: ToolPhase
    action: str
    risk: str
    layer: str


def _clip(value: Any) -> Any:
    """Long strings (file contents) shortened for the event log; the tool itself gets them whole."""
    if isinstance(value, str) and len(value) > _EVENT_ARG_CHARS:
        return value[:_EVENT_ARG_CHARS] + f"… [{len(value) - _EVENT_ARG_CHARS} more characters]"
    return value


def _request_context(frozen: str, actions: tuple[Action, ...]) -> dict[str, str]:
    """What an approver may want beside the action: the raw input (e.g. a file's new content)."""
    context = {
        "input": frozen if len(frozen) <= _CONTEXT_INPUT_CHARS else frozen[:_CONTEXT_INPUT_CHARS] + "…"
    }
    if len(actions) > 1:
        context["path_as_given"] = actions[0].target
    return context


def what_happened(tool: str, gate: GateResult | None, done: ToolOutcome | None) -> dict[str, Any]:
    """`ToolDecided`'s outcome fields: what the action did (`done`), or why it never ran."""
    request = gate.request if gate is not None else None
    asked: dict[str, Any] = {"request_id": request.id} if request is not None else {}
    if done is None:
        status = request.status if request is not None else None
        return {"outcome": status if status in ("expired", "cancelled") else "denied", **asked}
    code = rendered_exit_code(done.content) if tool == "run_command" and not done.is_error else None
    failed = done.is_error or (tool == "run_command" and code != 0)
    return {"outcome": "failed" if failed else "ran", "exit_code": code, **asked}
