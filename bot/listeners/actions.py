"""Button clicks: approvals (Approve once / for this run / Deny / Details / View diff), run controls.

Every listener acks before anything else; the clicker is the signed payload's `user.id`; the
button value is only an id, everything else is looked up server-side.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.listeners.replies import answered, response_url, tell
from bot.listeners.workspaces import REFUSED, user_team
from bot.render import ids
from bot.runs import ANSWER_GONE
from bot.slack.parse import action_value, conversation, user_id

if TYPE_CHECKING:
    from bot.wiring import Services


def register(app: AsyncApp, services: Services) -> None:
    """Attach the block_actions listeners."""

    def approve(scope: Any) -> Any:
        async def listener(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack()
            services.tasks.spawn(
                _guarded(services, body, _approve(services, body, scope)), name="click:approve"
            )

        return listener

    app.action(ids.APPROVE_ONCE)(approve("once"))
    app.action(ids.APPROVE_RUN)(approve("run"))

    @app.action(ids.DENY)
    async def deny(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(_guarded(services, body, _deny(services, body)), name="click:deny")

    @app.action(ids.DETAILS)
    async def details(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(_guarded(services, body, _details(services, body)), name="click:details")

    @app.action(ids.VIEW_DIFF)
    async def view_diff(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(_guarded(services, body, _details(services, body, diff=True)), name="click:diff")

    @app.action(ids.RUN_CANCEL)
    async def cancel(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(
            _guarded(services, body, _stop(services, body, finish=False)), name="click:cancel"
        )

    @app.action(ids.RUN_FINISH_NOW)
    async def finish_now(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(
            _guarded(services, body, _stop(services, body, finish=True)), name="click:finish"
        )

    @app.action(ids.ANSWER_FULL)
    async def answer_full(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        services.tasks.spawn(_guarded(services, body, _answer_full(services, body)), name="click:answer")


DECISIONS = frozenset({ids.APPROVE_ONCE, ids.APPROVE_RUN, ids.DENY})


def refuse(services: Services, body: dict[str, Any]) -> Coroutine[Any, Any, None]:
    """The reply to a click by a user of another workspace (the middleware acked it): see `_refused`."""
    return _guarded(services, body, _refused(services, body))


async def _refused(services: Services, body: dict[str, Any]) -> None:
    """An outsider never counts as an approver: a decision is refused and audited; any other click
    (Details, Cancel, the full answer) is refused like every request of theirs."""
    request_id, user = action_value(body), user_id(body)
    if _clicked(body) in DECISIONS and request_id is not None and user is not None:
        where = user_team(body) or "unknown"
        await _tell(services, body, await services.approval_ui.refuse_outsider(request_id, user, where))
        return
    await _tell(services, body, REFUSED)


def _clicked(body: dict[str, Any]) -> str | None:
    clicked = body.get("actions")
    first = clicked[0] if isinstance(clicked, list) and clicked else None
    return first.get("action_id") if isinstance(first, dict) else None


def _guarded(services: Services, body: dict[str, Any], work: Awaitable[object]) -> Coroutine[Any, Any, None]:
    """The click's work; if the database is away, the clicker hears "try again"."""
    where = conversation(body)
    return answered(
        services,
        work,
        user=user_id(body),
        channel=None if where is None else where.channel,
        response_url=response_url(body),
        thread_ts=None if where is None else where.thread_ts,
    )


async def _tell(services: Services, body: dict[str, Any], text: str | None) -> None:
    """A reply only the clicker sees: through the click's response_url, else an ephemeral."""
    where, user = conversation(body), user_id(body)
    if text and user is not None:
        channel, thread_ts = (None, None) if where is None else (where.channel, where.thread_ts)
        hook = response_url(body)
        await tell(services, user=user, channel=channel, text=text, response_url=hook, thread_ts=thread_ts)


def _from_home(body: dict[str, Any]) -> bool:
    view = body.get("view")
    return isinstance(view, dict) and view.get("type") == "home"


def _trigger(body: dict[str, Any]) -> str | None:
    trigger = body.get("trigger_id")
    return trigger if isinstance(trigger, str) else None


async def _approve(services: Services, body: dict[str, Any], scope: Any) -> None:
    request_id, user = action_value(body), user_id(body)
    if request_id is None or user is None:
        return
    text = await services.approval_ui.click(
        request_id, user, approve=True, scope=scope, from_home=_from_home(body)
    )
    await _tell(services, body, text)


async def _deny(services: Services, body: dict[str, Any]) -> None:
    request_id, user = action_value(body), user_id(body)
    if request_id is None or user is None:
        return
    await _tell(services, body, await services.approval_ui.deny(request_id, user, _trigger(body)))


async def _details(services: Services, body: dict[str, Any], *, diff: bool = False) -> None:
    request_id, trigger = action_value(body), _trigger(body)
    if request_id is None or trigger is None:
        return
    where = conversation(body)
    channel = None if where is None else where.channel
    show = services.approval_ui.view_diff if diff else services.approval_ui.details
    await _tell(services, body, await show(request_id, user_id(body), channel, trigger))


async def _stop(services: Services, body: dict[str, Any], *, finish: bool) -> None:
    run_id, user = action_value(body), user_id(body)
    if run_id is None or user is None:
        return
    await _tell(services, body, await services.runs.stop(run_id, user, finish=finish))


async def _answer_full(services: Services, body: dict[str, Any]) -> None:
    value, trigger = action_value(body), _trigger(body)
    if value is None or trigger is None:
        return
    where = conversation(body)
    modal = await services.runs.answer(value, None if where is None else where.channel)
    if modal is None:
        await _tell(services, body, ANSWER_GONE)
        return
    await services.outbox.call("views.open", trigger_id=trigger, view=modal)
