"""The runner: one supervisor task per run, one task per agent, all owned and drained by the run.

`start_run` emits `RunStarted`, builds the tools and returns a `RunHandle` at once. The supervisor
waits on the coordination state (a fold over the events, see `coordination.py`) until the agents
converge, all fail, get stuck at `max_rounds`, or the spend cap is reached; then it stops every
agent task and finishes: a presentation by the winner, or a salvage without any model call. With
`workspace.apply: ask` the winner's patch is then applied to the source through the permission gate
(usually a wait for an approver). Run timeout, `cancel()` and `finish_now()` interrupt it at any point
(the apply wait included, which cancels its approval); nothing keeps running afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Literal

from approvals import ConversationRef
from orchestrator.config.cost import Price, cost_usd, resolve_price
from orchestrator.config.presets import LOCAL_PRESETS, PRESETS
from orchestrator.config.team import AgentConfig, TeamConfig
from orchestrator.errors import RunNotResumable
from orchestrator.events import (
    TERMINAL_KINDS,
    AgentFailed,
    AgentInfo,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    UsageUpdated,
)
from orchestrator.llm.base import Usage
from orchestrator.ports import ModelClient, RunContext, RunStore, RunTools, RunToolsFactory
from orchestrator.run.agent import AgentDropped, AgentSession, BudgetReached
from orchestrator.run.coordination import CoordinationState, rebuild_state
from orchestrator.run.emitter import Emitter, Subscriber
from orchestrator.run.final import apply_back, conclude, salvage, wants_apply

Terminal = RunFinished | RunFailed | RunCancelled
ModelFactory = Callable[[AgentConfig], ModelClient]
log = logging.getLogger(__name__)


def default_models(agent: AgentConfig) -> ModelClient:
    """A real provider client from the backend config (key from the config, else the SDK/preset variable)."""
    from orchestrator.llm.factory import make_model_client  # SDKs load only when a client is built

    backend = agent.backend
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
        extra=dict(backend.extras),
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
    run; every approval it asks for carries the conversation.
    """
    run = _Run(team, run_id or f"run-{secrets.token_hex(6)}", clock=clock, store=store)
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
) -> RunHandle:
    """Continue a persisted run that never ended (the process died): only in-flight turns are redone.

    The coordination state is folded back from the event log; answers, votes, failures and spend
    carry over and `seq` continues. Agents start fresh conversations that show the current answers
    (model conversations are not persisted), and the run timeout starts again.
    """
    events = await store.events(run_id)
    if not events or not isinstance(events[0], RunStarted):
        raise RunNotResumable(f"run {run_id!r} is not in the store")
    if events[-1].kind in TERMINAL_KINDS:
        raise RunNotResumable(f"run {run_id!r} already ended ({events[-1].kind})")
    started = events[0]
    if [a.agent_id for a in started.agents] != [a.id for a in team.agents]:
        raise RunNotResumable(f"run {run_id!r} was started with other agents than this team has")
    run = _Run(team, run_id, clock=clock, store=store, state=rebuild_state(events))
    run.requester = started.requester
    run.conversation = started.conversation
    for callback in subscribers:
        run.emitter.subscribe(callback)
    run.emitter.start()
    run.owns_clients = models is None
    run.main_task = asyncio.create_task(
        run.main(models or default_models, tools, started.context), name=run_id
    )
    return RunHandle(run)


class RunHandle:
    """Control and observe one run."""

    def __init__(self, run: _Run) -> None:
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

    async def wait(self) -> Terminal:
        """The terminal event, once every task of the run has ended and every event was delivered."""
        return await asyncio.shield(self._run.done)


class _Run:
    """The supervisor of one run (also the `Host` its agent sessions talk to)."""

    def __init__(
        self,
        team: TeamConfig,
        run_id: str,
        *,
        clock: Callable[[], float],
        store: RunStore | None,
        state: CoordinationState | None = None,
    ):
        self.team = team
        self.run_id = run_id
        self.emitter = Emitter(run_id, clock=clock, store=store, state=state or CoordinationState())
        self.done: asyncio.Future[Terminal] = asyncio.get_running_loop().create_future()
        self.main_task: asyncio.Task[None] | None = None
        self.tools: RunTools | None = None
        self.sessions: dict[str, AgentSession] = {}
        self._prices: dict[str, Price] = {}
        self._agent_tasks: dict[str, asyncio.Task[None]] = {}
        self._in_turn: set[str] = set()
        self._stop: tuple[Literal["cancel", "finish_now"], str | None] | None = None
        self._started = asyncio.Event()  # a task cancelled before its first step never enters `try`
        self._finishing = False
        self._applying: asyncio.Task[RunFinished] | None = None  # the apply-back step, while it runs
        self.requester: str | None = None
        self.conversation: ConversationRef | None = None
        self._timed_out = False
        self.owns_clients = False  # clients built here (not passed in) are closed here

    # ---- Host ----------------------------------------------------------------------------------

    @property
    def state(self) -> CoordinationState:
        return self.emitter.state

    def emit(self, event: RunEvent) -> RunEvent:
        return self.emitter.emit(event)

    def over_budget(self) -> bool:
        budget = self.team.orchestrator.budget_usd
        return budget is not None and self.state.cost_usd >= budget

    def record_usage(self, agent_id: str, usage: Usage) -> None:
        dollars = cost_usd(usage, self._prices[agent_id])
        view, state = self.state.agents[agent_id], self.state
        self.emit(
            UsageUpdated(
                agent_id=agent_id,
                input_tokens=view.input_tokens + usage.input_tokens,
                output_tokens=view.output_tokens + usage.output_tokens,
                cost_usd=view.cost_usd + dollars,
                run_input_tokens=state.input_tokens + usage.input_tokens,
                run_output_tokens=state.output_tokens + usage.output_tokens,
                run_cost_usd=state.cost_usd + dollars,
            )
        )

    # ---- lifecycle -----------------------------------------------------------------------------

    async def stop(self, how: Literal["cancel", "finish_now"], by: str | None) -> None:
        if self._stop is not None or self.done.done() or self.main_task is None:
            return
        self._stop = (how, by)
        await self._started.wait()
        if self._applying is not None:
            self._applying.cancel()
        elif not self._finishing:
            self.main_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self.done)

    async def main(self, models: ModelFactory, tools: RunToolsFactory | None, context: str | None) -> None:
        terminal: Terminal | None = None
        interrupted = False
        self._started.set()
        try:
            terminal, interrupted = await self._outcome(models, tools, context)
            if isinstance(terminal, RunFinished) and not interrupted:
                terminal = await self._apply_back(terminal)
        finally:
            await self._finish(terminal or RunFailed(reasons={"run": "ended without a result"}))
        if interrupted:
            raise asyncio.CancelledError

    async def _outcome(
        self, models: ModelFactory, tools: RunToolsFactory | None, context: str | None
    ) -> tuple[Terminal, bool]:
        """How the run ends, and whether it was cancelled by someone else than `stop()`."""
        try:
            async with asyncio.timeout(self.team.orchestrator.timeout_seconds):
                terminal = await self._run(models, tools, context)
            self._finishing = True  # from here on `stop()` interrupts the apply step, not this task
            return terminal, False
        except TimeoutError:
            self._finishing = True
            self._timed_out = True
            return await self._salvage("timeout"), False
        except asyncio.CancelledError:
            self._finishing = True
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            how, by = self._stop or ("cancel", None)
            terminal = RunCancelled(by=by) if how == "cancel" else await self._salvage("finish_now")
            return terminal, self._stop is None  # None: cancelled by someone else (e.g. loop shutdown)
        except Exception as exc:  # a bug must still end the run visibly, never hang it
            log.exception("run %s crashed", self.run_id)
            return RunFailed(reasons={"run": f"internal error: {exc!r}"}), False

    async def _apply_back(self, finished: RunFinished) -> Terminal:
        """Apply the winner's patch in a task of its own, so `cancel()`/`finish_now()` can stop the wait."""
        if not wants_apply(self.team, finished):
            return finished
        if self._stopping():  # stopped while the answer was written: nobody is asked any more
            return self._stopped_apply(finished)
        self._applying = asyncio.create_task(apply_back(self, finished), name=f"{self.run_id}/apply")
        try:
            return await self._applying
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self._stopping() or (current is not None and current.cancelling()):
                raise  # cancelled from outside (loop shutdown), not by `stop()`
            return self._stopped_apply(finished)
        finally:
            self._applying = None

    def _stopping(self) -> bool:
        """Whether `cancel()`/`finish_now()` was called (a method: it changes across awaits)."""
        return self._stop is not None

    def _stopped_apply(self, finished: RunFinished) -> Terminal:
        how, by = self._stop or ("cancel", None)
        if how == "cancel":
            return RunCancelled(by=by)
        who = f" by {by}" if by else ""
        return replace(finished, applied=False, apply_reason=f"not applied: the run was finished early{who}")

    async def _finish(self, terminal: Terminal) -> None:
        self._finishing = True
        await self._stop_agents()
        if self.tools is not None:
            try:
                await self.tools.close(self._ending(terminal))
            except Exception:
                log.exception("run %s: closing tools failed", self.run_id)
        if self.owns_clients:
            await self._close_clients()
        stamped = self.emit(terminal)
        await self.emitter.close()
        assert isinstance(stamped, RunFinished | RunFailed | RunCancelled)
        self.done.set_result(stamped)

    def _ending(self, terminal: Terminal) -> str:
        """Why the run ended, as its still-pending approvals are told (they are cancelled)."""
        how, by = self._stop or (None, None)
        who = f" by {by}" if by else ""
        if how == "cancel" or (how is None and isinstance(terminal, RunCancelled)):
            return f"the run was cancelled{who}"
        if how == "finish_now":
            return f"the run was finished early{who}"
        if self._timed_out:
            return "the run timed out"
        return "the run failed" if isinstance(terminal, RunFailed) else "the run ended"

    async def _close_clients(self) -> None:
        for session in self.sessions.values():
            try:
                await session.client.close()
            except Exception:
                log.exception("run %s: closing the model client of %s failed", self.run_id, session.agent_id)

    async def _run(
        self, models: ModelFactory, tools: RunToolsFactory | None, context: str | None
    ) -> Terminal:
        if tools is not None:
            ctx = RunContext(
                run_id=self.run_id,
                team=self.team,
                agent_ids=tuple(a.id for a in self.team.agents),
                requester=self.requester,
                emit=self.emitter.emit_async,
                conversation=self.conversation,
            )
            self.tools = await tools(ctx)
        self._start_agents(models, context)
        outcome = await self._coordinate()
        if outcome == "all_failed":
            return RunFailed(reasons={v.agent_id: v.failed or "" for v in self.state.agents.values()})
        if outcome != "converged":
            return await self._salvage(outcome)
        await self._stop_agents()
        return await self._conclude()

    def _start_agents(self, models: ModelFactory, context: str | None) -> None:
        table = self.team.price_table()
        for agent in self.team.agents:
            local = agent.backend.preset in LOCAL_PRESETS
            self._prices[agent.id] = resolve_price(agent.backend.model, table, local=local)[0]
            try:
                client = models(agent)
            except Exception as exc:  # a missing key or bad URL drops this agent only
                self.emit(AgentFailed(agent_id=agent.id, reason=f"cannot create model client: {exc}"))
                continue
            toolbox = self.tools.for_agent(agent.id) if self.tools is not None else None
            self.sessions[agent.id] = AgentSession(self, agent, client, toolbox, context=context)
        for agent_id, session in self.sessions.items():
            self._agent_tasks[agent_id] = asyncio.create_task(
                self._agent_loop(session), name=f"{self.run_id}/{agent_id}"
            )

    async def _agent_loop(self, session: AgentSession) -> None:
        agent_id, max_rounds = session.agent_id, self.team.orchestrator.max_rounds
        while True:
            while not self.state.may_start_turn(agent_id, max_rounds):
                if self.state.phase != "coordinating" or not self.state.agents[agent_id].live:
                    return
                await self.emitter.changed()
            self._in_turn.add(agent_id)
            try:
                await session.coordination_turn()
            except BudgetReached:
                return
            except AgentDropped as exc:
                self.emit(AgentFailed(agent_id=agent_id, reason=str(exc)))
                return
            except Exception as exc:  # provider failure after retries, or a bug: drop this agent only
                log.warning("run %s: agent %s failed: %r", self.run_id, agent_id, exc)
                self.emit(AgentFailed(agent_id=agent_id, reason=_reason(exc)))
                return
            finally:
                self._in_turn.discard(agent_id)

    async def _coordinate(self) -> str:
        """Wait until the run can end: converged, all_failed, budget, or max_rounds (nobody can move)."""
        max_rounds = self.team.orchestrator.max_rounds
        while True:
            state = self.state
            if state.converged:
                return "converged"
            if not state.live:
                return "all_failed"
            if self.over_budget():
                return "budget"
            if not self._in_turn and not any(
                state.may_start_turn(v.agent_id, max_rounds) for v in state.live
            ):
                return "max_rounds"
            await self.emitter.changed()

    async def _stop_agents(self) -> None:
        tasks = [t for t in self._agent_tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._in_turn.clear()

    async def _conclude(self) -> Terminal:
        return await conclude(self)

    async def _salvage(self, why: str) -> Terminal:
        await self._stop_agents()
        return await salvage(self, why)


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    return f"{name}: {exc}" if str(exc) else name
