"""Which team the playground runs, its approver, a taken port; what the workspace makes of typed text."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from bot.playground import APPROVER, SlackEmulator, TeamPick, Workspace, playground_team, serve_playground
from bot.playground.run import with_approver
from bot.playground.workspace import PlaygroundError
from bot.settings import BotSettings
from orchestrator import local_team


def test_no_provider_keys_means_three_local_agents() -> None:
    pick = playground_team({"OPENAI_API_KEY": "  "})
    assert [a.backend.type for a in pick.team.agents] == ["local"] * 3
    assert "no provider keys" in pick.why


def test_the_default_agents_whose_key_is_set_make_the_team() -> None:
    pick = playground_team({"ANTHROPIC_API_KEY": "sk-ant-x"})
    assert [a.backend.type for a in pick.team.agents] == ["claude"]
    both = playground_team({"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x"})
    assert [a.backend.type for a in both.team.agents] == ["openai", "claude"]
    assert "provider keys are set" in both.why


def test_a_team_file_wins_and_the_playground_approver_is_always_an_approver(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text("agents:\n  - {id: solo, backend: {type: local}}\napprovals: {approvers: [U0OPS]}\n")
    pick = playground_team({"OPENAI_API_KEY": "sk-x"}, team)
    assert [a.id for a in pick.team.agents] == ["solo"]
    assert with_approver(pick.team).approvals.approvers == ["U0OPS", APPROVER.id]
    once = with_approver(local_team())
    assert with_approver(once) is once
    assert once.approvals.approvers == [APPROVER.id]


async def test_a_taken_port_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = BotSettings.with_values(MASSGEN_STATE_DIR=tmp_path)
        pick = TeamPick(team=local_team(), why="test")
        assert await serve_playground(settings, port=port, team=pick, stop=asyncio.Event()) == 1


async def test_a_bad_team_file_is_a_config_error(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text("agents: 3\n")
    settings = BotSettings.with_values(MASSGEN_STATE_DIR=tmp_path)
    assert await serve_playground(settings, port=0, team_file=team, env={}, stop=asyncio.Event()) == 1


def test_typed_text_becomes_what_slack_stores_and_refusals_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slack = SlackEmulator()
    workspace = Workspace(slack=slack, signing_secret="s")
    assert workspace.encode_text("@massgen ask @avery & @nobody <now>") == (
        f"<@{slack.bot_user_id}> ask <@{APPROVER.id}> &amp; @nobody &lt;now&gt;"
    )
    with caplog.at_level(logging.WARNING, logger="bot.playground.workspace"):
        slack.violate("chat.postMessage: invalid_blocks: too many")
    assert "Slack refuses: chat.postMessage: invalid_blocks" in caplog.text


async def test_a_reply_to_a_thread_that_does_not_exist_is_refused() -> None:
    workspace = Workspace(slack=SlackEmulator(), signing_secret="s")
    with pytest.raises(PlaygroundError):
        await workspace.send(APPROVER.id, "hello", thread_ts="1.000001")
    assert await workspace.send(APPROVER.id, "   ") is None
    assert await workspace.send(APPROVER.id, "just chatting") is None  # no mention: never reaches the bot
    assert [m["text"] for m in workspace.state(APPROVER.id)["messages"]] == ["just chatting"]
