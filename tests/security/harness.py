"""Run catalogue entries through the product's own tool path in a canary world and record the harm.

Coupled only to public entry points: `orchestrator.tools.build_run_tools` (workspaces, gate,
sandbox, toolbox), an agent's `call`, `winner_patch` and `apply_patch` (the final phase's
apply-back), and `approvals.ApprovalService` as the approver's side. The default `human` policy
judges every call; what it allows runs, and for careless-approver entries every ask is approved.
"""

from __future__ import annotations

import asyncio
import json
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from approvals import ApprovalRequested, ApprovalService, Principal
from approvals.events import ApprovalEvent
from approvals.testing import InMemoryApprovalStore, InMemoryAuditLog
from orchestrator.config.team import TeamConfig
from orchestrator.errors import ToolParked
from orchestrator.events import RunEvent, ToolDecided
from orchestrator.llm.base import ToolCall
from orchestrator.ports import RunContext, ToolOutcome, ToolPhase
from orchestrator.tools import WorkspaceRunTools, build_run_tools
from tests.security.world import World

CATALOGUES = Path(__file__).parent / "catalogues"
AGENTS = ("alpha", "beta")
APPROVER = Principal(id="U_APPROVER")
PUSH = "git push -q origin HEAD:main"
COMMIT_PUSH = "git add -A && git -c user.name=a -c user.email=a@a commit -qm work; " + PUSH
_TOOLS = {"run": "run_command", "write": "write_file", "read": "read_file", "fetch": "fetch_url"}
_TOOLS |= {"list": "list_files", "search": "search_files"}
_REACHED = "BOMB-REACHED"  # printed by a bounded bomb that got past its threshold: nothing stopped it
_ENTRY_TIMEOUT_S = 90.0
# A malformed argument must be refused with a reason; these in a result mean it raised instead.
_RAISED = ("ValueError", "UnicodeEncodeError", "UnicodeDecodeError", "TypeError")


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call an agent makes (arguments with `@PLACEHOLDERS@`), in a phase."""

    tool: str
    arguments: dict[str, Any]
    phase: ToolPhase = "coordination"


@dataclass(frozen=True, slots=True)
class Entry:
    """A catalogue entry: its calls, whether the approver approves everything, and the final phase."""

    id: str
    cls: str
    note: str
    steps: tuple[Step, ...]
    careless: bool = False
    final: tuple[str, ...] = ()  # "push", "commit-push", "apply" (apply also runs its triggers)
    serial: bool = False  # heavy (bombs): run alone


@dataclass
class CallRecord:
    tool: str
    phase: str
    summary: str
    decision: str  # allow | ask | deny | deferred
    approved: bool | None
    executed: bool
    output: str


@dataclass
class Result:
    id: str
    cls: str
    careless: bool
    calls: list[CallRecord] = field(default_factory=list)
    harms: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def load_catalogues(directory: Path = CATALOGUES) -> list[Entry]:
    """Every entry of every `*.toml` catalogue, ids unique."""
    entries: list[Entry] = []
    for path in sorted(directory.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for raw in data["attack"]:
            steps = tuple(_step(s) for s in raw["steps"])
            entries.append(
                Entry(
                    id=raw["id"],
                    cls=raw["class"],
                    note=raw.get("note", ""),
                    steps=steps,
                    careless=raw.get("careless", False),
                    final=tuple(raw.get("final", ())),
                    serial=raw.get("serial", False),
                )
            )
    ids = [e.id for e in entries]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate catalogue ids: {duplicates}")
    return entries


def _step(raw: dict[str, Any]) -> Step:
    phase = raw.get("phase", "coordination")
    keys = [k for k in raw if k in _TOOLS]
    if len(keys) != 1:
        raise ValueError(f"a step names exactly one tool: {raw}")
    key = keys[0]
    value = raw[key]
    match key:
        case "run":
            args: dict[str, Any] = {"command": value}
        case "write":
            args = {"path": value, "content": raw["content"]}
        case "read" | "list":
            args = {"path": value}
        case "fetch":
            args = {"url": value}
        case _:  # search
            args = {"pattern": value, "path": raw.get("path", ".")}
    return Step(tool=_TOOLS[key], arguments=args, phase=phase)


def _fill(value: Any, subs: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, real in subs.items():
            value = value.replace(name, real)
        return value
    return value


class _Approver:
    """The approver's side: approves every ask when careless or when the final phase expects one."""

    def __init__(self, service: ApprovalService, careless: bool) -> None:
        self.service = service
        self.careless = careless
        self.expecting = False
        self.asked: list[str] = []
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._unsubscribe = service.subscribe(self._on_event)
        self._task = asyncio.create_task(self._answer())

    def _on_event(self, event: ApprovalEvent) -> None:
        if isinstance(event, ApprovalRequested):
            self.asked.append(event.request.id)
            self._queue.put_nowait(event.request.id)

    async def _answer(self) -> None:
        while True:
            request_id = await self._queue.get()
            approve = self.careless or self.expecting
            reason = None if approve else "not approved"
            try:
                await self.service.decide(request_id, APPROVER, approve=approve, reason=reason)
            except Exception:  # already decided or expired: nothing to answer
                continue

    async def close(self) -> None:
        self._unsubscribe()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _team(world: World) -> TeamConfig:
    return TeamConfig.model_validate(
        {
            "agents": [{"id": a, "backend": {"type": "openai", "model": "gpt-test"}} for a in AGENTS],
            "approvals": {"approvers": [APPROVER.id], "timeout_seconds": 30},
            "workspace": {"source": world.src, "apply": "ask"},
            "sandbox": "bwrap",
            "tools": {"command_timeout_seconds": 15, "output_limit_bytes": 16384},
        }
    )


class _Run:
    """One run's tools in the world, with the events it emitted."""

    def __init__(self, world: World, service: ApprovalService, run_id: str) -> None:
        self.world = world
        self.service = service
        self.run_id = run_id
        self.events: list[RunEvent] = []
        self.tools: WorkspaceRunTools | None = None

    async def emit(self, event: RunEvent) -> None:
        self.events.append(event)

    async def open(self) -> WorkspaceRunTools:
        ctx = RunContext(
            run_id=self.run_id,
            team=_team(self.world),
            agent_ids=AGENTS,
            requester="U_REQUESTER",
            emit=self.emit,
        )
        self.tools = await build_run_tools(
            ctx, approvals=self.service, root=self.world.ws, hide=self.world.hidden()
        )
        return self.tools


async def _resumed(
    service: ApprovalService, call: Callable[[str | None], Awaitable[ToolOutcome]]
) -> ToolOutcome:
    """A call as the run drives it: an ask parks it; once the approver decides, it resumes."""
    awaiting: str | None = None
    for _ in range(8):
        try:
            return await call(awaiting)
        except ToolParked as parked:
            awaiting = parked.request_id
            await asyncio.wait_for(service.wait(awaiting), timeout=60)
    raise AssertionError("a call parked more than eight times")


async def _call(
    run: _Run, approver: _Approver, result: Result, step: Step, subs: dict[str, str], index: int
) -> str:
    assert run.tools is not None
    arguments = {k: _fill(v, subs) for k, v in step.arguments.items()}
    asked_before = len(approver.asked)
    events_before = len(run.events)
    call = ToolCall(id=f"{run.run_id}-c{index}", name=step.tool, arguments=arguments)
    run.world.doing = f"{run.run_id} {step.phase} {step.tool} #{index}"
    agent = run.tools.for_agent("alpha")
    outcome = await _resumed(
        run.service, lambda awaiting: agent.call(call, phase=step.phase, awaiting=awaiting)
    )
    decided = [e for e in run.events[events_before:] if isinstance(e, ToolDecided)]
    executed = bool(decided and decided[-1].executed)
    asked = len(approver.asked) > asked_before
    if asked:
        decision = "ask"
    elif outcome.content.lower().startswith("deferred"):
        decision = "deferred"
    else:
        decision = "allow" if executed else "deny"
    summary = json.dumps(step.arguments, ensure_ascii=False)[:300]
    result.calls.append(
        CallRecord(
            tool=step.tool,
            phase=step.phase,
            summary=summary,
            decision=decision,
            approved=executed if asked else None,
            executed=executed,
            output=outcome.content[-400:],
        )
    )
    if any(f"failed: {name}" in outcome.content for name in _RAISED):
        raised = outcome.content[:120]
        result.harms.append(f"{step.tool} #{index} raised inside the toolbox instead of refusing: {raised}")
    await _check_processes(run.world, result, f"{step.tool} #{index}")
    return outcome.content


async def _check_processes(world: World, result: Result, where: str) -> None:
    """A marker process still alive shortly after the call returned is a process left behind."""
    left: list[int] = []
    for _ in range(5):
        left = world.marker_processes()
        if not left:
            return
        await asyncio.sleep(0.2)
    result.harms.append(f"process left alive after {where}: {len(left)} marker process(es)")
    world.kill_markers()


async def run_entry(entry: Entry, template: World | None = None) -> Result:
    """Execute `entry` in a fresh world (a copy of `template`); the result lists every harm seen."""
    result = Result(id=entry.id, cls=entry.cls, careless=entry.careless)
    started = time.monotonic()
    world = await World.create(template)
    try:
        async with asyncio.timeout(_ENTRY_TIMEOUT_S):
            await _execute(entry, world, result)
    except Exception as exc:  # a harness failure is reported, never silently passed
        result.error = f"{type(exc).__name__}: {exc}"
        result.harms.append(f"harness error (counted as harm, fail closed): {result.error}")
    finally:
        await world.close()
        result.seconds = round(time.monotonic() - started, 2)
    return result


async def _execute(entry: Entry, world: World, result: Result) -> None:
    service = ApprovalService(InMemoryApprovalStore(), InMemoryAuditLog(), poll_interval=0.01)
    approver = _Approver(service, entry.careless)
    runs: list[_Run] = []
    texts: list[str] = []
    try:
        run = _Run(world, service, "run1")
        runs.append(run)
        tools = await run.open()
        subs = world.substitutions() | {
            "@WS@": str(tools.workspace("alpha")),
            "@PEER@": str(tools.workspace("beta")),
        }
        peer = World.snapshot(tools.workspace("beta"))
        for index, step in enumerate(entry.steps):
            texts.append(await _call(run, approver, result, step, subs, index))
        result.harms += [f"peer workspace {c}" for c in World.compare(peer, tools.workspace("beta"))]
        result.harms += [f"source {c} (not through apply-back)" for c in world.source_changes()]
        pushed = await _final(entry, world, runs, approver, result, texts)
        if not pushed:
            result.harms += [f"remote {c} (no push was approved)" for c in world.remote_changes()]
        else:
            texts.append(world.remote_text())
    finally:
        for one in runs:
            if one.tools is not None:
                await one.tools.close("attack entry done")
        await approver.close()
    _judge(world, result, texts, runs)


async def _final(
    entry: Entry, world: World, runs: list[_Run], approver: _Approver, result: Result, texts: list[str]
) -> bool:
    """The final phase the entry names (approved, as a careful approver would); True if a push ran."""
    pushed = False
    run = runs[0]
    subs = world.substitutions()
    approver.expecting = True
    try:
        for what in entry.final:
            if what in ("push", "commit-push"):
                command = PUSH if what == "push" else COMMIT_PUSH
                step = Step(tool="run_command", arguments={"command": command}, phase="final")
                texts.append(await _call(run, approver, result, step, subs, 100))
                pushed = True
            elif what == "apply":
                pushed |= await _apply_and_trigger(world, runs, approver, result, texts)
            else:
                raise ValueError(f"unknown final step {what!r}")
    finally:
        approver.expecting = False
    return pushed


async def _apply_and_trigger(
    world: World, runs: list[_Run], approver: _Approver, result: Result, texts: list[str]
) -> bool:
    """Apply-back (approved), then what runs the applied files later: a next run's push, a developer's git."""
    tools = runs[0].tools
    assert tools is not None
    patch = await tools.winner_patch("alpha")
    if not patch:
        return False
    texts.append(patch)  # the patch is posted to the thread
    asked_before = len(approver.asked)
    world.doing = "apply-back"
    outcome = await _resumed(
        runs[0].service, lambda awaiting: tools.apply_patch("alpha", patch, awaiting=awaiting)
    )
    result.calls.append(
        CallRecord(
            tool="apply_patch",
            phase="final",
            summary=f"{len(patch)} bytes",
            decision="ask" if len(approver.asked) > asked_before else "allow",
            approved=not outcome.is_error,
            executed=not outcome.is_error,
            output=outcome.content[-400:],
        )
    )
    if outcome.is_error:
        return False
    # The next run copies the source again: its approved commit + push.
    nxt = _Run(world, runs[0].service, "run2")
    runs.append(nxt)
    await nxt.open()
    step = Step(tool="run_command", arguments={"command": COMMIT_PUSH}, phase="final")
    texts.append(await _call(nxt, approver, result, step, world.substitutions(), 200))
    # A developer's ordinary git in the source, on the host.
    world.doing = "host git in the source after apply-back"
    developer = (
        ("status", "--short"),
        ("add", "-A"),
        ("commit", "-qm", "applied"),
        ("push", "-q", "origin", "main"),
    )
    for args in developer:
        done = await asyncio.to_thread(world.host_git, *args)
        texts.append(done.stdout + done.stderr)
    return True


def _judge(world: World, result: Result, texts: Iterable[str], runs: list[_Run]) -> None:
    result.harms += [f"outside file {c}" for c in world.outside_changes()]
    seen = list(texts)
    for run in runs:
        seen += [e.result_preview for e in run.events if isinstance(e, ToolDecided)]
    for contact in world.contacts:
        result.harms.append(f"closed service contacted: {contact.service} during {contact.during}")
        seen.append(contact.data.decode(errors="replace"))
    blob = "\n".join(seen)
    result.harms += [f"secret leaked: {kind}" for kind in world.leaked(blob)]
    if _REACHED in blob:
        result.harms.append("bomb not contained: passed its threshold")
    if result.cls == "bomb" and any("[timed out after" in c.output for c in result.calls):
        result.harms.append("bomb bounded only by the command timeout")
    result.harms = list(dict.fromkeys(result.harms))


async def run_all(entries: list[Entry], parallel: int = 4) -> list[Result]:
    """Every entry, `parallel` at a time; the heavy (`serial`) ones one at a time among them."""
    gate = asyncio.Semaphore(parallel)
    template = await asyncio.to_thread(World.template)

    async def one(entry: Entry) -> Result:
        async with gate:
            return await run_entry(entry, template)

    heavy = asyncio.Semaphore(1)

    async def alone(entry: Entry) -> Result:
        async with heavy:
            return await one(entry)

    try:
        first = sorted(entries, key=lambda e: not e.serial)  # the slow ones start early
        results = list(await asyncio.gather(*(alone(e) if e.serial else one(e) for e in first)))
    finally:
        await asyncio.to_thread(template.discard)
    order = {e.id: i for i, e in enumerate(entries)}
    return sorted(results, key=lambda r: order[r.id])


def summary(results: list[Result]) -> dict[str, Any]:
    """Counts by decision and harm, with entry ids, by class."""
    calls = [c for r in results for c in r.calls if c.phase == "coordination"]
    by_decision = {d: sum(1 for c in calls if c.decision == d) for d in ("allow", "ask", "deny", "deferred")}
    harmful = [r for r in results if r.harms]
    classes: dict[str, list[str]] = {}
    for r in harmful:
        classes.setdefault(r.cls, []).append(r.id)
    return {
        "entries": len(results),
        "calls": len(calls),
        "decisions": by_decision,
        "entries_with_an_allowed_call": sorted(
            r.id for r in results if any(c.decision == "allow" for c in r.calls)
        ),
        "careless_entries": sum(1 for r in results if r.careless),
        "harmful": len(harmful),
        # Harm with only the gate's allows (and the final phase's own push/apply approved): no careless ask.
        "harmful_careful": sorted(r.id for r in harmful if not r.careless),
        "harmful_careless": sorted(r.id for r in harmful if r.careless),
        "harmful_by_class": {k: sorted(v) for k, v in sorted(classes.items())},
        "harms": {r.id: r.harms for r in harmful},
    }


def table(results: list[Result]) -> str:
    """A plain-text table: one line per entry (decisions of its calls, harms)."""
    lines = [f"{'entry':38} {'class':16} {'calls':24} harm"]
    for r in results:
        calls = ",".join(c.decision[:2] + ("+" if c.approved else "") for c in r.calls)
        harm = "; ".join(r.harms)[:160] if r.harms else "-"
        lines.append(f"{r.id[:38]:38} {r.cls[:16]:16} {calls[:24]:24} {harm}")
    s = summary(results)
    lines.append("")
    lines.append(
        f"{s['entries']} entries, {s['calls']} coordination calls: "
        + ", ".join(f"{k} {v}" for k, v in s["decisions"].items())
        + f"; careless-approver entries {s['careless_entries']}; HARMFUL {s['harmful']}"
        + f" ({len(s['harmful_careful'])} with a careful approver, {len(s['harmful_careless'])} careless)"
    )
    for cls, ids in s["harmful_by_class"].items():
        lines.append(f"  {cls}: {len(ids)}: {', '.join(ids)}")
    return "\n".join(lines)
