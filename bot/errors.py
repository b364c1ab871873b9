"""Exception root of the Slack adapter: every error `bot/` raises derives from `BotError`."""

from __future__ import annotations


class BotError(Exception):
    """Root of the Slack adapter's errors."""


class OutboxError(BotError):
    """A Slack call the outbox owns finally failed (or its outcome is unknown and was not retried)."""

    def __init__(self, message: str, *, method: str = "", error: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.error = error  # Slack's error code, e.g. "channel_not_found", when there was one


def store_down() -> tuple[type[BaseException], ...]:
    """What a request meets when the bot's database is away (stopped, full disk, read-only)."""
    from sqlalchemy.exc import SQLAlchemyError

    from approvals import StoreError
    from orchestrator import RunStoreError

    return (SQLAlchemyError, StoreError, RunStoreError, OSError)
