"""`workspace.apply: ask`: the runner applies the winner's patch to the source through the real gate."""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path
from typing import Literal

import pytest

from approvals.models import Principal
from orchestrator import RunDriver
from orchestrator.config.team import TeamConfig, parse_team
from orchestrator.errors import TeamConfigError
from orchestrator.events import (
    RunCancelled,
    RunEvent,
    RunFinished,
    ToolApprovalRequested,
    ToolApprovalResolved,
    ToolCalled,
    ToolDecided,
    from_json,
)
from orchestrator.ports import RunContext, RunTools
from orchestrator.run import Terminal
from orchestrator.testing import (
    Request,
    Script,
    ScriptedModels,
    Turn,
    call,
    hang,
    protocol,
    scripted_team,
)
from orchestrator.tools.toolbox import build_run_tools
from tests.bot.cli.test_run import massgen_bot, team_file
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply
from tests.orchestrator.tools.fakes import Harness

APPROVER = Principal(id="U_APPROVER")
ORIGINAL = "BUG = True\n"


def _team(source: Path, apply: Literal["never", "ask"]) -> TeamConfig:
    team = scripted_team(2).model_copy(update={"sandbox": "none"})
    return team.model_copy(
        update={
            "workspace": team.workspace.model_copy(update={"source": source, "apply": apply}),
            "approvals": team.approvals.model_copy(update={"approvers": [APPROVER.id]}),
        }
    )


async def _start(
    tmp_path: Path, harness: Harness, apply: Literal["never", "ask"], *, then: Script = protocol
) -> tuple[RunDriver, asyncio.Task[Terminal], Path]:
    """Two agents fix `fix.py` in their workspaces (each its own way); the run converges on one."""
    source = tmp_path / "repo"
    source.mkdir()
    (source / "fix.py").write_text(ORIGINAL)
    models = ScriptedModels(
        {
            agent: [Turn(calls=(call("write_file", path="fix.py", content=f"BUG = False  # {agent}\n"),))]
            for agent in ("a0", "a1")
        },
        then=then,
    )

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=harness.service, root=tmp_path / "ws")

    team = _team(source, apply)
    driver = RunDriver(
        team, approvals=harness.service, models=models, tools=tools, subscribers=[harness.emit]
    )
    return driver, asyncio.create_task(driver.start("fix the bug")), source


def _apply_events(harness: Harness) -> list[RunEvent]:
    return [
        e
        for e in harness.events
        if (isinstance(e, ToolCalled | ToolDecided) and e.tool == "apply_patch")
        or isinstance(e, ToolApprovalRequested | ToolApprovalResolved)
    ]


@pytest.mark.parametrize(
    ("apply", "approve", "applied", "reason_starts"),
    [
        ("ask", True, True, "applied 1 file(s)"),
        ("ask", False, False, "denied by U_APPROVER: not now"),
        ("never", None, None, None),
    ],
)
async def test_the_winner_patch_reaches_the_source_only_when_approved(
    tmp_path: Path,
    apply: Literal["never", "ask"],
    approve: bool | None,
    applied: bool | None,
    reason_starts: str | None,
) -> None:
    harness = Harness()
    driver, driving, source = await _start(tmp_path, harness, apply)
    if approve is not None:
        request = await asyncio.wait_for(harness.requested.get(), timeout=20)
        assert request.action.kind == "write"
        assert request.context["tool"] == "apply_patch"
        assert request.context["files"] == "fix.py"
        reason = None if approve else "not now"
        await harness.service.decide(request.id, APPROVER, approve=approve, reason=reason)
    finished = await asyncio.wait_for(driving, timeout=20)
    assert isinstance(finished, RunFinished)
    assert driver.parks == (1 if approve is not None else 0)  # the ask parked the run
    assert finished.salvage is None  # the apply outcome never changes the run's outcome
    assert finished.patch is not None
    assert (finished.applied, finished.apply_reason is None) == (applied, reason_starts is None)
    if reason_starts is not None:
        assert finished.apply_reason is not None
        assert finished.apply_reason.startswith(reason_starts), finished.apply_reason
    expected = f"BUG = False  # {finished.winner}\n" if applied else ORIGINAL
    assert (source / "fix.py").read_text() == expected
    events = _apply_events(harness)
    if approve is None:
        assert events == []
        assert harness.requested.empty()
        return
    assert [e.kind for e in events] == [
        "tool_call",
        "tool_approval_requested",
        "tool_approval_resolved",
        "tool_decision",
    ]
    assert {getattr(e, "agent_id", None) for e in events} == {finished.winner}
    decided = events[-1]
    assert isinstance(decided, ToolDecided)
    assert (decided.decision, decided.executed) == ("allow" if approve else "deny", approve)
    # The apply step ends the final phase: after the answer, before the terminal event.
    kinds = [e.kind for e in harness.events]
    assert kinds.index("tool_decision", kinds.index("consensus")) < kinds.index("finished")


@pytest.mark.parametrize("how", ["finish_now", "cancel"])
async def test_stopping_the_run_parked_on_the_apply_cancels_the_approval(
    tmp_path: Path, how: Literal["finish_now", "cancel"]
) -> None:
    harness = Harness()
    driver, driving, source = await _start(tmp_path, harness, "ask")
    request = await asyncio.wait_for(harness.requested.get(), timeout=20)
    await asyncio.wait_for(driver.stop(how, by="U_BOSS"), timeout=10)
    terminal = await asyncio.wait_for(driving, timeout=20)
    if how == "cancel":
        assert isinstance(terminal, RunCancelled)
        assert terminal.by == "U_BOSS"
    else:
        assert isinstance(terminal, RunFinished)
        assert terminal.salvage is None  # the answer stands as presented
        assert terminal.applied is False
        assert terminal.apply_reason == "not applied: the run was finished early by U_BOSS"
    stored = await harness.service.get(request.id)
    assert stored is not None
    assert stored.status == "cancelled"
    assert (source / "fix.py").read_text() == ORIGINAL
    # A late answer to the cancelled request changes nothing.
    await harness.service.decide(request.id, APPROVER, approve=True)
    assert (source / "fix.py").read_text() == ORIGINAL


async def test_finish_now_while_the_winner_presents_skips_the_apply(tmp_path: Path) -> None:
    presenting = asyncio.Event()

    def present_forever(request: Request) -> Turn:
        if request.tool_names & {"new_answer", "vote"}:
            return protocol(request)
        presenting.set()
        return hang()

    harness = Harness()
    driver, driving, source = await _start(tmp_path, harness, "ask", then=present_forever)
    await asyncio.wait_for(presenting.wait(), timeout=20)
    await asyncio.wait_for(driver.stop("finish_now", by="U_BOSS"), timeout=10)
    finished = await asyncio.wait_for(driving, timeout=20)
    assert isinstance(finished, RunFinished)
    assert finished.salvage is not None
    assert finished.salvage.startswith("finish_now:")
    assert (finished.applied, finished.apply_reason) == (
        False,
        "not applied: the run was finished early by U_BOSS",
    )
    assert harness.requested.empty()  # nobody was asked after the run was told to finish
    assert _apply_events(harness) == []
    assert (source / "fix.py").read_text() == ORIGINAL


@pytest.mark.parametrize(
    ("workspace", "expected"),
    [
        ("workspace: {source: ./repo, apply: ask}", "ask"),
        ("workspace: {source: ./repo}", "never"),
        ("workspace: {apply: ask}", "needs a `workspace.source`"),
        ("workspace: {source: ./repo, apply: always}", "apply"),
    ],
)
def test_team_file_apply_option(tmp_path: Path, workspace: str, expected: str) -> None:
    (tmp_path / "repo").mkdir()
    text = f"agents:\n  - id: a\n    backend: {{type: openai, model: gpt-4o-mini}}\n{workspace}\n"
    if expected in ("ask", "never"):
        team = parse_team(text, base_dir=tmp_path)
        assert team.workspace.apply == expected
        assert team.workspace.source == (tmp_path / "repo").resolve()
        return
    with pytest.raises(TeamConfigError) as caught:
        parse_team(text, base_dir=tmp_path)
    assert expected in str(caught.value)
    assert caught.value.line == 4


def _write_first(request: ProviderRequest) -> Reply:
    """Fix `fix.py` in the own workspace once, then follow the protocol."""
    wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "new_answer" in request.tools and not wrote:
        return Reply(tool_calls=[("write_file", {"path": "fix.py", "content": "BUG = False\n"})])
    return protocol_agent(request)


async def test_cli_without_a_terminal_denies_the_apply_and_still_succeeds(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "fix.py").write_text(ORIGINAL)
    extra = "workspace: {source: ./repo, apply: ask}\nsandbox: none\n"
    async with ProviderServer(_write_first) as server:
        team = team_file(tmp_path, server, extra, both_sdks=False)
        code, out, err = await massgen_bot("--json", "--team", str(team), "fix it")
    assert code == 0, err  # a refused apply does not change the run's outcome
    events: list[RunEvent] = [from_json(line) for line in out.splitlines()]
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.patch is not None
    denied = f"denied by cli:{getpass.getuser()}: no terminal to ask"
    assert (finished.applied, finished.apply_reason) == (False, denied)
    assert (tmp_path / "repo" / "fix.py").read_text() == ORIGINAL
    resolved = [e for e in events if isinstance(e, ToolApprovalResolved) and e.agent_id == finished.winner]
    assert [e.status for e in resolved][-1:] == ["denied"]
