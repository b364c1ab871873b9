"""Exceptions of the `approvals` package: one root, misuse separate from runtime failures."""

from __future__ import annotations


class ApprovalsError(Exception):
    """Root of every error raised by the `approvals` package."""


class ApprovalMisuseError(ApprovalsError):
    """The caller broke a precondition (a bad timeout, an empty approver set, a non-ask decision)."""


class ApprovalNotFoundError(ApprovalsError):
    """No approval request has this id."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"no approval request {request_id!r}")
        self.request_id = request_id


class StoreError(ApprovalsError):
    """The approval store could not complete an operation (database down, corrupt row)."""


class HandshakeError(ApprovalsError):
    """The file handshake directory is unusable (not a directory, a symlink, wrong owner)."""
