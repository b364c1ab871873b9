"""The runner: one supervisor task per run, one task per agent, all owned and drained by the run.

`launch.start_run` emits `RunStarted`, builds the tools and hands the run to its `Supervisor`, which
waits on the coordination state (a fold over the events, see `coordination.py`) until the agents
converge, all fail, get stuck at `max_rounds`, or the spend cap is reached; then it stops every
agent task and finishes: a presentation by the winner, or a salvage without any model call. With
`workspace.apply: ask` the winner's patch is then applied to the source through the permission gate
(usually an ask: the run parks until an approver decides). An ask anywhere ends its task
(`ToolParked`); once nothing can go on without a human the run parks (`Parked`). Run timeout,
`cancel()` and `finish_now()` interrupt it at any point; nothing keeps running afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from approvals import ConversationRef, StoreError
from orchestrator.config.cost import Price, cost_usd, resolve_price
from orchestrator.config.team import AgentConfig, TeamConfig
from orchestrator.errors import (
    RunFenced,
    RunStoreError,
    RunStoreUnavailable,
    ToolParked,
)
from orchestrator.events import (
    AgentFailed,
    AgentStatus,
    RunCancelled,
    RunConcluded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    UsageUpdated,
)
from orchestrator.llm.base import Usage
from orchestrator.ports import ModelClient, RunContext, RunStore, RunTools, RunToolsFactory
from orchestrator.run.agent import AgentDropped, AgentSession, BudgetReached
from orchestrator.run.checkpoint import Restored
from orchestrator.run.coordination import CoordinationState
from orchestrator.run.emitter import Emitter
from orchestrator.run.final import apply_back, conclude, salvage, wants_apply

Terminal = RunFinished | RunFailed | RunCancelled


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    """A run that cannot progress without a human: every task ended; resume it by id."""

    run_id: str
    waiting: tuple[str, ...]  # the approval request ids it waits on


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspended(Parked):
    """A run that stopped because its store could not take its events (fail-stop), not for a human.

    Every task ended, nothing unstored was shown; resume it by id once the store is back (after
    `retry_after` seconds): it goes on from what was stored.
    """

    reason: str = ""
    retry_after: float = 1.0
    fenced: bool = False  # another driver stored this run's events: this one must not resume it


RunOutcome = Terminal | Parked


ModelFactory = Callable[[AgentConfig], ModelClient]
log = logging.getLogger(__name__)


class Supervisor:
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
        self.emitter = Emitter(
            run_id,
            clock=clock,
            store=store,
            state=state or CoordinationState(),
            retry_for=team.orchestrator.timeout_seconds,
            on_lost=self._store_lost,
        )
        self.done: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()
        self.restored = Restored()
        self.resumed = False
        self.context: str | None = None
        self.preset_stop: tuple[Literal["cancel", "finish_now"], str | None] | None = None
        self._parked: dict[str, str] = {}  # agent id -> the request its call is parked on
        self._segment_start = time.monotonic()
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
        """The coordination state as folded so far."""
        return self.emitter.state

    def emit(self, event: RunEvent) -> RunEvent:
        """Stamp and publish `event`; returns it stamped."""
        return self.emitter.emit(event)

    async def checkpoint(self, event: RunEvent) -> None:
        """Emit `event` and return once it is stored."""
        await self.emitter.checkpoint(event)

    def _store_lost(self, exc: BaseException) -> None:
        """The store is gone for longer than the run may wait: stop every task, suspend the run."""
        log.error("run %s: suspending, its events cannot be stored: %r", self.run_id, exc)
        if self.main_task is not None and not self._finishing:
            self.main_task.cancel()

    def over_budget(self) -> bool:
        """Whether the run's spend reached its cap."""
        budget = self.team.orchestrator.budget_usd
        return budget is not None and self.state.cost_usd >= budget

    def record_usage(self, agent_id: str, usage: Usage) -> None:
        """Price one model call's usage and add it to the agent's and the run's totals."""
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
        """Cancel or finish now: interrupt whatever runs and return once the run ended."""
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
        """The run's task: to its outcome, then the apply step, then finish or park."""
        outcome: RunOutcome | None = None
        interrupted = False
        self._started.set()
        try:
            if self.emitter.store_error is None:  # else its start is not stored: it suspends at once
                outcome, interrupted = await self._outcome(models, tools, context)
            if isinstance(outcome, RunFinished) and not interrupted:
                with contextlib.suppress(RunStoreUnavailable):  # it suspends below
                    outcome = await self._apply_back(outcome)
        finally:
            if self.emitter.store_error is not None:
                await self._park(self._suspended())
            elif isinstance(outcome, Parked):
                await self._park(outcome)
            else:
                await self._finish(outcome or RunFailed(reasons={"run": "ended without a result"}))
        if interrupted:
            raise asyncio.CancelledError

    async def _park(self, parked: Parked) -> None:
        """Every task ends; the workspaces and the pending asks stay for the resume (`Suspended` too)."""
        self._finishing = True
        await self._stop_agents()
        if self.tools is not None:
            try:
                await self.tools.park()
            except Exception:
                log.exception("run %s: parking the tools failed", self.run_id)
        if self.owns_clients:
            await self._close_clients()
        if not isinstance(parked, Suspended):
            self.emit(RunParked(waiting=parked.waiting, worked_seconds=self._worked()))
        await self.emitter.close()
        self.done.set_result(parked if self.emitter.store_error is None else self._suspended())

    def _suspended(self, cause: BaseException | None = None) -> Suspended:
        error = self.emitter.store_error or cause
        return Suspended(
            run_id=self.run_id, waiting=(), reason=repr(error), fenced=isinstance(error, RunFenced)
        )

    def _worked(self) -> float:
        return time.monotonic() - self._segment_start

    def _parked_outcome(self, *extra: str) -> Parked:
        waiting = tuple(dict.fromkeys([*self._parked.values(), *extra]))
        return Parked(run_id=self.run_id, waiting=waiting)

    async def _outcome(
        self, models: ModelFactory, tools: RunToolsFactory | None, context: str | None
    ) -> tuple[RunOutcome, bool]:
        """How the run ends (or parks), and whether it was cancelled by someone else than `stop()`."""
        # Working time only: parked time is bounded by the approvals' expiry instead.
        remaining = self.team.orchestrator.timeout_seconds - self.restored.worked_seconds
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                terminal = await self._run(models, tools, context)
            self._finishing = True  # from here on `stop()` interrupts the apply step, not this task
            return terminal, False
        except ToolParked as parked:  # the presentation waits for a human
            self._finishing = True
            return self._parked_outcome(parked.request_id), False
        except TimeoutError:
            self._finishing = True
            self._timed_out = True
            return await self._salvage("timeout"), False
        except asyncio.CancelledError:
            self._finishing = True
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            if self.emitter.store_error is not None:
                return self._suspended(), False
            how, by = self._stop or ("cancel", None)
            terminal = RunCancelled(by=by) if how == "cancel" else await self._salvage("finish_now", by)
            return terminal, self._stop is None  # None: cancelled by someone else (e.g. loop shutdown)
        except RunStoreUnavailable:
            self._finishing = True
            return self._suspended(), False
        except (StoreError, RunStoreError) as exc:  # a database away (e.g. while building the tools)
            # Fail-stop, not failed: the run goes on from what was stored once the database is back.
            self._finishing = True
            log.warning("run %s: its database is unavailable (%r); the run suspends", self.run_id, exc)
            return self._suspended(exc), False
        except Exception as exc:  # a bug must still end the run visibly, never hang it
            log.exception("run %s crashed", self.run_id)
            return RunFailed(reasons={"run": f"internal error: {exc!r}"}), False

    async def _apply_back(self, finished: RunFinished) -> RunOutcome:
        """Apply the winner's patch in a task of its own, so `cancel()`/`finish_now()` can stop the wait."""
        if not wants_apply(self.team, finished):
            return finished
        if self._stopping():  # stopped while the answer was written: nobody is asked any more
            return self._stopped_apply(finished)
        if self.restored.concluded is None:  # a resumed run goes straight back to this step
            await self.checkpoint(RunConcluded(result=finished))
        awaiting = self.restored.apply_awaiting
        self._applying = asyncio.create_task(
            apply_back(self, finished, awaiting), name=f"{self.run_id}/apply"
        )
        try:
            return await self._applying
        except ToolParked as parked:
            return self._parked_outcome(parked.request_id)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self._stopping() or (current is not None and current.cancelling()):
                raise  # cancelled from outside (loop shutdown), not by `stop()`
            return self._stopped_apply(finished)
        finally:
            self._applying = None

    def _stopping(self) -> bool:
        """Whether `cancel()`/`finish_now()` was called (a method: it changes across awaits)."""
        return self._stop is not None or self.preset_stop is not None

    def _stopped_apply(self, finished: RunFinished) -> Terminal:
        how, by = self._stop or self.preset_stop or ("cancel", None)
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
        if self.emitter.store_error is not None:  # its end is not stored: nobody may hear of it
            self.done.set_result(self._suspended())
            return
        assert isinstance(stamped, RunFinished | RunFailed | RunCancelled)
        self.done.set_result(stamped)

    def _ending(self, terminal: Terminal) -> str:
        """Why the run ended, as its still-pending approvals are told (they are cancelled)."""
        how, by = self._stop or self.preset_stop or (None, None)
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

    async def _preset_stop(self, stop: tuple[Literal["cancel", "finish_now"], str | None]) -> Terminal:
        how, by = stop
        if how == "cancel":
            return RunCancelled(by=by)
        if self.restored.concluded is not None:
            return self._stopped_apply(self.restored.concluded)
        return await salvage(self, "finish_now")

    async def _run(
        self, models: ModelFactory, tools: RunToolsFactory | None, context: str | None
    ) -> RunOutcome:
        if tools is not None:
            ctx = RunContext(
                run_id=self.run_id,
                team=self.team,
                agent_ids=tuple(a.id for a in self.team.agents),
                requester=self.requester,
                emit=self.emitter.emit_async,
                conversation=self.conversation,
                resumed=self.resumed,
                checkpoint=self.emitter.checkpoint,
                grants=tuple(self.restored.grants),
                task=self.state.task,
            )
            self.tools = await tools(ctx)
        if self.preset_stop is not None:  # ending a parked run: no agent runs again
            return await self._preset_stop(self.preset_stop)
        if self.restored.concluded is not None:  # parked in the apply-back step: straight back to it
            return self.restored.concluded
        self._start_agents(models, context)
        outcome = await self._coordinate()
        if outcome == "parked":
            return self._parked_outcome()
        if outcome == "all_failed":
            return RunFailed(reasons={v.agent_id: v.failed or "" for v in self.state.agents.values()})
        if outcome != "converged":
            return await self._salvage(outcome)
        await self._stop_agents()
        return await self._conclude()

    def _start_agents(self, models: ModelFactory, context: str | None) -> None:
        table = self.team.price_table()
        for agent in self.team.agents:
            local = agent.backend.runs_locally
            self._prices[agent.id] = resolve_price(agent.backend.model, table, local=local)[0]
            try:
                client = models(agent)
            except Exception as exc:  # a missing key or bad URL drops this agent only
                self.emit(AgentFailed(agent_id=agent.id, reason=f"cannot create model client: {exc}"))
                continue
            toolbox = self.tools.for_agent(agent.id) if self.tools is not None else None
            session = AgentSession(self, agent, client, toolbox, context=context)
            session.restore(self.restored)
            self.sessions[agent.id] = session
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
            except ToolParked as parked:  # this agent's task ends until a decision
                self._parked[agent_id] = parked.request_id
                self._in_turn.discard(agent_id)  # before the event that wakes the coordinator
                self.emitter.emit(AgentStatus(agent_id=agent_id, status="awaiting_approval"))
                return
            except (BudgetReached, RunStoreUnavailable):  # the latter: the run suspends
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
            movable = [v for v in state.live if v.agent_id not in self._parked]
            if not self._in_turn and not any(state.may_start_turn(v.agent_id, max_rounds) for v in movable):
                return "parked" if self._parked else "max_rounds"
            await self.emitter.changed()

    async def _stop_agents(self) -> None:
        tasks = [t for t in self._agent_tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._in_turn.clear()

    async def _conclude(self) -> Terminal:
        return await conclude(self)

    async def _salvage(self, why: str, by: str | None = None) -> Terminal:
        await self._stop_agents()
        terminal = await salvage(self, why)
        if by is not None and isinstance(terminal, RunFinished):
            terminal = replace(terminal, stopped_by=by)  # "finished early by <who>"
        return terminal


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    return f"{name}: {exc}" if str(exc) else name
