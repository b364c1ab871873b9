"""Replies only the asker sees: through the payload's `response_url`, else `chat.postEphemeral`.

`chat.postEphemeral` fails in DMs, in private channels and in channels the bot is not in (Slack
answers `channel_not_found` / `not_in_channel`), so a reply sent that way vanished there. A slash
command's or a message button's `response_url` works in every conversation (5 uses within 30 minutes,
docs.slack.dev/interactivity/handling-user-interaction#message_responses); the ephemeral is the
fallback for payloads without one (mentions, App Home clicks) and for a spent or expired URL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.errors import OutboxError, store_down

if TYPE_CHECKING:
    from bot.wiring import Services

log = logging.getLogger(__name__)

STORE_DOWN = store_down()
TRY_AGAIN = (
    "I could not record that: my database is not answering right now, so nothing was done. "
    "Please try again in a minute."
)
WAITING = (
    "My database is not answering right now, so that is waiting: it goes through once the database "
    "is back (the message shows it then)."
)
SLOW = 5.0  # seconds after which a request still at work, with the database away, is explained


async def tell(
    services: Services,
    *,
    user: str,
    channel: str | None,
    text: str,
    response_url: str | None = None,
    thread_ts: str | None = None,
) -> bool:
    """Show `text` to `user` only; False (logged) when neither way reached them."""
    if response_url:
        try:
            response = await AsyncRespond(response_url=response_url)(
                text=text, response_type="ephemeral", replace_original=False
            )
            if response.status_code == 200:
                return True
            log.info("response_url refused a reply (%s %s)", response.status_code, response.body)
        except Exception as exc:  # a dead URL falls back to the ephemeral
            log.info("response_url failed: %s", exc)
    if not channel:
        return False
    try:
        await services.outbox.ephemeral(channel, user, text=text, thread_ts=thread_ts)
    except OutboxError as exc:
        log.warning("could not reply to %s in %s: %s", user, channel, exc.error or exc)
        return False
    return True


def response_url(payload: dict[str, object]) -> str | None:
    """The payload's `response_url` (from the signed request), if it has one."""
    url = payload.get("response_url")
    return url if isinstance(url, str) and url else None


async def answered(
    services: Services,
    work: Awaitable[object],
    *,
    user: str | None,
    channel: str | None,
    response_url: str | None = None,
    thread_ts: str | None = None,
) -> None:
    """Do `work` (a command, a click, a mention); if the database is away, say "try again", never
    nothing: Slack got its ack at once, so silence would read as done."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=SLOW)
        if not done and user and await services.storage.ping(within=1.0) is not None:
            # Waiting on the database (a run's event is retried until it is stored): say so now.
            await tell(services, user=user, channel=channel, text=WAITING,
                       response_url=response_url, thread_ts=thread_ts)  # fmt: skip
        await task
    except Exception as exc:
        # Whatever a library wrapped the failure in (the engine's own errors), a database that
        # does not answer now means the same to the user.
        if not isinstance(exc, STORE_DOWN) and await services.storage.ping(within=1.0) is None:
            raise
        log.warning("a request met the database away (%s: %s); its user is told to try again",
                    type(exc).__name__, str(exc)[:200])  # fmt: skip
        if user:
            await tell(services, user=user, channel=channel, text=TRY_AGAIN,
                       response_url=response_url, thread_ts=thread_ts)  # fmt: skip
    finally:
        if not task.done():  # cancelled (a shutdown): the work goes with it
            task.cancel()
