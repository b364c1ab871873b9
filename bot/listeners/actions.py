"""Button clicks: approvals (Approve once / for this run / Deny / Details) and run controls.

Every listener acks before anything else; the clicker is the signed payload's `user.id`; the
button value is only an id, everything else is looked up server-side.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from approvals.models import Scope
from bot.approvals_ui import CONTEXT_CHANNEL, approval_view
from bot.listeners.home import publish_home
from bot.parse import action_value, conversation, user_id
from bot.render import ids
from bot.render.blocks import answer_modal, approval_details_modal, deny_reason_modal

if TYPE_CHECKING:
    from bot.wiring import Services

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    """Attach the block_actions listeners."""

    def approve(scope: Scope) -> Any:
        async def listener(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack()
            services.runs.spawn(_decide(services, body, approve=True, scope=scope), name="click:approve")

        return listener

    app.action(ids.APPROVE_ONCE)(approve("once"))
    app.action(ids.APPROVE_RUN)(approve("run"))

    @app.action(ids.DENY)
    async def deny(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.runs.spawn(_deny(services, body), name="click:deny")

    @app.action(ids.DETAILS)
    async def details(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.runs.spawn(_details(services, body), name="click:details")

    @app.action(ids.RUN_CANCEL)
    async def cancel(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.runs.spawn(_control(services, body, finish=False), name="click:cancel")

    @app.action(ids.RUN_FINISH_NOW)
    async def finish_now(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.runs.spawn(_control(services, body, finish=True), name="click:finish")

    @app.action(ids.ANSWER_FULL)
    async def answer_full(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.runs.spawn(_answer_full(services, body), name="click:answer")


async def _tell(services: Services, body: dict[str, Any], text: str | None) -> None:
    """An ephemeral reply to the clicker, in the channel they clicked in."""
    where, user = conversation(body), user_id(body)
    if text and where is not None and user is not None:
        await services.outbox.ephemeral(where.channel, user, text=text, thread_ts=where.thread_ts)


async def _decide(services: Services, body: dict[str, Any], *, approve: bool, scope: Scope) -> None:
    request_id, user = action_value(body), user_id(body)
    if request_id is None or user is None:
        return
    text = await services.approvals_ui.decide(request_id, user, approve=approve, scope=scope)
    if _from_home(body):
        # No channel to answer in: the refreshed Home tab shows the outcome instead.
        await publish_home(services, user)
    else:
        await _tell(services, body, text)


def _from_home(body: dict[str, Any]) -> bool:
    view = body.get("view")
    return isinstance(view, dict) and view.get("type") == "home"


async def _deny(services: Services, body: dict[str, Any]) -> None:
    """Deny at the click (the agent moves on at once), then offer the denier a reason modal.

    Anyone not authorised is refused and audited by `decide`, and nothing changes.
    """
    request_id, user, trigger = action_value(body), user_id(body), body.get("trigger_id")
    if request_id is None or user is None:
        return
    text = await services.approvals_ui.decide(request_id, user, approve=False)
    if text is not None or not isinstance(trigger, str):
        await _tell(services, body, text)
        return
    try:
        await services.outbox.call("views.open", trigger_id=trigger, view=deny_reason_modal(request_id))
    except Exception:  # the trigger expired or Slack refused the modal: denied without a reason
        log.warning("deny reason modal could not open for %s", request_id)


async def _details(services: Services, body: dict[str, Any]) -> None:
    request_id, trigger = action_value(body), body.get("trigger_id")
    if request_id is None or not isinstance(trigger, str):
        return
    request = await services.approvals.get(request_id)
    where, user = conversation(body), user_id(body)
    # Button values can be forged: show a request only where it was posted, or to its approvers.
    visible = request is not None and (
        (where is not None and request.context.get(CONTEXT_CHANNEL) == where.channel)
        or (user is not None and await services.approvals_ui.is_approver(user, request))
    )
    if request is None or not visible:
        await _tell(services, body, "That approval request no longer exists.")
        return
    await services.outbox.call(
        "views.open", trigger_id=trigger, view=approval_details_modal(approval_view(request))
    )


async def _control(services: Services, body: dict[str, Any], *, finish: bool) -> None:
    run_id, user = action_value(body), user_id(body)
    if run_id is None or user is None:
        return
    active = services.runs.active(run_id)
    if active is None:
        await _tell(services, body, "This run is not running any more.")
        return
    principal = await services.principal_for_run(user, active.team)
    if not await services.runs.may_control(active, principal):
        await _tell(services, body, "Only the requester or an approver can stop this run.")
        return
    if finish:
        await active.handle.finish_now(by=user)
    else:
        await active.handle.cancel(by=user)


async def _answer_full(services: Services, body: dict[str, Any]) -> None:
    value, trigger = action_value(body), body.get("trigger_id")
    if value is None or not isinstance(trigger, str):
        return
    run_id, _, label = value.partition(":")
    run, where = await services.store.get_run(run_id), conversation(body)
    # Button values can be forged: an answer is shown only in the channel its run posted to.
    same_channel = run is not None and where is not None and run.channel == where.channel
    content = await services.answer_text(run_id, label) if same_channel else None
    if content is None:
        await _tell(services, body, "That answer is no longer available.")
        return
    await services.outbox.call("views.open", trigger_id=trigger, view=answer_modal(label, content))
