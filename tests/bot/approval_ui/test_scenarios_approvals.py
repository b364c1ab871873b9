"""Approvals from Slack: post in the run's thread, authorised clicks only, first decision wins, expiry.

The asks come through `ThreadApprovalPort` exactly as the tool gate makes them; the last test
drives a whole run whose agent's tool call needs a human.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from approvals import ConversationRef
from approvals.models import ApprovalRequest, Approvers
from approvals.permissions import Risk
from approvals.testing import scratch_postgres_database
from bot.approval_ui import ThreadApprovalPort
from bot.render import ids
from orchestrator.events import RunStarted, ToolDecided
from tests.bot.harness import APPROVER, CHANNEL, INTRUDER, REQUESTER, BotHarness, bot_harness, command_ask
from tests.conftest import postgres_url
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


async def _ask(
    bot: BotHarness,
    *,
    risk: Risk = "high",
    timeout: float = 30.0,
    approvers: Approvers | None = None,
    command: str = "git push origin main",
) -> tuple[ApprovalRequest, str]:
    """An ask in a fresh run thread; returns the request and its thread ts."""
    root = bot.services.outbox.post(CHANNEL, text="a run")
    port = ThreadApprovalPort(bot.services.approvals, CHANNEL, root)
    request = await port.request(
        command_ask(
            command,
            approvers=approvers,
            risk=risk,
            reason="pushes code",
            rule="command(git push *)",
            timeout=timeout,
        )
    )
    thread = await root.ts()
    await bot.wait_for(lambda: len(bot.posts(thread=thread)) == 1)
    return request, thread


def _message_texts(bot: BotHarness, method: str) -> list[str]:
    return [str(c.params.get("text")) for c in bot.slack.calls_to(method, ok=True)]


def _buttons(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in blocks if b["type"] == "actions" for e in b["elements"]}


async def test_ask_is_posted_in_thread_mentioning_approvers_with_id_only_buttons(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot)
        post = bot.posts(thread=thread)[0].params
        assert f"<@{APPROVER}>" in str(post["blocks"]) + str(post["text"])
        assert "git push origin main" in str(post["blocks"])
        buttons = _buttons(post["blocks"])
        assert {ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY, ids.DETAILS} <= set(buttons)
        assert {b["value"] for b in buttons.values()} == {request.id}
        assert "confirm" in buttons[ids.APPROVE_ONCE]  # high risk asks for confirmation
        await bot.settle()
        assert await bot.services.store.approval_message(request.id) == (CHANNEL, post_ts(bot, thread))


def post_ts(bot: BotHarness, thread: str) -> str:
    calls = bot.posts(thread=thread)
    ts = bot.slack.thread(CHANNEL, thread)[-1]["ts"] if calls else ""
    return str(ts)


@pytest.mark.parametrize(("action_id", "scope"), [(ids.APPROVE_ONCE, "once"), (ids.APPROVE_RUN, "run")])
async def test_approver_click_decides_and_the_waiter_wakes(
    tmp_path: Path, action_id: str, scope: str
) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot)
        waiter = asyncio.create_task(bot.services.approvals.wait(request.id))
        started = time.perf_counter()
        status, _ = await bot.click(action_id, request.id, user=APPROVER)
        decided = await asyncio.wait_for(waiter, 5)
        latency = time.perf_counter() - started
        assert status == 200
        assert (decided.status, decided.decided_by, decided.decision_scope) == ("approved", APPROVER, scope)
        assert latency < 1.0  # the bench reports the real figure (goal: 100 ms)
        await bot.settle()
        updates = [
            c for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == post_ts(bot, thread)
        ]
        assert updates, "the approval message was not rewritten"
        final = updates[-1].params
        assert "Approved" in final["text"]
        assert not _buttons(final.get("blocks") or [])


async def test_deny_denies_at_the_click_and_the_modal_adds_an_optional_reason(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot)
        waiter = asyncio.create_task(bot.services.approvals.wait(request.id))
        await bot.click(ids.DENY, request.id, user=APPROVER)
        decided = await asyncio.wait_for(waiter, 5)
        assert (decided.status, decided.decided_by) == ("denied", APPROVER)  # the agent moves on at once
        # The modal opened at the click (a trigger lives 3 s) and became the reason form once denied.
        assert len(bot.slack.calls_to("views.open", ok=True)) == 1
        await bot.wait_for(lambda: bool(bot.slack.calls_to("views.update", ok=True)))
        view = bot.slack.calls_to("views.update", ok=True)[-1].params["view"]
        assert view["callback_id"] == ids.DENY_MODAL
        assert view["private_metadata"] == request.id
        values = {
            ids.DENY_REASON_BLOCK: {
                ids.DENY_REASON_INPUT: {"type": "plain_text_input", "value": "not on a Friday"}
            }
        }
        # Only the denier may explain the denial; anyone else changes nothing.
        assert await bot.submit(ids.DENY_MODAL, values, user=INTRUDER, metadata=request.id) == 200
        assert await bot.submit(ids.DENY_MODAL, values, user=APPROVER, metadata=request.id) == 200
        await bot.settle()
        trail = await bot.services.approvals.audit_trail(run_id="run-test")
        explained = [e for e in trail if e.reason and "not on a Friday" in e.reason]
        assert [(e.actor, e.outcome) for e in explained] == [(APPROVER, "denied")]
        ts = post_ts(bot, thread)
        final = [c.params for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts][-1]
        assert "not on a Friday" in str(final["blocks"])
        assert not _buttons(final["blocks"])


async def test_intruder_is_refused_privately_audited_and_nothing_changes(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, _ = await _ask(bot)
        for action_id in (ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY):
            assert (await bot.click(action_id, request.id, user=INTRUDER))[0] == 200
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        refusals = bot.ephemerals(INTRUDER)
        assert len(refusals) == 2  # the Deny click's modal opened at once and says it instead
        assert all("not authorised" in t for t in refusals)
        updated = [c.params["view"] for c in bot.slack.calls_to("views.update", ok=True)]
        assert len(updated) == 1
        assert "not authorised" in str(updated[0])
        assert ids.DENY_REASON_BLOCK not in str(updated[0])
        audit = await bot.services.approvals._audit.query(run_id="run-test")
        assert sum(1 for e in audit if e.outcome == "rejected" and e.actor == INTRUDER) == 3


async def test_requester_cannot_approve_own_run(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot, approvers=Approvers(users=frozenset({APPROVER, REQUESTER})))
        post = bot.posts(thread=thread)[0].params
        assert f"<@{REQUESTER}>" not in str(post["blocks"]) + str(post["text"])
        await bot.click(ids.APPROVE_ONCE, request.id, user=REQUESTER)
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        assert any("not authorised" in t for t in bot.ephemerals(REQUESTER))


async def test_double_click_first_wins_second_told_already_decided(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, _ = await _ask(bot)
        first, second = await asyncio.gather(
            bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER),
            bot.click(ids.APPROVE_RUN, request.id, user=APPROVER),
        )
        assert first[0] == second[0] == 200
        await bot.settle()
        decided = await bot.services.approvals.get(request.id)
        assert decided is not None
        assert decided.status == "approved"
        told = bot.ephemerals(APPROVER)
        assert len(told) == 1
        assert "already decided" in told[0]


async def test_expiry_denies_rewrites_the_message_and_late_clicks_change_nothing(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot, timeout=0.3)
        expired = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert expired.status == "expired"
        await bot.settle()
        ts = post_ts(bot, thread)
        await bot.wait_for(
            lambda: any(c.params["ts"] == ts for c in bot.slack.calls_to("chat.update", ok=True))
        )
        last = [c for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts][-1].params
        assert "expired" in last["text"].lower()
        assert "Expired at" in str(last["blocks"])
        assert "denied" in str(last["blocks"])
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "expired"  # type: ignore[union-attr]
        assert any("expired" in t for t in bot.ephemerals(APPROVER))


async def test_group_member_may_approve_resolved_through_usergroups(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        bot.slack.usergroups["S0OPS"] = ["U0OPS1", "U0OPS2"]
        bot.slack.allowed_mentions.update({"U0OPS2", "S0OPS"})  # "Approved by <@U0OPS2>", the group ping
        request, _ = await _ask(bot, approvers=Approvers(groups=frozenset({"S0OPS"})))
        await bot.wait_for(
            lambda: any(request.id in str(c.params) for c in bot.slack.calls_to("chat.postMessage"))
        )
        posted = next(c for c in bot.slack.calls_to("chat.postMessage") if request.id in str(c.params))
        assert "<!subteam^S0OPS>" in str(posted.params), (
            "the group's members are mentioned so their phones ring"
        )
        await bot.click(ids.APPROVE_ONCE, request.id, user="U0OPS2")
        decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert decided.decided_by == "U0OPS2"
        # The membership is cached: a second request costs no second Tier 2 lookup.
        second, _ = await _ask(bot, approvers=Approvers(groups=frozenset({"S0OPS"})))
        await bot.click(ids.APPROVE_ONCE, second.id, user="U0NOTOPS")
        await bot.settle()
        assert len(bot.slack.calls_to("usergroups.users.list")) == 1
        assert (await bot.services.approvals.get(second.id)).status == "pending"  # type: ignore[union-attr]


async def test_details_opens_a_modal_with_the_full_action(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        long_command = "echo " + "x" * 5000
        request, _ = await _ask(bot, command=long_command)
        await bot.click(ids.DETAILS, request.id, user=INTRUDER)
        await bot.wait_for(lambda: bool(bot.slack.calls_to("views.update", ok=True)))
        view = bot.slack.calls_to("views.update", ok=True)[-1].params["view"]
        shown = "".join(
            b["text"]["text"] for b in view["blocks"] if "```" in b.get("text", {}).get("text", "")
        )
        assert shown.count("x") == 5000


def _asks_once() -> Any:
    asked = asyncio.Event()

    def handler(request: ProviderRequest) -> Reply:
        if request.model == "gpt-test" and "run_command" in request.tools and not asked.is_set():
            asked.set()
            return Reply(tool_calls=[("run_command", {"command": "echo approved-by-a-human"})])
        return protocol_agent(request)

    return handler


async def test_a_run_waits_for_the_click_and_the_tool_runs_after_approval(tmp_path: Path) -> None:
    rules = "permissions: {policy: human, rules: {ask: ['command(echo *)']}}\n"
    async with bot_harness(tmp_path, handler=_asks_once(), tools="real", team_extra=rules) as bot:
        await bot.command("say hello")
        await bot.wait_for(
            lambda: any(ids.APPROVE_ONCE in str(c.params.get("blocks")) for c in bot.posts()), 20
        )
        post = next(c for c in bot.posts() if ids.APPROVE_ONCE in str(c.params.get("blocks")))
        request_id = _buttons(post.params["blocks"])[ids.APPROVE_ONCE]["value"]
        await bot.click(ids.APPROVE_ONCE, request_id, user=APPROVER)
        await bot.settle(30)
        run = (await bot.services.runs.history.recent())[0]
        assert run.state == "finished"
        events = await bot.services.run_store.events(run.run_id)
        decided = [e for e in events if isinstance(e, ToolDecided)]
        assert [(e.decision, e.executed) for e in decided] == [("allow", True)]
        assert "approved-by-a-human" in decided[0].result_preview


async def test_reminder_mentions_approvers_in_the_thread_before_expiry(tmp_path: Path) -> None:
    async with bot_harness(tmp_path, remind_before=0.8) as bot:
        request, thread = await _ask(bot, timeout=1.0)
        await bot.wait_for(
            lambda: any(
                "Reminder" in str(c.params["text"]) or "⏰" in str(c.params["text"])
                for c in bot.posts(thread=thread)
            )
        )
        reminder = next(c for c in bot.posts(thread=thread) if "⏰" in str(c.params["text"]))
        assert f"<@{APPROVER}>" in reminder.params["text"]
        assert (await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)).status == "expired"


async def test_restart_recovery_fails_orphaned_runs_and_cancels_their_asks(tmp_path: Path) -> None:
    from bot.recovery import recover

    async with bot_harness(tmp_path) as bot:
        request, thread = await _ask(bot)
        # A run the previous process left running: in the run store, and its Slack coordinates.
        where = ConversationRef(surface="slack", channel=CHANNEL)
        started = RunStarted(
            run_id="run-test", seq=1, task="x", agents=(), requester=REQUESTER, conversation=where
        )
        await bot.services.run_store.append(started)
        await bot.services.store.record_run("run-test", CHANNEL)
        await bot.services.store.set_root("run-test", thread)
        history = bot.services.runs.history
        assert await recover(history, bot.services.approvals, bot.services.outbox) == 1
        assert (await history.get("run-test")).state == "failed"  # type: ignore[union-attr]
        assert (await bot.services.approvals.get(request.id)).status == "cancelled"  # type: ignore[union-attr]
        await bot.settle()
        ts = post_ts_first(bot, thread)
        rewritten = [c for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts]
        assert rewritten
        assert not _buttons(rewritten[-1].params.get("blocks") or [])
        assert any("restarted" in str(c.params["text"]) for c in bot.posts(thread=thread))


def post_ts_first(bot: BotHarness, thread: str) -> str:
    return str(bot.slack.thread(CHANNEL, thread)[1]["ts"])


async def test_approvals_command_lists_what_waits_for_me(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        await _ask(bot, command="terraform apply")
        await bot.command("approvals", user=APPROVER)
        await bot.command("approvals", user=INTRUDER)
        await bot.settle()
        assert any("terraform apply" in t for t in bot.ephemerals(APPROVER))
        assert bot.ephemerals(INTRUDER) == ["Nothing is waiting for you."]


@pytest.mark.postgres
async def test_click_decides_on_postgresql_too(tmp_path: Path) -> None:
    server = postgres_url()
    if server is None:
        pytest.skip("no PostgreSQL (DATABASE_URL_POSTGRES)")
    async with scratch_postgres_database(server) as url, bot_harness(tmp_path, database_url=url) as bot:
        request, _ = await _ask(bot)
        await bot.click(ids.APPROVE_RUN, request.id, user=APPROVER)
        decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert (decided.status, decided.decision_scope) == ("approved", "run")
        await bot.command("ship it")
        await bot.settle()
        assert (await bot.services.runs.history.recent())[0].state == "finished"


async def test_quorum_progress_is_shown_on_the_message_until_the_last_approval(tmp_path: Path) -> None:
    async with bot_harness(tmp_path) as bot:
        second = "U0SECOND"
        bot.slack.allowed_mentions.add(second)
        approvers = Approvers(users=frozenset({APPROVER, second}), quorum=2)
        request, thread = await _ask(bot, approvers=approvers)
        await bot.click(ids.APPROVE_ONCE, request.id, user=APPROVER)
        await bot.settle()
        assert (await bot.services.approvals.get(request.id)).status == "pending"  # type: ignore[union-attr]
        ts = post_ts(bot, thread)
        progress = [c.params for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts]
        assert progress, "the first vote rewrote the message"
        assert f"1 so far: <@{APPROVER}>" in str(progress[-1]["blocks"])
        assert ids.APPROVE_ONCE in _buttons(progress[-1]["blocks"]), "buttons stay for the others"
        await bot.click(ids.APPROVE_ONCE, request.id, user=second)
        decided = await asyncio.wait_for(bot.services.approvals.wait(request.id), 5)
        assert decided.status == "approved"
        await bot.settle()
        final = [c.params for c in bot.slack.calls_to("chat.update", ok=True) if c.params["ts"] == ts][-1]
        assert not _buttons(final["blocks"])
