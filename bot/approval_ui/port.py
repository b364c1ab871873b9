"""The orchestrator's approval port for one Slack run: every ask carries the run's channel and thread."""

from __future__ import annotations

from dataclasses import dataclass, replace

from approvals import ApprovalRequest, ApprovalService, Ask, AuditEntry, ConversationRef
from bot.slack.outbox import MessageRef

SURFACE = "slack"


def slack_conversation(request: ApprovalRequest) -> ConversationRef | None:
    """Where a request lives in Slack (None: a CLI or file-handshake request, nothing to show here)."""
    where = request.conversation
    return where if where is not None and where.surface == SURFACE and where.channel else None


@dataclass(frozen=True, slots=True)
class ThreadApprovalPort:
    """`orchestrator.ApprovalPort` for one run: each ask names the run's Slack channel and thread."""

    service: ApprovalService
    channel: str
    thread: MessageRef | str

    async def request(self, ask: Ask) -> ApprovalRequest:
        """`ApprovalService.request` with the run's conversation (its thread ts, once Slack gave it).

        A run resumed after a crash redoes the turn that was waiting: the same agent asking for the
        same call (same digest) joins the request still pending from before the crash, so its Slack
        message (whose buttons carry only its id) is the one a click decides, and nothing is posted
        twice.
        """
        for pending in await self.service.pending(run_id=ask.run_id):
            if pending.agent_id == ask.agent_id and pending.digest == ask.digest:
                return pending
        thread_ts = self.thread if isinstance(self.thread, str) else await self.thread.ts()
        where = ConversationRef(surface=SURFACE, channel=self.channel, thread=thread_ts)
        return await self.service.request(replace(ask, conversation=where))

    async def wait(self, request_id: str) -> ApprovalRequest:
        """The request once it is terminal."""
        return await self.service.wait(request_id)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request as stored now (a resumed run reads its decision here)."""
        return await self.service.get(request_id)

    async def cancel_run(self, run_id: str, reason: str) -> int:
        """Cancel the run's pending requests, saying why; their messages lose their buttons."""
        return await self.service.cancel_run(run_id, reason)

    async def always_rules(self) -> list[str]:
        """Allow rules persisted by earlier "always" approvals (the run's engine adds them)."""
        return await self.service.always_rules()

    async def record_decision(self, entry: AuditEntry) -> None:
        """Audit an allow or deny the engine took without asking anyone."""
        await self.service.record_decision(entry)
