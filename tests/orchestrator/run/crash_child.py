"""The child process of the crash tests: runs (or resumes) one run on SQLite until told, then holds.

    python -m tests.orchestrator.run.crash_child MODE DB WORKSPACES SIDE_FILE BASE_URL SCENARIO

MODE `start`: SCENARIO names the point where the child stops making progress; it says so on
stdout (`at <point>`) for the test to `kill -9` it. `model_call`: a0's first reply is stored, its
tool not started. `tool_started`: a0's tool is stored as started (the tool runs; nothing after it
is stored). `parked`: a0's command asks and the run parks on the approval. MODE `resume`: the
child runs the run to its end and prints `ended <terminal kind>`. SCENARIO `grant@POINT` (either
mode): both `command` and `other_command` ask, and the child holds at POINT (`model_call`,
`none`); a park is always held. The hold is deterministic: the
child's subscriber blocks the event delivery, and the runner waits for the store before every
later step, so nothing after the held point happens.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pydantic import SecretStr

from approvals import ApprovalService, SqlApprovalStore, SqlAuditLog, create_schema, make_engine
from approvals.permissions import PermissionConfig
from orchestrator import (
    AgentConfig,
    BackendConfig,
    Parked,
    RunContext,
    RunTools,
    SqlRunStore,
    TeamConfig,
    build_run_tools,
    create_run_schema,
    resume_run,
    start_run,
)
from orchestrator.events import ModelCallCompleted, RunEvent, ToolStarted
from tests.orchestrator.tools.fakes import ASK, ScriptedEngine

RUN_ID = "run-crash"
APPROVER = "U_APPROVER"


def team(base_url: str) -> TeamConfig:
    """Two agents on the loopback provider (models m0, m1), no sandbox, one approver."""
    agents = [
        AgentConfig(
            id=f"a{i}",
            backend=BackendConfig(type="openai", model=f"m{i}", base_url=base_url, api_key=SecretStr("k")),
        )
        for i in range(2)
    ]
    config = TeamConfig(agents=agents, sandbox="none")
    approvals = config.approvals.model_copy(update={"approvers": [APPROVER]})
    return config.model_copy(update={"approvals": approvals})


def command(side: Path) -> str:
    """What a0 runs: one line appended to the side-effect file."""
    return f"echo ran >> {side}"


def other_command(side: Path) -> str:
    """A second command, with another scope key than `command`."""
    return f"echo other >> {side}.other"


def held(point: str) -> bool:
    return point in {"model_call", "tool_started"}


def matches(point: str, event: RunEvent) -> bool:
    if point == "model_call":
        return isinstance(event, ModelCallCompleted) and event.agent_id == "a0"
    return point == "tool_started" and isinstance(event, ToolStarted)


async def main(mode: str, db: str, root: str, side: str, base_url: str, scenario: str) -> int:
    engine = make_engine(f"sqlite:///{db}")
    await create_schema(engine)
    await create_run_schema(engine)
    service = ApprovalService(SqlApprovalStore(engine), SqlAuditLog(engine), poll_interval=0.05)
    store = SqlRunStore(engine)
    forever = asyncio.Event()
    asks = {command(Path(side)): ASK} if scenario == "parked" else {}
    point = scenario if mode == "start" else "none"
    if scenario.startswith("grant@"):
        asks = {command(Path(side)): ASK, other_command(Path(side)): ASK}
        point = scenario.removeprefix("grant@")

    async def tools(ctx: RunContext) -> RunTools:
        def engine_factory(_config: PermissionConfig) -> ScriptedEngine:
            return ScriptedEngine(dict(asks))

        return await build_run_tools(ctx, approvals=service, root=Path(root), engine_factory=engine_factory)

    async def hold(event: RunEvent) -> None:  # a subscriber: the store already has `event`
        if held(point) and matches(point, event):
            print(f"at {point}", flush=True)
            await forever.wait()

    config = team(base_url)
    if mode == "start":
        handle = await start_run(
            config, "write the report", tools=tools, store=store, run_id=RUN_ID, subscribers=[hold]
        )
    else:
        handle = await resume_run(RUN_ID, config, store, tools=tools, subscribers=[hold])
    outcome = await handle.outcome()
    if isinstance(outcome, Parked):
        print(f"at parked {' '.join(outcome.waiting)}", flush=True)
        await forever.wait()
        return 1
    print(f"ended {outcome.kind}", flush=True)
    await engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:7])))
