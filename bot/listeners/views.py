"""Modal submissions: the reason a denier may add after denying; a channel's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.channel_settings import ChannelDefaults
from bot.listeners.replies import tell
from bot.render import ids

if TYPE_CHECKING:
    from bot.wiring import Services

MAX_REASON = 500


def register(app: AsyncApp, services: Services) -> None:
    """Attach the view_submission listeners."""

    @app.view(ids.DENY_MODAL)
    async def deny_with_reason(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        await ack()
        request_id = str(view.get("private_metadata") or "")
        user = (body.get("user") or {}).get("id")
        if request_id and isinstance(user, str):
            reason = _reason(view)
            deny = services.approval_ui.submit_deny_reason(request_id, user, reason)
            services.tasks.spawn(deny, name="modal:deny")

    _register_settings(app, services)


def _register_settings(app: AsyncApp, services: Services) -> None:
    @app.view(ids.SETTINGS_MODAL)
    async def channel_settings(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """Checked against the configured names before the ack (pure), so Slack shows each error."""
        checked = services.channels.check((view.get("state") or {}).get("values") or {})
        if not isinstance(checked, ChannelDefaults):
            await ack(response_action="errors", errors=checked)
            return
        await ack()
        channel, user = str(view.get("private_metadata") or ""), (body.get("user") or {}).get("id")
        if isinstance(user, str):
            services.tasks.spawn(_save(services, channel, user, checked), name="modal:settings")


async def _save(services: Services, channel: str, user: str, new: ChannelDefaults) -> None:
    reply = await services.channels.save(channel, user, new)
    await tell(services, user=user, channel=channel or None, text=reply)


def _reason(view: dict[str, Any]) -> str | None:
    """The first text input's value, trimmed and capped (the agent is told it)."""
    values = (view.get("state") or {}).get("values") or {}
    for block in values.values():
        for element in block.values():
            text = element.get("value") if isinstance(element, dict) else None
            if isinstance(text, str) and text.strip():
                return text.strip()[:MAX_REASON]
    return None
