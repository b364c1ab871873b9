"""An approval in Slack: the port that asks, the presenter that shows, the use cases that decide."""

from bot.approval_ui.pending import pending_for
from bot.approval_ui.port import ThreadApprovalPort
from bot.approval_ui.presenter import ApprovalsUI
from bot.approval_ui.use_cases import ApprovalUseCases

__all__ = [
    "ApprovalUseCases",
    "ApprovalsUI",
    "ThreadApprovalPort",
    "pending_for",
]
