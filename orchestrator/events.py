"""Everything a run emits, in order: persisted as the run's event log and streamed to subscribers.

Each event is a frozen, keyword-only dataclass with a `kind` discriminator. The runner creates
events with `run_id`/`seq`/`at` left at their defaults and the emitter stamps them, so `seq` is
dense and ordered per run. `RUN_EVENT_ADAPTER` is the stable JSON schema (`to_json`/`from_json`).
Coordination state is a fold over these events (answers, votes, decisions), so a run can be
rebuilt from its log after a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from approvals import ConversationRef

AgentState = Literal[
    "waiting", "thinking", "tool", "awaiting_approval", "answered", "voted", "presenting", "failed", "done"
]
Phase = Literal["coordinating", "presenting", "done"]
Outcome = Literal["allow", "ask", "deny"]
ActionOutcome = Literal["ran", "failed", "denied", "expired", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Event:
    run_id: str = ""
    seq: int = 0
    at: float = 0.0  # Unix time in seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    """One agent as a run announces it: id, label shown to peers, backend and model."""

    agent_id: str
    label: str  # anonymised label shown to peers, e.g. "agent2"
    backend: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(_Event):
    """A run began: its task, its agents, who asked and where the run lives."""

    kind: Literal["started"] = "started"
    task: str
    agents: tuple[AgentInfo, ...]
    requester: str | None = None
    context: str | None = None  # e.g. a previous run's final answer for a follow-up
    team: str | None = None  # the team's name, as the caller chose it
    conversation: ConversationRef | None = None  # where the run lives (opaque surface coordinates)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStatus(_Event):
    """What an agent is doing now (waiting, thinking, in a tool...)."""

    kind: Literal["agent_status"] = "agent_status"
    agent_id: str
    status: AgentState
    detail: str = ""
    # On a turn start ("thinking"): the answer labels the agent's prompt shows, so a vote can be checked
    # against what the agent had seen (coordination state is a fold over events).
    seen: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(_Event):
    """Throttled model text, coalesced by the runner."""

    kind: Literal["text_delta"] = "text_delta"
    agent_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(_Event):
    """An agent called a tool (long arguments clipped, since events are logged and shown)."""

    kind: Literal["tool_call"] = "tool_call"
    agent_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecided(_Event):
    """The permission engine's decision on a tool call, and what happened."""

    kind: Literal["tool_decision"] = "tool_decision"
    agent_id: str
    call_id: str
    tool: str
    action: str  # e.g. "command(git push origin main)"
    decision: Outcome  # after policy and any approval
    risk: str
    layer: str
    reason: str
    executed: bool
    result_preview: str = ""
    # What the action did: `ran` (a command exited 0), `failed` (a non-zero exit, a timeout, an error),
    # or why it did not run: `denied` (by the engine or a person), `expired` or `cancelled` (an ask
    # nobody answered). None only in logs written before these fields existed.
    outcome: ActionOutcome | None = None
    exit_code: int | None = None  # run_command's, when it ran to an exit
    request_id: str | None = None  # the approval request a person was asked, if any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolApprovalRequested(_Event):
    """A tool call of this run waits for a human (the run's view of `approvals.ApprovalRequested`)."""

    kind: Literal["tool_approval_requested"] = "tool_approval_requested"
    agent_id: str
    request_id: str
    action: str
    risk: str
    layer: str
    reason: str
    rule: str | None = None
    expires_at: float
    scopes: tuple[str, ...] = ("once", "run")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolApprovalResolved(_Event):
    """The human answer (or expiry, or cancellation) a waiting tool call got."""

    kind: Literal["tool_approval_resolved"] = "tool_approval_resolved"
    agent_id: str
    request_id: str
    status: Literal["approved", "denied", "expired", "cancelled"]
    decided_by: str | None = None
    scope: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerSubmitted(_Event):
    """An agent submitted a new answer under a fresh label (it clears every vote)."""

    kind: Literal["answer"] = "answer"
    agent_id: str
    label: str  # versioned anonymised label, e.g. "agent2.1"
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteCast(_Event):
    """An agent voted for an agent's current answer, and why."""

    kind: Literal["vote"] = "vote"
    agent_id: str
    voted_for: str  # agent id
    voted_for_label: str  # answer label the vote is for, e.g. "agent1.2"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteIgnored(_Event):
    """A vote not counted because the voter had not seen every current answer."""

    kind: Literal["vote_ignored"] = "vote_ignored"
    agent_id: str
    voted_for: str
    reason: str  # why it was ignored, e.g. "cast before seeing agent3.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRestarted(_Event):
    """An agent was shown answers it had not seen (after an ignored vote, or injected into a tool result)."""

    kind: Literal["restart"] = "restart"
    agent_id: str
    reason: str
    new_answers: tuple[str, ...] = ()  # labels the agent is restarted to see


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFailed(_Event):
    """An agent dropped out of the run, and why."""

    kind: Literal["agent_failed"] = "agent_failed"
    agent_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsensusReached(_Event):
    """Every live agent voted: the winner, the tally and how a tie was broken."""

    kind: Literal["consensus"] = "consensus"
    winner: str  # agent id
    winner_label: str
    tally: dict[str, int]  # agent id -> votes
    tie_break: str | None = None  # how a tie was broken, when there was one


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalDelta(_Event):
    """Streamed text of the final answer, as the final phase produces it."""

    kind: Literal["final_delta"] = "final_delta"
    agent_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated(_Event):
    """Token and cost totals after a model call, for the agent and for the whole run."""

    kind: Literal["usage"] = "usage"
    agent_id: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    run_input_tokens: int
    run_output_tokens: int
    run_cost_usd: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PullRequest:
    """What a run on a repository published: the pushed branch and commit, and its pull request."""

    repository: str
    branch: str
    commit: str
    title: str
    stat: str  # e.g. "1 file changed, 2 insertions(+)"
    url: str | None = None  # None: `forge: none` (pushed only)
    number: int | None = None
    created: bool = True  # False: a follow-up pushed to the branch of an existing request


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(_Event):
    """The run ended with an answer (by consensus or salvaged), with its tally, patch and spend."""

    kind: Literal["finished"] = "finished"
    winner: str | None
    answer: str
    tally: dict[str, int] = field(default_factory=dict)
    # None for a converged run; otherwise why the answer was salvaged ("timeout", "budget", "finish_now",
    # "max_rounds") and from what ("most_voted" or "latest_answer").
    salvage: str | None = None
    patch: str | None = None  # the winner's workspace changes as a unified diff
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    # `workspace.apply: ask`: None = not attempted; True = the patch was written to the source;
    # False = refused or failed, `apply_reason` says why (the run's outcome stays the same).
    applied: bool | None = None
    apply_reason: str | None = None
    pull_request: PullRequest | None = None  # a run on a repository: what the approved publish made
    stopped_by: str | None = None  # who clicked Finish now (a user id), for `salvage` "finish_now:…"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(_Event):
    """The run ended without an answer; `reasons` says why, per agent id (or "run")."""

    kind: Literal["failed"] = "failed"
    reasons: dict[str, str]  # agent id (or "run") -> reason


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelled(_Event):
    """The run was cancelled (`by` whom, when known)."""

    kind: Literal["cancelled"] = "cancelled"
    by: str | None = None


# ---- checkpoints: what a resumed run needs to go on without repeating work (issue 11) -------------

CheckpointPhase = Literal["coordination", "final"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointCall:
    """One tool call of a checkpointed model reply, whole (the model's own arguments)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallCompleted(_Event):
    """A model call of a turn completed: its reply (text and tool calls), never to be made again."""

    kind: Literal["model_call"] = "model_call"
    agent_id: str
    phase: CheckpointPhase = "coordination"
    text: str
    calls: tuple[CheckpointCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnMessage(_Event):
    """A message the runner added to an agent's conversation: a user message or a tool result.

    `fresh` starts a new conversation (a structured agent's turn, the final phase); a tool result
    of a call is also the record that the call completed.
    """

    kind: Literal["turn_message"] = "turn_message"
    agent_id: str
    phase: CheckpointPhase = "coordination"
    role: Literal["user", "tool"]
    text: str
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    fresh: bool = False
    opens_turn: bool = False  # the first message of a coordination turn


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(_Event):
    """A tool call is about to execute (persisted first): a restart never runs it again."""

    kind: Literal["tool_started"] = "tool_started"
    agent_id: str
    call_id: str
    tool: str
    request_id: str | None = None  # the approval it executes under, if one was asked


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAwaiting(_Event):
    """A tool call is parked on an approval request: the agent's task ended until it is decided."""

    kind: Literal["tool_awaiting"] = "tool_awaiting"
    agent_id: str
    call_id: str
    request_id: str
    phase: Literal["coordination", "final", "apply"] = "coordination"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConcluded(_Event):
    """The answer stands (before the apply-back step): a resumed run goes straight to applying it."""

    kind: Literal["concluded"] = "concluded"
    result: RunFinished


@dataclass(frozen=True, slots=True, kw_only=True)
class RunParked(_Event):
    """Nothing can progress without a human: every task of the run ended; a decision resumes it."""

    kind: Literal["parked"] = "parked"
    waiting: tuple[str, ...]  # approval request ids
    worked_seconds: float = 0.0  # working time of the segment that parked (the timeout counts these)


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantAdded(_Event):
    """An approval "for this run" (or "always") takes effect: later actions with these scope keys are allowed.

    Persisted before the grant takes effect, and folded back when the run resumes; the resume
    accepts it only as far as the approval request it names (approved, this run, this scope, these
    keys) confirms it, so an edited log cannot widen what was granted.
    """

    kind: Literal["grant_added"] = "grant_added"
    agent_id: str  # who asked (the request's agent)
    request_id: str
    scope_keys: tuple[str, ...]
    scope: Literal["run", "always"] = "run"
    by: str | None = None  # who approved (the audit's actor of the approval)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceRebuilt(_Event):
    """A resumed run could not get an agent's workspace back: it was rebuilt from the source.

    Over the snapshot limit, a stored manifest refused as unsafe, or none stored: the files the
    agent made before are gone, and `reason` says why.
    """

    kind: Literal["workspace_rebuilt"] = "workspace_rebuilt"
    agent_id: str
    reason: str


RunEvent = Annotated[
    RunStarted
    | AgentStatus
    | TextDelta
    | ToolCalled
    | ToolDecided
    | ToolApprovalRequested
    | ToolApprovalResolved
    | AnswerSubmitted
    | VoteCast
    | VoteIgnored
    | AgentRestarted
    | AgentFailed
    | ConsensusReached
    | FinalDelta
    | UsageUpdated
    | RunFinished
    | RunFailed
    | RunCancelled
    | ModelCallCompleted
    | TurnMessage
    | ToolStarted
    | ToolAwaiting
    | RunConcluded
    | RunParked
    | GrantAdded
    | WorkspaceRebuilt,
    Field(discriminator="kind"),
]
TERMINAL_KINDS = frozenset({"finished", "failed", "cancelled"})

RUN_EVENT_ADAPTER: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)


def to_json(event: RunEvent) -> str:
    """One event as its stored JSON."""
    return RUN_EVENT_ADAPTER.dump_json(event).decode()


# Kinds renamed since runs were first stored (issue 8): logs written before still load.
_RENAMED_KINDS = {
    "approval_requested": "tool_approval_requested",
    "approval_resolved": "tool_approval_resolved",
}


def from_json(data: str | bytes) -> RunEvent:
    """One event from its stored JSON (older kinds are read under their current names)."""
    try:
        return RUN_EVENT_ADAPTER.validate_json(data)
    except ValidationError:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("kind") not in _RENAMED_KINDS:
            raise
        return RUN_EVENT_ADAPTER.validate_python({**raw, "kind": _RENAMED_KINDS[raw["kind"]]})


def json_schema() -> dict[str, Any]:
    """The JSON schema of every run event."""
    return RUN_EVENT_ADAPTER.json_schema()


def to_line(event: RunEvent) -> str:
    """One JSON line, keys sorted, for `--json` output and logs."""
    return json.dumps(RUN_EVENT_ADAPTER.dump_python(event, mode="json"), sort_keys=True)
