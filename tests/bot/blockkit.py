"""Block Kit checks shared by the rooms' blocks tests: Slack's validators and no injected mentions."""

from __future__ import annotations

import dataclasses
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.approval_ui.blocks import (
    ApprovalView,
)
from bot.playground.blockkit import (
    find_mentions,
    iter_texts,
    validate_blocks,
    validate_text,
    validate_view,
)
from orchestrator import RunView
from orchestrator import events as ev

NOW = 1_800_000_000.0
EVIL = "<!channel> @here <@U0EVIL> <https://evil.example|click> & sk-ant-api03-SECRETSECRETSECRET"
ALLOWED = {"U0REQ", "U0APPROVER", "U0OTHER", "U0BOSS"}


def running_view() -> RunView:
    agents = tuple(
        ev.AgentInfo(agent_id=f"a{i}", label=f"agent{i}", backend="openai", model=f"model-{i}")
        for i in range(1, 4)
    )
    events: list[ev.RunEvent] = [
        ev.RunStarted(
            run_id="run-7", seq=1, at=NOW - 65, task=f"fix the tests {EVIL}", agents=agents, requester="U0REQ"
        ),
        ev.AgentStatus(agent_id="a1", status="tool", detail="shell"),
        ev.AnswerSubmitted(agent_id="a2", label="agent2.1", content="answer"),
        ev.VoteCast(agent_id="a3", voted_for="a2", voted_for_label="agent2.1", reason="best"),
        ev.ToolApprovalRequested(
            agent_id="a1",
            request_id="req-9",
            action="command(git push --force)",
            risk="high",
            layer="rule",
            reason="pushes",
            expires_at=NOW + 600,
        ),
        ev.UsageUpdated(
            agent_id="a1",
            input_tokens=1200,
            output_tokens=300,
            cost_usd=0.02,
            run_input_tokens=5000,
            run_output_tokens=900,
            run_cost_usd=0.05,
        ),
    ]
    view = RunView.initial(task="", requester="U0REQ", now=NOW - 70)
    for event in events:
        view = view.apply(event)
    return view


def approval(**changes: Any) -> ApprovalView:
    base = ApprovalView(
        request_id="req-9",
        agent_id="a1",
        action="command(git push --force origin main)",
        risk="high",
        reason=f"rewrites history {EVIL}",
        layer="rule",
        rule="ask: git push*",
        expires_at=NOW + 900,
    )
    return dataclasses.replace(base, **changes)


def assert_valid_message(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    text, blocks = rendered
    assert validate_text(text) == []
    assert validate_blocks(blocks) == []
    for block in blocks:
        assert Block.parse(block) is not None
    assert find_mentions([text, *iter_texts(blocks)], ALLOWED) == []
    assert "SECRETSECRET" not in str(rendered)


def assert_valid_view(view: dict[str, Any]) -> None:
    assert validate_view(view) == []
    View(**view).to_dict()  # slack_sdk's own validators (raise on a broken view)
    assert find_mentions(list(iter_texts(view)), ALLOWED) == []


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["action_id"], e["value"]) for b in blocks if b["type"] == "actions" for e in b["elements"]]
