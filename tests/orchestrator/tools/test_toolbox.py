"""build_run_tools end to end: real engine, real approval service, real workspaces and sandbox."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from approvals.models import Principal
from approvals.permissions import Action, Decision, action_digest
from approvals.testing import FrozenClock
from orchestrator.config.team import TeamConfig
from orchestrator.events import ToolDecided
from orchestrator.llm.base import ToolCall
from orchestrator.ports import RunContext, RunTools
from orchestrator.tools.proxy import EgressRules
from orchestrator.tools.toolbox import WorkspaceRunTools, build_run_tools
from tests.orchestrator.tools.conftest import needs_bwrap
from tests.orchestrator.tools.fakes import ALLOW, Harness, ScriptedEngine, parked_on

EGRESS_ALLOWED = Decision(
    verdict="allow",
    resolved="allow",
    risk="high",
    layer="rule",
    reason="rule",
    egress=True,
    hosts=("127.0.0.1",),
)
# The tests' HTTP server listens on loopback, which the egress rules refuse outside tests.
LOCAL_EGRESS = EgressRules(allow_private=True)

APPROVER = Principal(id="U_APPROVER")
AGENTS = ("alpha", "beta")


def team(source: Path | None, **overrides: Any) -> TeamConfig:
    data: dict[str, Any] = {
        "agents": [{"id": a, "backend": {"type": "openai", "model": "gpt-test"}} for a in AGENTS],
        "approvals": {"approvers": ["U_APPROVER"], "timeout_seconds": 60},
        "workspace": {"source": source},
        "sandbox": "bwrap",
        "tools": {"command_timeout_seconds": 10, "output_limit_bytes": 4096},
    }
    data.update(overrides)
    return TeamConfig.model_validate(data)


async def build(harness: Harness, config: TeamConfig, root: Path, **kw: Any) -> WorkspaceRunTools:
    ctx = RunContext(run_id="run1", team=config, agent_ids=AGENTS, requester="U_REQUESTER", emit=harness.emit)
    kw.setdefault("egress", LOCAL_EGRESS)
    return await build_run_tools(ctx, approvals=harness.service, root=root, **kw)


def _through_the_proxy(content: str) -> bool:
    """The approved curl ran, through the egress proxy: it got the page, or the proxy named the host
    as not approved (the engine on this branch derives no hosts yet; with hosts it gets the page)."""
    return "hello from loopback" in content or "[egress refused: 127.0.0.1:" in content


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "repo"
    src.mkdir()
    (src / "app.py").write_text("print('v1')\n")
    return src


@pytest.fixture
async def harness() -> Harness:
    return Harness()  # async: the service binds to the test's event loop


async def test_it_implements_the_run_tools_port(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools: RunTools = await build(harness, team(source), tmp_path / "ws")
    assert {s.name for s in tools.for_agent("alpha").specs("coordination")} >= {"read_file", "run_command"}
    await tools.close("the run ended")
    assert not (tmp_path / "ws" / "run1").exists()


async def test_happy_path_file_tools_and_events(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    alpha = tools.for_agent("alpha")
    wrote = await alpha.call(
        call("write_file", {"path": "app.py", "content": "print('v2')\n"}), phase="coordination"
    )
    assert not wrote.is_error
    read = await alpha.call(call("read_file", {"path": "app.py"}, "c2"), phase="coordination")
    assert read.content == "print('v2')\n"
    assert (source / "app.py").read_text() == "print('v1')\n"  # the source is untouched
    decided = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert [(e.tool, e.decision, e.executed) for e in decided] == [
        ("write_file", "allow", True),
        ("read_file", "allow", True),
    ]
    assert harness.kinds()[:4] == ["tool_call", "agent_status", "tool_started", "tool_decision"]
    assert [e.outcome for e in harness.audit.entries] == ["allow", "allow"]
    await tools.close("the run ended")


async def test_bad_arguments_are_an_error_result(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    outcome = await tools.for_agent("alpha").call(call("write_file", {"path": "x"}), phase="coordination")
    assert outcome.is_error
    assert "content: Field required" in outcome.content
    assert not (tools.workspace("alpha") / "x").exists()
    await tools.close("the run ended")


@needs_bwrap
async def test_deny_reason_is_fed_back_and_nothing_runs(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    config = team(source, permissions={"policy": "human", "rules": {"deny": ["command(touch *)"]}})
    tools = await build(harness, config, tmp_path / "ws")
    outcome = await tools.for_agent("alpha").call(
        call("run_command", {"command": "touch must-not-exist.txt"}), phase="coordination"
    )
    assert outcome.is_error
    assert "command(touch *)" in outcome.content  # the rule that denied it, for the model to read
    assert not (tools.workspace("alpha") / "must-not-exist.txt").exists()
    assert harness.audit.entries[-1].outcome == "deny"
    (decided,) = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert (decided.decision, decided.executed, decided.layer) == ("deny", False, "rule")
    assert (decided.outcome, decided.exit_code, decided.request_id) == ("denied", None, None)
    await tools.close("the run ended")


@needs_bwrap
async def test_ask_parks_while_another_agent_works_and_runs_exactly_the_approved_input(
    harness: Harness, source: Path, tmp_path: Path, http_server: str
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    arguments = {"command": f"curl -s {http_server}/hello"}
    alpha = tools.for_agent("alpha")
    asked = await parked_on(alpha.call(call("run_command", arguments), phase="coordination"))
    request = await harness.next_request()
    assert request.id == asked
    assert request.digest == action_digest("run_command", {"command": f"curl -s {http_server}/hello"})
    beta = await tools.for_agent("beta").call(call("read_file", {"path": "app.py"}), phase="coordination")
    assert beta.content == "print('v1')\n"  # beta worked while alpha was parked
    await harness.service.decide(request.id, APPROVER, approve=True)
    # Another input offered with the approved request's id is judged on its own, never run on it.
    swapped = {"command": f"curl -s {http_server}/swapped"}
    again = await parked_on(alpha.call(call("run_command", swapped), phase="coordination", awaiting=asked))
    assert again != asked
    resumed = alpha.call(call("run_command", arguments), phase="coordination", awaiting=asked)
    outcome = await asyncio.wait_for(resumed, timeout=10)
    assert _through_the_proxy(outcome.content)  # network opened for the approved egress
    await tools.close("the run ended")


@needs_bwrap
async def test_run_scope_approval_is_not_asked_twice(
    harness: Harness, source: Path, tmp_path: Path, http_server: str
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    command = {"command": f"curl -s {http_server}/hello"}
    alpha = tools.for_agent("alpha")
    first = await parked_on(alpha.call(call("run_command", command), phase="coordination"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True, scope="run")
    resumed = await alpha.call(call("run_command", command), phase="coordination", awaiting=first)
    assert _through_the_proxy(resumed.content)
    second = await asyncio.wait_for(
        tools.for_agent("beta").call(call("run_command", dict(command)), phase="coordination"), timeout=10
    )
    assert _through_the_proxy(second.content)
    assert harness.requested.empty()
    await tools.close("the run ended")


@needs_bwrap
@pytest.mark.parametrize(("decision", "reachable"), [(ALLOW, False), (EGRESS_ALLOWED, True)])
async def test_network_follows_the_egress_decision_not_the_command_text(
    harness: Harness, source: Path, tmp_path: Path, http_server: str, decision: Decision, reachable: bool
) -> None:
    # An engine that misses the socket (plain allow, no egress) still gets no network from the OS.
    command = f"curl -s --max-time 5 {http_server}/hello && echo CONNECTED || echo UNREACHABLE"
    tools = await build(
        harness,
        team(source),
        tmp_path / "ws",
        engine_factory=lambda config: ScriptedEngine({command: decision}),
    )
    outcome = await tools.for_agent("alpha").call(
        call("run_command", {"command": command}), phase="coordination"
    )
    assert ("CONNECTED" if reachable else "UNREACHABLE") in outcome.content
    await tools.close("the run ended")


async def test_missing_bubblewrap_refuses_run_command(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools = await build(harness, team(source), tmp_path / "ws", bwrap_path=str(tmp_path / "nope" / "bwrap"))
    outcome = await tools.for_agent("alpha").call(
        call("run_command", {"command": "echo hi > made.txt"}), phase="coordination"
    )
    assert outcome.is_error
    assert "bubblewrap not found" in outcome.content
    assert "sandbox: none" in outcome.content
    assert not (tools.workspace("alpha") / "made.txt").exists()
    await tools.close("the run ended")


async def test_sandbox_none_runs_plainly(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools = await build(harness, team(source, sandbox="none"), tmp_path / "ws", bwrap_path="/nonexistent")
    outcome = await tools.for_agent("alpha").call(
        call("run_command", {"command": "echo hi > made.txt && cat made.txt"}), phase="coordination"
    )
    assert outcome.content == "hi\n[exit code 0]"
    await tools.close("the run ended")


@pytest.mark.parametrize(
    ("command", "outcome", "code"),
    [("true", "ran", 0), ("echo out; exit 3", "failed", 3), ("echo '[exit code 0]'; exit 4", "failed", 4)],
)
async def test_the_decision_event_says_what_the_command_did(
    harness: Harness, source: Path, tmp_path: Path, command: str, outcome: str, code: int
) -> None:
    tools = await build(harness, team(source, sandbox="none"), tmp_path / "ws", bwrap_path="/nonexistent")
    await tools.for_agent("alpha").call(call("run_command", {"command": command}), phase="coordination")
    (decided,) = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert (decided.outcome, decided.exit_code, decided.request_id) == (outcome, code, None)
    await tools.close("the run ended")


async def test_peers_workspace_is_readable_not_writable(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    beta_file = tools.workspace("beta") / "app.py"
    alpha = tools.for_agent("alpha")
    read = await alpha.call(call("read_file", {"path": str(beta_file)}), phase="coordination")
    assert read.content == "print('v1')\n"
    pwn = call("write_file", {"path": str(beta_file), "content": "pwned"})
    wrote = await alpha.call(pwn, phase="coordination")
    assert wrote.is_error
    assert "another agent's workspace" in wrote.content
    assert beta_file.read_text() == "print('v1')\n"
    assert harness.requested.empty()  # refused outright: no human is asked to approve the impossible
    assert (harness.audit.entries[-1].outcome, harness.audit.entries[-1].layer) == ("deny", "boundary")
    await tools.close("the run ended")


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def git_source(tmp_path: Path) -> tuple[Path, Path]:
    remote = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    src = tmp_path / "repo"
    src.mkdir()
    _git("init", "-q", "-b", "main", cwd=src)
    (src / "app.py").write_text("print('v1')\n")
    _git("add", ".", cwd=src)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init", cwd=src)
    _git("remote", "add", "origin", str(remote), cwd=src)
    return src, remote


async def test_git_push_is_deferred_in_coordination_and_done_once_in_final(
    harness: Harness, git_source: tuple[Path, Path], tmp_path: Path
) -> None:
    source, remote = git_source
    # No sandbox here: the local bare remote lives outside the workspace (a real remote needs egress).
    tools = await build(harness, team(source, sandbox="none"), tmp_path / "ws")
    push = {"command": "git push -q origin main"}
    for agent in AGENTS:
        outcome = await tools.for_agent(agent).call(call("run_command", push), phase="coordination")
        assert outcome.is_error
        assert outcome.content.startswith("deferred")
    assert _git("branch", "--list", cwd=remote) == ""  # nothing was pushed
    assert harness.requested.empty()  # and nobody was asked
    alpha = tools.for_agent("alpha")
    final = await parked_on(alpha.call(call("run_command", push), phase="final"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    outcome = await asyncio.wait_for(alpha.call(call("run_command", push), phase="final", awaiting=final), 10)
    assert outcome.content.endswith("[exit code 0]"), outcome.content
    assert "main" in _git("branch", "--list", cwd=remote)
    second = await tools.for_agent("beta").call(call("run_command", push), phase="final")
    assert second.is_error
    await tools.close("the run ended")


async def test_winner_patch_and_apply_back_through_the_engine(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    alpha = tools.for_agent("alpha")
    await alpha.call(call("write_file", {"path": "app.py", "content": "print('v2')\n"}), phase="coordination")
    await alpha.call(call("write_file", {"path": "new.py", "content": "X = 1\n"}, "c2"), phase="coordination")
    patch = await tools.winner_patch("alpha")
    assert patch is not None
    assert "+print('v2')" in patch
    assert await tools.winner_patch("beta") is None
    # Denied: the source stays as it was.
    denied = await parked_on(tools.apply_patch("alpha", patch))
    request = await harness.next_request()
    assert request.action.kind == "write"
    assert request.context["files"] == "app.py, new.py"
    await harness.service.decide(request.id, APPROVER, approve=False, reason="not now")
    assert (await tools.apply_patch("alpha", patch, awaiting=denied)).is_error
    assert (source / "app.py").read_text() == "print('v1')\n"
    assert not (source / "new.py").exists()
    # Approved: written, all files.
    approved = await parked_on(tools.apply_patch("alpha", patch))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True)
    outcome = await tools.apply_patch("alpha", patch, awaiting=approved)
    assert not outcome.is_error, outcome.content
    assert (source / "app.py").read_text() == "print('v2')\n"
    assert (source / "new.py").read_text() == "X = 1\n"
    await tools.close("the run ended")


async def test_fetch_url_asks_then_fetches_exactly_the_approved_url(
    harness: Harness, source: Path, tmp_path: Path, http_server: str
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    fetch = call("fetch_url", {"url": f"{http_server}/hello"})
    asked = await parked_on(tools.for_agent("alpha").call(fetch, phase="coordination"))
    request = await harness.next_request()
    assert str(request.action) == f"fetch({http_server}/hello)"
    assert request.context == {
        "run_id": "run1",
        "agent_id": "alpha",
        "tool": "fetch_url",
        "input": json.dumps({"url": f"{http_server}/hello"}),
        "scope_keys": json.dumps([f"fetch({http_server}/hello)"]),  # what "for this run" would grant
    }
    await harness.service.decide(request.id, APPROVER, approve=True)
    resumed = tools.for_agent("alpha").call(fetch, phase="coordination", awaiting=asked)
    outcome = await asyncio.wait_for(resumed, timeout=10)
    assert outcome.content.endswith("hello from loopback")
    assert [e.outcome for e in harness.audit.entries] == ["ask", "approved"]
    (decided,) = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert (decided.outcome, decided.exit_code, decided.request_id) == ("ran", None, request.id)
    await tools.close("the run ended")


async def test_an_unanswered_ask_is_denied_when_it_expires(
    source: Path, tmp_path: Path, http_server: str
) -> None:
    clock = FrozenClock(datetime.now(UTC))
    harness = Harness(clock=clock)
    tools = await build(harness, team(source), tmp_path / "ws")
    fetch = call("fetch_url", {"url": f"{http_server}/hello"})
    asked = await parked_on(tools.for_agent("alpha").call(fetch, phase="coordination"))
    clock.advance(timedelta(seconds=61))
    assert [r.id for r in await harness.service.expire_due()] == [asked]
    outcome = await tools.for_agent("alpha").call(fetch, phase="coordination", awaiting=asked)
    assert outcome.is_error
    assert "expired" in outcome.content
    assert harness.kinds().count("tool_approval_resolved") == 1
    (decided,) = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert decided.outcome == "expired"
    assert decided.request_id is not None
    await tools.close("the run ended")


async def test_close_cancels_pending_approvals(harness: Harness, source: Path, tmp_path: Path) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    fetch = call("fetch_url", {"url": "https://example.com/"})
    asked = await parked_on(tools.for_agent("alpha").call(fetch, phase="coordination"))
    await tools.close("the run ended")
    request = await harness.service.get(asked)
    assert request is not None
    assert (request.status, request.decision_reason) == ("cancelled", "the run ended")
    assert await harness.service.pending() == []


async def test_huge_arguments_are_clipped_in_events_not_in_the_file(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    content = "z" * 50_000
    await tools.for_agent("alpha").call(
        call("write_file", {"path": "big.txt", "content": content}), phase="final"
    )
    (called,) = [e for e in harness.events if e.kind == "tool_call"]
    assert len(called.arguments["content"]) < 2100
    assert (tools.workspace("alpha") / "big.txt").read_text() == content
    await tools.close("the run ended")


async def test_a_symlink_swapped_while_parked_does_not_redirect_the_read(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    shown, secret = tmp_path / "shown.txt", tmp_path / "secret.txt"
    shown.write_text("the approved file\n")
    secret.write_text("SECRET\n")
    tools = await build(harness, team(source), tmp_path / "ws")
    link = tools.workspace("alpha") / "link.txt"
    link.symlink_to(shown)
    read = call("read_file", {"path": "link.txt"})
    asked = await parked_on(tools.for_agent("alpha").call(read, phase="coordination"))
    request = await harness.next_request()
    assert request.action == Action(kind="read", target=str(shown))
    assert request.context["path_as_given"] == str(link)
    link.unlink()
    link.symlink_to(secret)  # swapped while the approver looks at the request
    await harness.service.decide(request.id, APPROVER, approve=True)
    # The resumed call now resolves to another file: the approval (of `shown`) does not cover it.
    again = await parked_on(tools.for_agent("alpha").call(read, phase="coordination", awaiting=asked))
    other = await harness.next_request()
    assert (other.id, other.action) == (again, Action(kind="read", target=str(secret)))
    assert not [e for e in harness.events if isinstance(e, ToolDecided)]  # nothing was read
    link.unlink()
    link.symlink_to(shown)  # back to the approved file: its approval answers the call
    outcome = await tools.for_agent("alpha").call(read, phase="coordination", awaiting=asked)
    assert outcome.content == "the approved file\n"
    (called,) = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert str(shown) in called.action  # the real path was judged and shown, not only the link
    await tools.close("the run ended")


@pytest.mark.parametrize(
    "arguments",
    [{"path": "a\x00b"}, {"path": "no/such/file.txt"}, {"path": "."}],
)
async def test_odd_paths_give_an_error_result_never_an_exception(
    harness: Harness, source: Path, tmp_path: Path, arguments: dict[str, Any]
) -> None:
    tools = await build(harness, team(source), tmp_path / "ws")
    outcome = await tools.for_agent("alpha").call(call("read_file", arguments), phase="coordination")
    assert outcome.is_error
    assert outcome.content.startswith(("read_file failed", "denied", "invalid arguments for read_file"))
    assert "Error:" not in outcome.content  # a reason, never an exception's repr
    await tools.close("the run ended")


async def test_a_write_through_a_symlink_out_of_the_workspace_is_refused_without_asking(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original\n")
    tools = await build(harness, team(source), tmp_path / "ws")
    (tools.workspace("alpha") / "trap.txt").symlink_to(victim)
    outcome = await tools.for_agent("alpha").call(
        call("write_file", {"path": "trap.txt", "content": "pwned"}), phase="coordination"
    )
    assert outcome.is_error
    assert "through a symlink" in outcome.content
    assert victim.read_text() == "original\n"
    assert harness.requested.empty()
    await tools.close("the run ended")


async def test_an_always_approval_allows_the_same_command_in_later_runs(
    harness: Harness, source: Path, tmp_path: Path
) -> None:
    command = call("run_command", {"command": "frobnicate --check"})
    first = await build(harness, team(source, sandbox="none"), tmp_path / "ws1")
    pending = await parked_on(first.for_agent("alpha").call(command, phase="coordination"))
    request = await harness.next_request()
    assert "always" in request.scopes, "a plain, medium-risk command offers the always scope"
    await harness.service.decide(request.id, APPROVER, approve=True, scope="always")
    assert not (await first.for_agent("alpha").call(command, phase="coordination", awaiting=pending)).is_error
    await first.close("the run ended")
    assert await harness.service.always_rules() == ["command(frobnicate --check)"]

    harness.events.clear()
    later_ctx = RunContext(
        run_id="run2",
        team=team(source, sandbox="none"),
        agent_ids=AGENTS,
        requester="U_REQUESTER",
        emit=harness.emit,
    )
    later = await build_run_tools(later_ctx, approvals=harness.service, root=tmp_path / "ws2")
    await later.for_agent("beta").call(command, phase="coordination")
    decided = [e for e in harness.events if isinstance(e, ToolDecided)]
    assert [(d.decision, d.layer) for d in decided] == [("allow", "rule")]
    assert harness.requested.empty(), "no second approval request"
    # A different command is not covered by the persisted rule.
    fix = call("run_command", {"command": "frobnicate --fix"}, "c2")
    other = await parked_on(later.for_agent("beta").call(fix, phase="coordination"))
    again = await harness.next_request()
    assert again.id == other
    await harness.service.decide(again.id, APPROVER, approve=False)
    assert (await later.for_agent("beta").call(fix, phase="coordination", awaiting=other)).is_error
    await later.close("the run ended")


@needs_bwrap
async def test_a_run_grant_keeps_the_approved_host_list(
    harness: Harness, source: Path, tmp_path: Path, http_server: str
) -> None:
    # Approved "for this run": later identical commands reach the request's hosts, and only those.
    command = f"curl -s --max-time 5 {http_server}/hello; curl -s --max-time 5 http://localhost:1/"
    ask = Decision(
        verdict="ask",
        resolved="ask",
        risk="high",
        layer="risk",
        reason="egress",
        egress=True,
        hosts=("127.0.0.1",),
    )
    engine = ScriptedEngine({command: ask})
    tools = await build(harness, team(source), tmp_path / "ws", engine_factory=lambda config: engine)
    alpha = tools.for_agent("alpha")
    asked = await parked_on(alpha.call(call("run_command", {"command": command}), phase="coordination"))
    await harness.service.decide((await harness.next_request()).id, APPROVER, approve=True, scope="run")
    first = await alpha.call(call("run_command", {"command": command}), phase="coordination", awaiting=asked)
    second = await tools.for_agent("beta").call(
        call("run_command", {"command": command}), phase="coordination"
    )
    for outcome in (first, second):
        assert "hello from loopback" in outcome.content
        assert "[egress refused: localhost:1 (not on the approval)]" in outcome.content
    assert harness.requested.empty()
    await tools.close("the run ended")


async def test_unconfined_commands_ask_with_the_reason_unless_the_dev_flag_is_set(
    harness: Harness, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MASSGEN_UNCONFINED_OK", raising=False)
    tools = await build(harness, team(source, sandbox="none"), tmp_path / "ws", bwrap_path="/nonexistent")
    alpha = tools.for_agent("alpha")
    asked = await parked_on(alpha.call(call("run_command", {"command": "echo hi"}), phase="coordination"))
    request = await harness.next_request()
    assert request.id == asked
    assert "UNCONFINED" in request.reason
    assert "MASSGEN_UNCONFINED_OK" in request.reason
    await harness.service.decide(request.id, APPROVER, approve=True, scope="run")
    first = await alpha.call(
        call("run_command", {"command": "echo hi"}), phase="coordination", awaiting=asked
    )
    assert first.content == "hi\n[exit code 0]"
    # The run grant covers the repeat; file tools are judged as before (not asked).
    again = await tools.for_agent("alpha").call(
        call("run_command", {"command": "echo hi"}), phase="coordination"
    )
    assert again.content == "hi\n[exit code 0]"
    read = await tools.for_agent("alpha").call(call("read_file", {"path": "app.py"}), phase="coordination")
    assert read.content == "print('v1')\n"
    assert harness.requested.empty()
    await tools.close("the run ended")
