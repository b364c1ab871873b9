"""The permission gate: engine verdict → audit → (ask) approval request and park → events.

Every tool call of every agent passes `PermissionGate.check` before anything runs. Allow and deny
are audited here (`record_decision`); an ask becomes an approval request that the service audits and
a human answers. No coroutine waits for that answer: the call parks (`ToolParked`), the asking
agent's task ends while the others keep working, and the call resumed with the request's id
(`awaiting`) reads the stored decision. The request binds the digest of the exact validated input;
the gate refuses an approval whose digest differs. Side-effect actions (push, publish, post) are
deferred during coordination and allowed only in the final phase, for one agent per run: N agents
never push N times.

An approval "for this run" becomes a `GrantAdded` run event, stored before the grant takes effect;
the request itself records the scope keys it would grant (`SCOPE_KEYS` in its context). A resumed
run takes a stored grant back only when its request confirms it (approved for this run or always,
by the same person, for this run and agent, and every key among those the request recorded): a
grant never widens, and a grant event the request does not confirm changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from approvals import ApprovalRequest, Approvers, Ask, AuditEntry, ConversationRef, Outcome
from approvals.permissions import Action, Decision
from orchestrator.config.team import ApprovalsConfig
from orchestrator.errors import ToolParked
from orchestrator.events import (
    AgentState,
    AgentStatus,
    GrantAdded,
    ToolApprovalRequested,
    ToolApprovalResolved,
)
from orchestrator.ports import ApprovalPort, Emit, Evaluator, ToolPhase

log = logging.getLogger(__name__)

SCOPE_KEYS = "scope_keys"  # the ask's context entry: the JSON list of keys a "run" approval grants
JUDGE_TIMEOUT_S = 2.0  # a verdict slower than this is a deny: the engine is pure and takes milliseconds

DEFERRED = (
    "deferred: this action has an outside effect (push/publish/post) and is never executed while "
    "agents are still competing. Describe it in your answer; if your answer wins, you perform it "
    "in the final phase."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    """Whether the call may run, why, and what the engine said (`egress` opens the sandbox network)."""

    allowed: bool
    reason: str
    decision: Decision
    request: ApprovalRequest | None = None
    deferred: bool = False

    @property
    def network(self) -> bool:
        """True when the call runs with the sandbox's network open (allowed, and the engine said egress)."""
        return self.allowed and self.decision.egress


@dataclass(slots=True)
class RunGrants:
    """Scope keys approved "for this run", shared by all agents of the run."""

    keys: set[str] = field(default_factory=set)
    side_effect_agent: str | None = None  # the one agent allowed side effects in the final phase
    requests: set[str] = field(default_factory=set)  # the approval requests the keys came from


@dataclass(frozen=True, slots=True, kw_only=True)
class GateCall:
    """One permission question: who asks, for what tool input (bound by `digest`), in which phase."""

    agent_id: str
    tool: str
    actions: tuple[Action, ...]
    digest: str
    phase: ToolPhase
    request_action: Action | None = None  # what the approver is shown; default the first action
    context: Mapping[str, str] = field(default_factory=dict)


class PermissionGate:
    """One per run; engines are per agent (each has its own workspace), grants are per run."""

    def __init__(
        self,
        *,
        run_id: str,
        requester: str | None,
        approvals: ApprovalPort,
        approvers: Approvers,
        timeout: timedelta,
        emit: Emit,
        checkpoint: Emit | None = None,
        grants: RunGrants | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        conversation: ConversationRef | None = None,
        judge_timeout: float = JUDGE_TIMEOUT_S,
    ) -> None:
        self.run_id = run_id
        self._judge_timeout = judge_timeout
        self.requester = requester
        self.conversation = conversation
        self.grants = grants if grants is not None else RunGrants()
        self.approvals = approvals
        self._approvers = approvers
        self._timeout = timeout
        self._emit = emit
        self._checkpoint = checkpoint or emit  # a grant is stored before it takes effect
        # The request asked for a set of scope keys, by those keys (None: the ask opened nothing).
        # A future from before the ask's first await: an identical call arriving meanwhile joins it.
        self._asked: dict[frozenset[str], asyncio.Future[str | None]] = {}
        self._now = now

    async def check(self, engine: Evaluator, call: GateCall, *, awaiting: str | None = None) -> GateResult:
        """The engine's verdict, resolved through side-effect deferral and, for an ask, a human.

        An ask raises `ToolParked` once the request is open. `awaiting` resumes a call parked on
        that request: its stored decision is the answer (still pending: parked again).
        """
        if awaiting is not None:
            return await self._resume(engine, call, awaiting)
        granted = frozenset(self.grants.keys)  # what the verdict below is judged with
        decision = await self._judge(engine, call)
        if decision.resolved == "deny":
            return await self._finish(call, decision, False, decision.reason)
        if decision.side_effect:
            refusal = self._side_effect_refusal(call)
            if refusal is not None:
                return await self._finish(
                    call, decision, False, refusal, deferred=call.phase == "coordination"
                )
        if decision.resolved == "allow":
            return await self._finish(call, decision, True, decision.reason)
        return await self._ask_once(engine, call, decision, granted)

    async def _judge(self, engine: Evaluator, call: GateCall) -> Decision:
        """The engine's verdict, judged off the event loop; a failure or a slow verdict denies."""
        grants = frozenset(self.grants.keys)
        try:
            # `asyncio.timeout`, not `wait_for`: on 3.11 `wait_for` can swallow a cancellation that
            # arrives as the verdict does, and the cancelled agent would go on working.
            async with asyncio.timeout(self._judge_timeout):
                return await asyncio.to_thread(_evaluate, engine, call.actions, grants)
        except TimeoutError:
            log.warning("permission engine gave no verdict within %.1f s", self._judge_timeout)
            return _fail_closed(f"engine error: no verdict within {self._judge_timeout:g} s")
        except Exception as exc:  # an engine failure must deny, never allow
            log.exception("permission engine failed")
            return _fail_closed(f"engine error: {exc}")

    async def _ask_once(
        self, engine: Evaluator, call: GateCall, decision: Decision, granted: frozenset[str]
    ) -> GateResult:
        """Ask, unless the same action is already asked: then park on that request.

        N agents wanting the same `pip install` make one Slack message, not N. A "run" approval
        then lets the followers through when they resume; "once" never propagates (pitfall 19):
        they ask in turn.
        """
        key = frozenset(engine.scope_key(a) for a in call.actions)
        asked = self._asked.get(key)
        if asked is not None:
            request_id = await asyncio.shield(asked)
            if request_id is not None and await self._pending(request_id):
                detail = f"waiting for the same approval ({call.actions[0]})"
                await self._emit(
                    AgentStatus(agent_id=call.agent_id, status="awaiting_approval", detail=detail)
                )
                raise ToolParked(request_id)
            if self._asked.get(key) is asked:  # decided (or never opened): this call asks anew
                del self._asked[key]
            return await self.check(engine, call)
        if not self.grants.keys <= granted:  # approved "for this run" since the verdict: judge again
            return await self.check(engine, call)
        asked = asyncio.get_running_loop().create_future()
        self._asked[key] = asked
        opened: str | None = None
        try:
            request = await self._request(engine, call, decision)
            if isinstance(request, GateResult):  # nobody could be asked: denied
                return request
            opened = request.id
            raise ToolParked(request.id)
        finally:
            asked.set_result(opened)
            if opened is None and self._asked.get(key) is asked:
                del self._asked[key]

    async def _pending(self, request_id: str) -> bool:
        request = await self.approvals.get(request_id)
        return request is not None and request.status == "pending"

    async def refuse(self, call: GateCall, reason: str, *, layer: str = "boundary") -> None:
        """Audit a refusal decided before the engine (e.g. a write outside the own workspace)."""
        await self._audit(call, "deny", layer=layer, risk="high", reason=reason)

    def _side_effect_refusal(self, call: GateCall) -> str | None:
        if call.phase == "coordination":
            return DEFERRED
        holder = self.grants.side_effect_agent
        if holder is not None and holder != call.agent_id:
            return f"refused: side effects of this run are performed by {holder} only (once per run)"
        self.grants.side_effect_agent = call.agent_id
        return None

    async def _finish(
        self, call: GateCall, decision: Decision, allowed: bool, reason: str, *, deferred: bool = False
    ) -> GateResult:
        outcome: Outcome = "allow" if allowed else "deny"
        layer = "policy" if deferred else decision.layer
        await self._audit(call, outcome, layer=layer, risk=decision.risk, reason=reason)
        return GateResult(allowed=allowed, reason=reason, decision=decision, deferred=deferred)

    async def _audit(self, call: GateCall, outcome: Outcome, *, layer: str, risk: str, reason: str) -> None:
        entry = AuditEntry(
            at=self._now(),
            run_id=self.run_id,
            agent_id=call.agent_id,
            actor="engine",
            action=" + ".join(str(a) for a in call.actions),
            outcome=outcome,
            layer=layer,
            risk=risk,
            reason=reason,
        )
        await self.approvals.record_decision(entry)

    async def _request(
        self, engine: Evaluator, call: GateCall, decision: Decision
    ) -> ApprovalRequest | GateResult:
        """Open the approval request (announced by events), or the denial when none can be opened."""
        action = _shown(call)
        keys = json.dumps(sorted({engine.scope_key(a) for a in call.actions}))
        context = {
            "run_id": self.run_id,
            "agent_id": call.agent_id,
            "tool": call.tool,
            **call.context,
            SCOPE_KEYS: keys,  # what a "run" approval of this request may grant, and nothing more
        }
        ask = Ask(
            run_id=self.run_id,
            agent_id=call.agent_id,
            requester=self.requester,
            action=action,
            digest=call.digest,
            decision=decision,
            approvers=self._approvers,
            timeout=self._timeout,
            conversation=self.conversation,
            context=context,
        )
        try:
            request = await self.approvals.request(ask)
        except Exception as exc:  # no approvers, store down...: nobody can say yes, so the answer is no
            log.warning("approval request failed: %s", exc)
            return await self._finish(
                call, decision, False, f"denied: approval could not be requested ({exc})"
            )
        await self._emit(_requested_event(call.agent_id, request))
        await self._emit(AgentStatus(agent_id=call.agent_id, status="awaiting_approval", detail=str(action)))
        return request

    @staticmethod
    def _working(call: GateCall) -> AgentStatus:
        status: AgentState = "tool" if call.phase == "coordination" else "presenting"
        return AgentStatus(agent_id=call.agent_id, status=status, detail=call.tool)

    async def _resume(self, engine: Evaluator, call: GateCall, request_id: str) -> GateResult:
        """A parked call after a restart or a decision: the request's stored state is the answer.

        Still pending, it parks again, overdue or not: expiring a request is the expiry
        scheduler's (or the driver's) work, and its expiry resumes the run like a decision.
        """
        request = await self.approvals.get(request_id)
        if request is None:  # fail closed: nobody can have approved what does not exist
            decision = _fail_closed("denied: the approval request this call waited for is unknown")
            return await self._finish(call, decision, False, decision.reason)
        if request.status == "pending":
            raise ToolParked(request_id)
        if (
            request.agent_id != call.agent_id
            or request.digest != call.digest
            or request.action != _shown(call)
        ):
            # Parked behind another agent's identical ask: a "once" approval is not ours; ask in turn.
            # A "run" approval of that ask frees this identical call too, whichever agent resumes first.
            # The same input that now names another action (a symlink swapped while it was parked)
            # is not what was approved either: it is judged, and asked, anew.
            await self._take_grant(request, _keys(engine, call))
            return await self.check(engine, call)
        await self._emit(self._working(call))
        await self._emit(_resolved_event(call.agent_id, request))
        decision = await self._judge(engine, call)
        if decision.resolved == "deny":  # the policy now denies it: an old approval does not override
            return await self._finish(call, decision, False, decision.reason)
        return await self._decided(call, decision, request, _keys(engine, call))

    async def _decided(
        self, call: GateCall, decision: Decision, final: ApprovalRequest, keys: tuple[str, ...]
    ) -> GateResult:
        # The service audited the human decision; here only the binding and the run grant remain.
        if final.status != "approved":
            reason = _denial_reason(final)
            return GateResult(allowed=False, reason=reason, decision=decision, request=final)
        if final.digest != call.digest:  # approved something else: never run it (pitfall 18)
            reason = "denied: the approval does not match this exact call"
            return GateResult(allowed=False, reason=reason, decision=decision, request=final)
        await self._take_grant(final, keys)
        by = f" by {final.decided_by}" if final.decided_by else ""
        return GateResult(allowed=True, reason=f"approved{by}", decision=decision, request=final)

    async def restore_grants(self, grants: Iterable[GrantAdded]) -> int:
        """Take back a resumed run's stored grants, each only as far as its request confirms it.

        Returns how many were taken. A grant its request does not confirm is logged and ignored:
        the actions it names are asked again (fail closed).
        """
        taken = 0
        for event in grants:
            request = await self.approvals.get(event.request_id)
            why = _unconfirmed(self.run_id, event, request)
            if why is not None:
                log.warning("run %s: ignoring grant of request %s: %s", self.run_id, event.request_id, why)
                continue
            self.grants.keys.update(event.scope_keys)
            self.grants.requests.add(event.request_id)
            taken += 1
        return taken

    async def _take_grant(self, request: ApprovalRequest, keys: tuple[str, ...]) -> None:
        """Grant `keys` for the rest of the run when `request` was approved "for this run" (or always).

        The grant is stored first (`GrantAdded`); if it cannot be stored it does not take effect.
        """
        if request.status != "approved" or request.decision_scope not in ("run", "always"):
            return
        if request.id in self.grants.requests and set(keys) <= self.grants.keys:
            return  # already granted (restored, or taken by the other agent of an identical ask)
        event = GrantAdded(
            agent_id=request.agent_id,
            request_id=request.id,
            scope_keys=keys,
            scope="always" if request.decision_scope == "always" else "run",
            by=request.decided_by,
        )
        why = _unconfirmed(self.run_id, event, request)
        if why is not None:
            log.warning("run %s: not granting request %s: %s", self.run_id, request.id, why)
            return
        self.grants.requests.add(request.id)  # before the await: a concurrent taker does not repeat it
        try:
            await self._checkpoint(event)
        except Exception:  # not stored, not granted: the next such action asks again
            self.grants.requests.discard(request.id)
            log.exception("run %s: the grant of request %s could not be stored", self.run_id, request.id)
            return
        self.grants.keys.update(keys)


def approvers_of(settings: ApprovalsConfig) -> Approvers:
    """The team file's approvers section as the approval service's value object."""
    return Approvers(
        users=frozenset(settings.approvers),
        groups=frozenset(settings.approver_groups),
        allow_self_approval=settings.allow_self_approval,
        quorum=settings.quorum,
    )


def _shown(call: GateCall) -> Action:
    """The action an approver is shown for `call` (and which its approval therefore names)."""
    return call.request_action or call.actions[0]


def _keys(engine: Evaluator, call: GateCall) -> tuple[str, ...]:
    return tuple(sorted({engine.scope_key(a) for a in call.actions}))


def _unconfirmed(run_id: str, grant: GrantAdded, request: ApprovalRequest | None) -> str | None:
    """Why `request` does not confirm `grant` (None: it does)."""
    if request is None:
        return "no such approval request"
    if request.run_id != run_id or request.agent_id != grant.agent_id:
        return "the request belongs to another run or agent"
    if request.status != "approved" or request.decision_scope not in ("run", "always"):
        return "the request was not approved for this run"
    if grant.scope != request.decision_scope or grant.by != request.decided_by:
        return "the grant does not match the request's decision"
    try:
        recorded = json.loads(request.context.get(SCOPE_KEYS, "[]"))
    except ValueError:
        return "the request's scope keys are unreadable"
    if not isinstance(recorded, list) or not all(isinstance(k, str) for k in recorded):
        return "the request's scope keys are unreadable"
    if not grant.scope_keys or not set(grant.scope_keys) <= set(recorded):
        return "the grant names scope keys the request does not"
    return None


def _evaluate(engine: Evaluator, actions: tuple[Action, ...], grants: frozenset[str]) -> Decision:
    # No lock: the engine keeps one shell parser per thread and bounds its own work, so one agent's
    # pathological command never makes another agent's judgment wait.
    return engine.evaluate_many(actions, grants=grants)


def _fail_closed(reason: str) -> Decision:
    return Decision(verdict="deny", resolved="deny", risk="critical", layer="policy", reason=reason)


def _denial_reason(request: ApprovalRequest) -> str:
    match request.status:
        case "expired":
            return "denied: the approval request expired without an answer"
        case "cancelled":
            return "denied: the approval request was cancelled"
    why = f": {request.decision_reason}" if request.decision_reason else ""
    by = f" by {request.decided_by}" if request.decided_by else ""
    return f"denied{by}{why}"


def _requested_event(agent_id: str, request: ApprovalRequest) -> ToolApprovalRequested:
    return ToolApprovalRequested(
        agent_id=agent_id,
        request_id=request.id,
        action=str(request.action),
        risk=request.risk,
        layer=request.layer,
        reason=request.reason,
        rule=request.rule,
        expires_at=request.expires_at.timestamp(),
        scopes=tuple(request.scopes),
    )


def _resolved_event(agent_id: str, request: ApprovalRequest) -> ToolApprovalResolved:
    status = request.status if request.status != "pending" else "cancelled"
    return ToolApprovalResolved(
        agent_id=agent_id,
        request_id=request.id,
        status=status,
        decided_by=request.decided_by,
        scope=request.decision_scope,
        reason=request.decision_reason,
    )
