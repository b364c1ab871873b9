"""Start, resume or stop a run: the entry points, and the handle a caller holds.

`start_run` emits `RunStarted`, builds the tools and returns a `RunHandle` at once; the run's
`Supervisor` does the rest. No task of a run waits for a human: an ask parks the run, and
`resume_run` goes on by id once it is decided (`RunDriver` does both for an in-process caller).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Literal

from approvals import ConversationRef
from orchestrator.config.presets import PRESETS
from orchestrator.config.team import AgentConfig, TeamConfig
from orchestrator.errors import RunNotResumable
from orchestrator.events import TERMINAL_KINDS, AgentInfo, RunEvent, RunStarted
from orchestrator.ports import CallAdmission, ModelClient, RunStore, RunToolsFactory
from orchestrator.run.checkpoint import restore
from orchestrator.run.coordination import CoordinationState, rebuild_state
from orchestrator.run.emitter import Subscriber
from orchestrator.run.supervisor import ModelFactory, Parked, RunOutcome, Supervisor, Terminal


def default_models(agent: AgentConfig, *, admission: CallAdmission | None = None) -> ModelClient:
    """A real provider client from the backend config (key from the config, else the SDK/preset variable).

    `admission` (bound with `functools.partial`) holds its requests under the providers' limits.
    """
    from orchestrator.llm.factory import make_model_client  # SDKs load only when a client is built

    backend = agent.backend
    local = None
    if backend.type == "local":  # the embedded server: the team file's GGUF, else the packaged one
        from orchestrator.llm.llamacpp import LocalModel, default_gguf

        path = backend.model_path or default_gguf()
        local = LocalModel(path=path, n_ctx=backend.n_ctx, threads=backend.threads)
    # A preset's own URL goes back as the preset name: the factory then insists on its key variable
    # (a base URL alone would read as a private server that may need no key).
    preset_url = PRESETS[backend.preset][0] if backend.preset in PRESETS else None
    return make_model_client(
        type=backend.preset or backend.type,
        model=backend.model,
        base_url=None if backend.base_url == preset_url else backend.base_url,
        api_key=backend.api_key.get_secret_value() if backend.api_key is not None else None,
        api_key_env=backend.api_key_env,
        call_timeout_s=backend.call_timeout_seconds,
        idle_timeout_s=backend.idle_timeout_seconds,
        max_attempts=backend.max_attempts,
        max_tokens=backend.max_tokens,
        extra=dict(backend.extras),
        local=local,
        admission=admission,
    )


async def start_run(
    team: TeamConfig,
    task: str,
    *,
    models: ModelFactory | None = None,
    tools: RunToolsFactory | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    requester: str | None = None,
    context: str | None = None,
    clock: Callable[[], float] = time.time,
    subscribers: Sequence[Subscriber] = (),
    team_name: str | None = None,
    conversation: ConversationRef | None = None,
) -> RunHandle:
    """Start a run in the background and return its handle; `subscribers` see every event from the first.

    `team_name` and `conversation` (where the run lives, e.g. a Slack thread) are recorded with the
    run; every approval it asks for carries the conversation. No task waits for a human: an ask
    parks the run (see `RunHandle.outcome()`, `resume_run`, and `RunDriver`, which does both).
    """
    run = Supervisor(team, run_id or f"run-{secrets.token_hex(6)}", clock=clock, store=store)
    run.requester = requester
    run.conversation = conversation
    for callback in subscribers:
        run.emitter.subscribe(callback)
    run.emitter.start()
    agents = tuple(
        AgentInfo(
            agent_id=a.id,
            label=f"agent{i}",
            backend=a.backend.preset or a.backend.type,
            model=a.backend.model,
        )
        for i, a in enumerate(team.agents, start=1)
    )
    run.emit(
        RunStarted(
            task=task,
            agents=agents,
            requester=requester,
            context=context,
            team=team_name,
            conversation=conversation,
        )
    )
    await run.emitter.flush()  # the run is stored and every subscriber knows its agents on return
    run.owns_clients = models is None
    run.main_task = asyncio.create_task(run.main(models or default_models, tools, context), name=run.run_id)
    return RunHandle(run)


async def resume_run(
    run_id: str,
    team: TeamConfig,
    store: RunStore,
    *,
    models: ModelFactory | None = None,
    tools: RunToolsFactory | None = None,
    clock: Callable[[], float] = time.time,
    subscribers: Sequence[Subscriber] = (),
    events: Sequence[RunEvent] | None = None,
) -> RunHandle:
    """Continue a persisted run that never ended (the process died, or it parked).

    `events`: the run's whole stored log, when the caller has just read it from `store` (it is
    then not read again: a worker resuming a hundred runs at once saves a hundred queries).

    The coordination state and every agent's conversation are folded back from the event log
    (its checkpoints): a completed model call is not made again, a completed tool call not re-run,
    a call that started and never completed is reported to its agent as interrupted, and a call
    parked on an approval goes on from the request's stored decision (still pending: the run
    parks again at once). The run timeout counts the working time of earlier segments that parked.
    """
    run = await _resumed(run_id, team, store, clock=clock, events=events)
    for callback in subscribers:
        run.emitter.subscribe(callback)
    run.emitter.start()
    run.owns_clients = models is None
    context = run.context
    run.main_task = asyncio.create_task(run.main(models or default_models, tools, context), name=run_id)
    return RunHandle(run)


async def stop_parked_run(
    run_id: str,
    team: TeamConfig,
    store: RunStore,
    how: Literal["cancel", "finish_now"],
    *,
    by: str | None = None,
    tools: RunToolsFactory | None = None,
    clock: Callable[[], float] = time.time,
    subscribers: Sequence[Subscriber] = (),
) -> Terminal:
    """End a run that is not running here (parked) without resuming its agents.

    Cancel ends it with `RunCancelled`, finish-now with the best answer so far (salvage); its
    pending asks are cancelled and its workspaces removed, as for a live run.
    """
    run = await _resumed(run_id, team, store, clock=clock)
    run.preset_stop = (how, by)
    for callback in subscribers:
        run.emitter.subscribe(callback)
    run.emitter.start()
    run.main_task = asyncio.create_task(run.main(default_models, tools, run.context), name=run_id)
    outcome = await asyncio.shield(run.done)
    assert not isinstance(outcome, Parked)
    return outcome


async def _resumed(
    run_id: str,
    team: TeamConfig,
    store: RunStore,
    *,
    clock: Callable[[], float],
    events: Sequence[RunEvent] | None = None,
) -> Supervisor:
    events = list(events) if events is not None else await store.events(run_id)
    if not events or not isinstance(events[0], RunStarted):
        raise RunNotResumable(f"run {run_id!r} is not in the store")
    if events[-1].kind in TERMINAL_KINDS:
        raise RunNotResumable(f"run {run_id!r} already ended ({events[-1].kind})")
    started = events[0]
    if [a.agent_id for a in started.agents] != [a.id for a in team.agents]:
        raise RunNotResumable(f"run {run_id!r} was started with other agents than this team has")
    run = Supervisor(team, run_id, clock=clock, store=store, state=rebuild_state(events))
    run.requester = started.requester
    run.conversation = started.conversation
    run.context = started.context
    run.restored = restore(events)
    run.resumed = True
    return run


class RunHandle:
    """Control and observe one run."""

    def __init__(self, run: Supervisor) -> None:
        self._run = run
        self.run_id = run.run_id

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive every event from now on (nothing is replayed); returns an unsubscribe function."""
        return self._run.emitter.subscribe(callback)

    def events(self) -> AsyncIterator[RunEvent]:
        """Live events from now on, ending with the terminal event."""
        return self._run.emitter.stream()

    def snapshot(self) -> CoordinationState:
        """The current coordination state (immutable)."""
        return self._run.state

    async def cancel(self, by: str | None = None) -> None:
        """Stop everything now; the run ends with `RunCancelled`."""
        await self._run.stop("cancel", by)

    async def finish_now(self, by: str | None = None) -> None:
        """Stop the agents now and end with the best answer so far (salvage `finish_now:...`)."""
        await self._run.stop("finish_now", by)

    async def outcome(self) -> RunOutcome:
        """The terminal event, or `Parked` when nothing can go on without a human.

        Either once every task of the run has ended and every event was delivered.
        """
        return await asyncio.shield(self._run.done)
