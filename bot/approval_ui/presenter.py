"""Approvals in Slack, shown: post each ask in its run's thread, rewrite it with its outcome.

The service calls `on_event` inline, so this only queues Slack calls; anything that awaits (a
message's ts, the store) runs in a supervised task. Button values carry only the request id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from approvals import ApprovalEvent, ApprovalRequest, ApprovalService
from bot.approval_ui.blocks import (
    ApprovalView,
    approval_decided_blocks,
    approval_expired_blocks,
    approval_request_blocks,
    approver_mentions,
)
from bot.approval_ui.copies import ApproverDMs
from bot.approval_ui.diff import diff_of
from bot.approval_ui.port import slack_conversation
from bot.approval_ui.texts import post_failed_text
from bot.errors import OutboxError
from bot.render.kit import date_token
from bot.slack.outbox import GiveUp, MessageRef, Outbox
from bot.slack.parse import is_user_id
from bot.slack.store import BotStore

log = logging.getLogger(__name__)


def approval_view(request: ApprovalRequest) -> ApprovalView:
    """The renderer's view of a request (rendering never sees approvals internals)."""
    diff = diff_of(request.context)
    return ApprovalView(
        request_id=request.id,
        agent_id=request.agent_id,
        action=str(request.action),
        risk=request.risk,
        reason=request.reason,
        layer=request.layer,
        rule=request.rule,
        expires_at=request.expires_at.timestamp(),
        status=request.status,
        decided_by=request.decided_by,
        scope=request.decision_scope,
        scopes=request.scopes,
        decided_at=None if request.decided_at is None else request.decided_at.timestamp(),
        decision_reason=request.decision_reason,
        quorum=request.approvers.quorum,
        approvals_so_far=request.approvals_so_far,
        diff=None if diff is None else diff[0],
        diff_sha256=None if diff is None else diff[1],
    )


class ApprovalsUI:
    """Renders approval events into the run's thread: the ask, its reminder, its outcome."""

    def __init__(
        self,
        service: ApprovalService,
        outbox: Outbox,
        store: BotStore,
        *,
        spawn: Callable[[Coroutine[Any, Any, Any]], object],
        clock: Callable[[], float] = time.time,
        dms: ApproverDMs | None = None,
    ) -> None:
        self.service = service
        self._dms = dms if dms is not None and dms.policy != "never" else None
        self._spawn = spawn
        self._outbox = outbox
        self._store = store
        self._clock = clock
        self._messages: dict[str, MessageRef] = {}
        self._asks: dict[str, ApprovalRequest] = {}  # outbox post id -> the ask it carries, until sent
        self._unsubscribe: Callable[[], None] | None = None
        # Called with each request that appeared or left the pending set (App Home refreshes).
        self.on_change: Callable[[ApprovalRequest], None] | None = None

    def attach(self) -> None:
        """Start rendering the service's events."""
        self._unsubscribe = self.service.subscribe(self.on_event)
        self._outbox.on_give_up.append(self._on_give_up)

    def detach(self) -> None:
        """Stop rendering (shutdown)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
            self._outbox.on_give_up.remove(self._on_give_up)

    def on_event(self, event: ApprovalEvent) -> None:
        """Post a new ask; rewrite its message when decided, expired or cancelled.

        The service calls this inline before `request()`/`decide()` return, so it only queues
        Slack calls; anything that awaits (the message's ts, the store) runs in a supervised task.
        """
        if event.kind == "decision_rejected":
            return
        request = event.request
        if self.on_change is not None and event.kind != "approval_reminder":
            self.on_change(request)
        if event.kind == "approval_requested":
            self._post(request)
        elif event.kind == "approval_reminder":
            self._remind(request)
        elif event.kind == "approval_decided" and not event.final:  # a vote towards a quorum
            self._rewrite(request, *self._request_blocks(request), final=False)  # progress, buttons kept
        elif event.kind in {"approval_decided", "approval_expired", "approval_cancelled"}:
            self.show_outcome(request)

    def show_outcome(self, request: ApprovalRequest) -> None:
        """Rewrite a settled request's message with its outcome (again, for a click that finds it
        settled: a crash after the decision may have lost the first rewrite)."""
        view = approval_view(request)
        if request.status in {"approved", "denied"}:
            self._rewrite(request, *approval_decided_blocks(view, now=self._clock()))
        elif request.status in {"expired", "cancelled"}:
            self._rewrite(request, *approval_expired_blocks(view, now=self._clock()))

    def _post(self, request: ApprovalRequest) -> None:
        where = slack_conversation(request)
        if where is None:
            return  # not a Slack run (CLI, file handshake): nothing to show here
        text, blocks = self._request_blocks(request)
        ref = self._outbox.post(
            where.channel,
            text=text,
            blocks=blocks,
            thread=where.thread,
            priority=10,
            run_id=request.run_id,
            key=ask_key(request.id),  # one post per ask, whoever posts it (`post_unseen`)
        )
        self._messages[request.id] = ref
        if ref.marker is not None:
            self._asks[ref.marker] = request
        self._spawn(self._remember(request, where.channel, ref))
        if self._dms is not None:
            self._spawn(self._copy(request, where.channel, text, blocks))

    async def _copy(
        self, request: ApprovalRequest, channel: str, text: str, blocks: list[dict[str, Any]]
    ) -> None:
        """DM copies for approvers who cannot see the thread; decided meanwhile: rewrite them at once."""
        assert self._dms is not None
        if not await self._dms.send(request, channel, _approver_ids(request), text, blocks):
            return
        latest = await self.service.get(request.id)
        if latest is not None and latest.status != "pending":
            await self._dms.rewrite(
                latest.id, *approval_decided_blocks(approval_view(latest), now=self._clock())
            )

    def _request_blocks(self, request: ApprovalRequest) -> tuple[str, list[dict[str, Any]]]:
        return approval_request_blocks(
            approval_view(request),
            approver_ids=_approver_ids(request),
            approver_groups=sorted(request.approvers.groups),
            now=self._clock(),
        )

    def _remind(self, request: ApprovalRequest) -> None:
        """A new thread reply (an edit would not notify anyone) shortly before the request expires."""
        where = slack_conversation(request)
        if where is None:
            return
        who = approver_mentions(_approver_ids(request), sorted(request.approvers.groups)) or "Approvers"
        at = date_token(request.expires_at.timestamp())
        text = f"⏰ {who}: an approval request in this thread expires at {at}; unanswered, it is denied."
        self._outbox.post(where.channel, text=text, thread=where.thread, priority=10, run_id=request.run_id)

    async def _remember(self, request: ApprovalRequest, channel: str, ref: MessageRef) -> None:
        try:
            ts = await ref.ts()
        except OutboxError:  # a give-up is handled by `_on_give_up`; a shutdown keeps the post for later
            if self._messages.get(request.id) is ref:  # (or another process saved it first)
                del self._messages[request.id]  # its outcome is written where the store says
            return
        finally:
            self._asks.pop(ref.marker or "", None)
        await self._store.record_approval_message(request.id, channel, ts)

    async def post_unseen(self, *, min_age: float = 10.0) -> int:
        """Post the pending asks Slack was never given; returns how many it posted.

        An ask is stored before its post is saved, so a process that died between the two left a
        request no one can see, and its run parked on it until the deadline. Start-up and then every
        sweep find such asks (older than `min_age` seconds, so not one a live process is saving) and
        post them; the post's key makes it one message whoever posts it. An ask whose post was sent
        but never recorded (a restart before its ts came back) gets its message recorded instead.
        """
        posted = 0
        now = self._clock()
        for request in await self.service.pending():
            where = slack_conversation(request)
            if where is None or request.id in self._messages:
                continue
            if now - request.created_at.timestamp() < min_age:
                continue
            if await self._store.approval_message(request.id) is not None:
                continue
            row = await self._outbox.saved_post(ask_key(request.id))
            if row is None:
                log.warning("approval %s of run %s was never posted: posting it", request.id, request.run_id)
                self._post(request)
                posted += 1
            elif row.ts is not None:
                await self._store.record_approval_message(request.id, row.channel, row.ts)
            elif row.status == "failed":  # its give-up went unheard (another process's post)
                await self._post_failed(request, where.channel, "the outbox gave up")
        return posted

    async def watch_unseen(self, stop: asyncio.Event, *, interval: float = 30.0) -> None:
        """`post_unseen` now and every `interval` seconds until `stop` is set (failures are logged)."""
        while not stop.is_set():
            try:
                await self.post_unseen()
            except SQLAlchemyError as exc:  # the database is away: one line, not a traceback a sweep
                log.warning("finding unposted asks: %s; trying again in %.0f s", type(exc).__name__, interval)
            except Exception:
                log.exception("finding unposted asks failed; trying again in %.0f s", interval)
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval)
            except TimeoutError:
                continue

    def _on_give_up(self, event: GiveUp) -> None:
        """The outbox retried an ask's post and gave up: nobody can see it, so do not wait for anyone."""
        request = self._asks.pop(event.post_id, None)
        if request is not None:
            self._spawn(self._post_failed(request, event.channel, event.error))
        elif event.post_id.startswith(_ASK_PREFIX):  # a post saved by an earlier process
            self._spawn(self._give_up_stored(event.post_id.removeprefix(_ASK_PREFIX), event))

    async def _give_up_stored(self, request_id: str, event: GiveUp) -> None:
        request = await self.service.get(request_id)
        if request is not None and request.status == "pending":
            await self._post_failed(request, event.channel, event.error)

    async def _post_failed(self, request: ApprovalRequest, channel: str, error: str | None) -> None:
        """Deny now (not at the deadline) an ask Slack never showed, and say so in the thread if it can."""
        self._messages.pop(request.id, None)
        why = f"the approval request could not be posted in Slack ({error or 'the outbox gave up'})"
        log.error("approval %s of run %s: %s", request.id, request.run_id, why)
        # Cancelling is audited with the reason and tells the waiting agent it was denied.
        await self.service.cancel_run(request.run_id, why)
        where = slack_conversation(request)
        text = post_failed_text(request.agent_id, error)
        self._outbox.post(
            channel,
            text=text,
            thread=None if where is None else where.thread,
            priority=10,
            run_id=request.run_id,
        )

    def _rewrite(
        self, request: ApprovalRequest, text: str, blocks: list[dict[str, Any]], *, final: bool = True
    ) -> None:
        if slack_conversation(request) is None:
            return
        if self._dms is not None:
            self._spawn(self._dms.rewrite(request.id, text, blocks))
        ref = self._messages.pop(request.id, None) if final else self._messages.get(request.id)
        if ref is not None:
            self._outbox.update(ref, text=text, blocks=blocks)
        else:  # posted by an earlier process: find the message in the store
            self._spawn(self._rewrite_stored(request.id, text, blocks))

    async def _rewrite_stored(self, request_id: str, text: str, blocks: list[dict[str, Any]]) -> None:
        where = await self._store.approval_message(request_id)
        if where is None:  # sent, but its ts was never recorded (a restart meanwhile)
            row = await self._outbox.saved_post(ask_key(request_id))
            where = None if row is None or row.ts is None else (row.channel, row.ts)
        if where is not None:
            self._outbox.update(MessageRef.existing(where[0], where[1]), text=text, blocks=blocks)

    def show_reason(self, request: ApprovalRequest, reason: str) -> None:
        """Rewrite a denied request's message with the reason its denier gave afterwards."""
        view = replace(approval_view(request), decision_reason=reason)
        self._rewrite(request, *approval_decided_blocks(view, now=self._clock()))


_ASK_PREFIX = "ask:"


def ask_key(request_id: str) -> str:
    """The outbox key of an ask's post: one message per request, whichever process posts it."""
    return _ASK_PREFIX + request_id


def _approver_ids(request: ApprovalRequest) -> list[str]:
    """Who to mention: listed users, minus the requester unless they may approve their own request."""
    approvers = request.approvers
    return sorted(
        u
        for u in approvers.users
        if is_user_id(u) and (u != request.requester_id or approvers.allow_self_approval)
    )
