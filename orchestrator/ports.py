"""Every port of the orchestrator: what the runner, the tools and the gate consume, as small Protocols.

Adapters implement them whole: `orchestrator.tools.build_run_tools` (RunTools), `orchestrator.sql`
and `orchestrator.store` (RunStore), `orchestrator.llm` (ModelClient), `approvals.ApprovalService`
(ApprovalPort); `orchestrator.testing` has fakes. No port is probed at run time for an optional
ability: a method a consumer needs is on the port, and every adapter has it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from orchestrator.events import GrantAdded, PullRequest, RunEvent
from orchestrator.llm.base import Message, OutputSchema, StreamItem, ToolCall, ToolSpec, Usage
from orchestrator.store import RunQuery, RunStatus, RunSummary

if TYPE_CHECKING:
    from approvals import ApprovalRequest, Ask, AuditEntry, ConversationRef
    from approvals.permissions import Action, Decision
    from orchestrator.config import TeamConfig
    from orchestrator.run.agent import AgentSession
    from orchestrator.run.coordination import CoordinationState

# Tools run while agents compete (`coordination`) or while the winner writes the final answer (`final`).
# Side-effect actions (push, publish, post) are deferred during coordination and run only in `final`,
# so N agents never push N times.
ToolPhase = Literal["coordination", "final"]
Emit = Callable[[RunEvent], Awaitable[None]]


# ---- models --------------------------------------------------------------------------------------


class ModelClient(Protocol):
    """One provider + model. Implementations retry transient failures and honour cancellation."""

    @property
    def model(self) -> str:
        """The model name, as the provider knows it."""
        ...

    def stream_turn(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        output: OutputSchema | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Stream one assistant turn; raises `ProviderError` once retries are exhausted.

        With `output`, the reply's text is JSON matching its schema (the provider's structured
        output); an adapter whose API has none raises a non-retryable `ProviderError`.
        """
        ...

    async def close(self) -> None:
        """Release the client's connections (a no-op for clients that hold none)."""
        ...


class CallAdmission(Protocol):
    """Who may send a model request now: per-provider rate and concurrency limits, fleet-wide.

    Every attempt of a model call (each retry is a new request) is made inside `admit`. The
    default (`orchestrator.llm.UNLIMITED`) admits at once; `orchestrator.LocalLimits` holds one
    process under them (the terminal runner; a worker whose engine stopped); the bot's engine holds
    the whole fleet of workers under each configured provider's limits.
    """

    def admit(self, provider: str, *, within: float) -> AbstractAsyncContextManager[None]:
        """Enter once a request to `provider` may start; the block holds its slot until it exits.

        Raises `TimeoutError` when it is not admitted within `within` s (the call's deadline);
        a slot is never held longer than that either.
        """
        ...


# ---- tools ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What the model sees as the tool result."""

    content: str
    is_error: bool = False
    pull_request: PullRequest | None = None  # the apply step of a run on a repository published this


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    """What a toolbox needs to know about its run. `emit` stamps and records events (ToolCalled, ...)."""

    run_id: str
    team: TeamConfig
    agent_ids: tuple[str, ...]
    requester: str | None
    emit: Emit
    conversation: ConversationRef | None = None  # where the run lives; every approval ask carries it
    resumed: bool = False  # the run is resumed: its workspaces exist already
    checkpoint: Emit | None = None  # emit and wait until stored (ToolStarted); None: like `emit`
    grants: tuple[GrantAdded, ...] = ()  # a resumed run's "for this run" grants, as its log has them
    task: str = ""  # the run's task (a published pull request's title)

    async def persist(self, event: RunEvent) -> None:
        """Emit `event` and return once it is stored (what a restart must see before a tool runs)."""
        await (self.checkpoint or self.emit)(event)


class AgentToolbox(Protocol):
    """One agent's tools (not the workflow tools `new_answer`/`vote`, which the runner owns)."""

    def specs(self, phase: ToolPhase) -> Sequence[ToolSpec]:
        """The tools offered to the model in this phase."""
        ...

    async def call(self, call: ToolCall, *, phase: ToolPhase, awaiting: str | None = None) -> ToolOutcome:
        """Run one call through the permission gate; an ask parks it while other agents keep working.

        Emits its own ToolCalled/ToolDecided/ToolApproval* events via the context's `emit`. An ask
        raises `ToolParked` (no coroutine waits for a human); the resumed call passes the request id
        as `awaiting` (nothing is asked again: the decision stored for it is the answer).
        """
        ...


class RunTools(Protocol):
    """The tools of a whole run: one toolbox per agent plus the winner's workspace diff."""

    def for_agent(self, agent_id: str) -> AgentToolbox:
        """The toolbox of `agent_id` (each agent has its own workspace)."""
        ...

    async def winner_patch(self, agent_id: str) -> str | None:
        """Unified diff of the agent's workspace against the source, or None when nothing changed."""
        ...

    async def park(self) -> None:
        """The run parks: free what this process holds, keep the workspaces and pending approvals."""
        ...

    async def close(self, reason: str) -> None:
        """Cancel the run's pending approvals, saying why (e.g. "the run timed out"); free the workspaces."""
        ...

    async def apply_patch(self, agent_id: str, patch: str, *, awaiting: str | None = None) -> ToolOutcome:
        """Apply `patch` for `agent_id` through the permission gate; all or nothing.

        Never raises, except `ToolParked` when it asks (`awaiting`: the request it was parked on).
        """
        ...


RunToolsFactory = Callable[[RunContext], Awaitable[RunTools]]


# ---- workspace snapshots -------------------------------------------------------------------------

ManifestKind = Literal["file", "link", "dir", "gone"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestEntry:
    """One path of a workspace snapshot; `gone`: removed from the source (an agent's delta)."""

    path: str  # relative POSIX path inside the workspace
    kind: ManifestKind
    mode: int = 0  # permission bits
    size: int = 0
    mtime_ns: int = 0
    digest: str | None = None  # sha256 (hex) of a file's bytes: the blob's key
    target: str | None = None  # a link's text (links are stored, never followed)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpaceManifest:
    """The stored snapshot of one workspace (an agent's, or the run's `.source` copy)."""

    space: str
    generation: int  # bumped by every save: a local copy older than this is stale
    complete: bool = True  # False: over a limit, the entries were not stored (`reason` says why)
    reason: str = ""
    entries: tuple[ManifestEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SpaceUpdate:
    """One checkpoint of one workspace: the new header, changed entries, removed paths, new blobs."""

    run_id: str
    space: str
    generation: int
    complete: bool = True
    reason: str = ""
    upsert: tuple[ManifestEntry, ...] = ()
    remove: tuple[str, ...] = ()
    replace: bool = False  # drop every stored entry of the space first
    blobs: Mapping[str, bytes] | None = None  # digest -> bytes the store lacked


class WorkspaceStore(Protocol):
    """Content-addressed workspace snapshots: blobs by sha256 (shared), per run a manifest per space."""

    async def missing(self, digests: Collection[str]) -> set[str]:
        """Which of `digests` have no stored blob (the others are marked as just used)."""
        ...

    async def save(self, update: SpaceUpdate) -> None:
        """Store the update's blobs and manifest changes in one transaction."""
        ...

    async def load(self, run_id: str) -> dict[str, SpaceManifest]:
        """Every stored space of the run, by name (empty for a run never snapshotted)."""
        ...

    async def blobs(self, digests: Collection[str]) -> dict[str, bytes]:
        """The stored bytes of `digests` (absent ones are left out)."""
        ...

    async def drop(self, run_id: str) -> None:
        """Forget the run's manifests (its blobs stay until the retention sweep finds them unused)."""
        ...


# ---- permission gate -----------------------------------------------------------------------------


class ApprovalPort(Protocol):
    """Everything the tools need from the approval lifecycle (`approvals.ApprovalService` is one).

    Complete on purpose: every adapter implements every method, so no behaviour (cancelling a run's
    requests when it ends, standing rules) can switch itself off.
    """

    async def request(self, ask: Ask) -> ApprovalRequest:
        """Open a pending request for the ask (audited and announced by the lifecycle)."""
        ...

    async def wait(self, request_id: str) -> ApprovalRequest:
        """The request once it is terminal (approved, denied, expired or cancelled).

        Only a driver waits here, between a park and the resume (an overdue request is expired):
        the tools never do, they park.
        """
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request as stored now (pending or decided), or None for an unknown id."""
        ...

    async def cancel_run(self, run_id: str, reason: str) -> int:
        """Cancel every pending request of the run, saying why; returns how many were cancelled."""
        ...

    async def always_rules(self) -> list[str]:
        """Allow rules persisted by earlier "always" approvals, e.g. `command(make test)`."""
        ...

    async def record_decision(self, entry: AuditEntry) -> None:
        """Audit an allow or deny the engine took without asking anyone."""
        ...


class Evaluator(Protocol):
    """The part of `approvals.permissions.PermissionEngine` the gate uses."""

    def evaluate_many(self, actions: Sequence[Action], *, grants: frozenset[str] = ...) -> Decision:
        """One verdict for all the actions of a call (the strictest wins); `grants` are run approvals."""
        ...

    def scope_key(self, action: Action) -> str:
        """What a "run" approval of `action` covers (e.g. the command without its arguments)."""
        ...


# ---- run store -----------------------------------------------------------------------------------


class RunLease(Protocol):
    """A run held by this process (`RunStore.lease`)."""

    async def lost(self) -> str:
        """Return, saying why, only once the lease is no longer held (checked every second or so).

        A lease ends with its holder; while the holder lives it can still be lost from outside (the
        database dropped its connection, its lock file was removed): then another process may take
        the run, and this one must stop driving it at once.
        """
        ...


class RunStore(Protocol):
    """Where runs are persisted. Events arrive in `seq` order per run."""

    async def append(self, *events: RunEvent) -> None:
        """Persist stamped events of one run, in `seq` order, all or none (and update the run's summary)."""
        ...

    async def events(self, run_id: str) -> list[RunEvent]:
        """All events of a run in `seq` order (empty for an unknown run)."""
        ...

    async def runs(self, limit: int = 50, *, status: RunStatus | None = None) -> list[RunSummary]:
        """The most recently started runs first."""
        ...

    async def get(self, run_id: str) -> RunSummary | None:
        """One run's summary."""
        ...

    async def find(self, query: RunQuery) -> list[RunSummary]:
        """The runs matching every filter of `query` (status, requester, channel), newest first."""
        ...

    def lease(self, run_id: str) -> AbstractAsyncContextManager[RunLease]:
        """Hold the run exclusively while the block drives it; `RunBusy` at once if another holder has it.

        The lease ends with its holder (a killed process included), never by a timeout.
        """
        ...


# ---- the runner's own seams ----------------------------------------------------------------------


class Host(Protocol):
    """What an agent session needs from its run."""

    team: TeamConfig

    @property
    def state(self) -> CoordinationState:
        """The run's coordination state now (immutable)."""
        ...

    def emit(self, event: RunEvent) -> RunEvent:
        """Stamp, record and publish one event; returns it stamped."""
        ...

    async def checkpoint(self, event: RunEvent) -> None:
        """Emit `event` and return once it is stored (what a restart must not repeat or lose)."""
        ...

    def over_budget(self) -> bool:
        """Whether the run's spend cap is reached (no further model call may start)."""
        ...

    def record_usage(self, agent_id: str, usage: Usage) -> None:
        """Add one model call's tokens and cost to the agent and the run."""
        ...


class Finisher(Protocol):
    """What ending a run needs from the runner (agent tasks already stopped)."""

    run_id: str
    team: TeamConfig
    sessions: dict[str, AgentSession]
    tools: RunTools | None

    @property
    def state(self) -> CoordinationState:
        """The run's coordination state now (immutable)."""
        ...

    def emit(self, event: RunEvent) -> RunEvent:
        """Stamp, record and publish one event; returns it stamped."""
        ...

    async def checkpoint(self, event: RunEvent) -> None:
        """Emit `event` and return once it is stored (what a restart must not repeat or lose)."""
        ...
