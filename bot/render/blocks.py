"""Every Block Kit builder the bot uses, in one import (see the modules for each surface).

Run messages: `status_blocks`, `answer_blocks`, `vote_blocks`, `vote_ignored_blocks`,
`restart_blocks`, `agent_failed_blocks`, `tool_batch_blocks`, `final_answer_messages`.
Approvals: `ApprovalView`, `approval_request_blocks`, `approval_decided_blocks`,
`approval_expired_blocks`, `approval_details_modal`, `deny_reason_modal`.
Other surfaces: `answer_modal`, `home_view`, `help_text`. Action and callback ids: `bot.render.ids`.
"""

from __future__ import annotations

from bot.render.approval_blocks import (
    ApprovalView,
    approval_decided_blocks,
    approval_details_modal,
    approval_expired_blocks,
    approval_request_blocks,
    approver_mentions,
    deny_reason_modal,
)
from bot.render.run_blocks import (
    agent_failed_blocks,
    answer_blocks,
    final_answer_messages,
    restart_blocks,
    status_blocks,
    tool_batch_blocks,
    vote_blocks,
    vote_ignored_blocks,
)
from bot.render.views import RunSummary, answer_modal, help_text, home_view

__all__ = [
    "ApprovalView",
    "RunSummary",
    "agent_failed_blocks",
    "answer_blocks",
    "answer_modal",
    "approval_decided_blocks",
    "approval_details_modal",
    "approval_expired_blocks",
    "approval_request_blocks",
    "approver_mentions",
    "deny_reason_modal",
    "final_answer_messages",
    "help_text",
    "home_view",
    "restart_blocks",
    "status_blocks",
    "tool_batch_blocks",
    "vote_blocks",
    "vote_ignored_blocks",
]
