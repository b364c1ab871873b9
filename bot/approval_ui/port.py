"""The orchestrator's approval port for one Slack run: every ask carries the run's channel and thread."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from approvals import ApprovalRequest, ApprovalService, Approvers, AuditEntry
from approvals.permissions import Action, Decision
from bot.slack.outbox import MessageRef

CONTEXT_CHANNEL = "slack_channel"
CONTEXT_THREAD = "slack_thread_ts"


@dataclass(frozen=True, slots=True)
class ThreadApprovalPort:
    """The orchestrator's `ApprovalPort` for one run: adds the run's Slack thread to the context."""

    service: ApprovalService
    channel: str
    thread: MessageRef | str

    async def always_rules(self) -> list[str]:
        """Allow rules persisted by earlier "always" approvals (the run's engine adds them)."""
        return await self.service.always_rules()

    async def request(
        self,
        *,
        run_id: str,
        agent_id: str,
        requester_id: str | None,
        action: Action,
        digest: str,
        decision: Decision,
        approvers: Approvers,
        timeout: timedelta,  # noqa: ASYNC109 - the request's lifetime (the port's signature)
        context: Mapping[str, str] | None = None,
    ) -> ApprovalRequest:
        """`ApprovalService.request` with the run's channel and thread ts added to the context."""
        thread_ts = self.thread if isinstance(self.thread, str) else await self.thread.ts()
        merged = {**(context or {}), CONTEXT_CHANNEL: self.channel, CONTEXT_THREAD: thread_ts}
        return await self.service.request(
            run_id=run_id,
            agent_id=agent_id,
            requester_id=requester_id,
            action=action,
            digest=digest,
            decision=decision,
            approvers=approvers,
            timeout=timeout,
            context=merged,
        )

    async def wait(self, request_id: str) -> ApprovalRequest:
        return await self.service.wait(request_id)

    async def record_decision(self, entry: AuditEntry) -> None:
        await self.service.record_decision(entry)
