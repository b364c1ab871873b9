"""Replies only the asker sees: through the payload's `response_url`, else `chat.postEphemeral`.

`chat.postEphemeral` fails in DMs, in private channels and in channels the bot is not in (Slack
answers `channel_not_found` / `not_in_channel`), so a reply sent that way vanished there. A slash
command's or a message button's `response_url` works in every conversation (5 uses within 30 minutes,
docs.slack.dev/interactivity/handling-user-interaction#message_responses); the ephemeral is the
fallback for payloads without one (mentions, App Home clicks) and for a spent or expired URL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.errors import OutboxError

if TYPE_CHECKING:
    from bot.wiring import Services

log = logging.getLogger(__name__)


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
