"""Which workspaces the bot serves: payloads from users of any other team or org are refused.

In a Slack Connect channel people of another company can use the bot; without this check they
could start runs that spend this company's budget and run its tools (issue 9, item 5). The allowed
ids come from `SLACK_ALLOWED_TEAM_IDS` (team `T…` and/or Enterprise Grid org `E…` ids), by default
the bot token's own team and org (`auth.test`). The user's own team is read from the most specific
field a payload carries: `user.team_id` (interactions; the org id on Grid), `event.user_team`
(events in shared channels), else the payload's `team_id`/`team.id` and `enterprise_id`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

REFUSED = (
    "This MassGen bot serves its own workspace only, so it does not take requests from users of "
    "other organisations (for example in a Slack Connect channel). Ask someone of the host workspace."
)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def user_team(body: Mapping[str, Any]) -> str | None:
    """The team (or Grid org) of the person behind a payload, when the payload says so."""
    user = body.get("user")
    if isinstance(user, Mapping) and (team := _text(user.get("team_id"))):
        return team
    event = body.get("event")
    if isinstance(event, Mapping):
        return _text(event.get("user_team")) or _text(event.get("team"))
    return _text(body.get("user_team"))


def payload_teams(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The payload's workspace and org ids (`team_id`/`team.id`, `enterprise_id`/`enterprise.id`)."""
    team = body.get("team")
    team_id = _text(team.get("id")) if isinstance(team, Mapping) else _text(body.get("team_id"))
    org = body.get("enterprise")
    enterprise = _text(org.get("id")) if isinstance(org, Mapping) else _text(body.get("enterprise_id"))
    return team_id, enterprise


@dataclass(frozen=True, slots=True)
class Workspaces:
    """The team and org ids the bot serves; empty means unknown (auth.test failed, nothing set)."""

    allowed: frozenset[str]

    @classmethod
    def of(cls, setting: str, identity: Mapping[str, str]) -> Workspaces:
        """From `SLACK_ALLOWED_TEAM_IDS` (comma or space separated), else the token's team and org."""
        ids = frozenset(part for part in setting.replace(",", " ").split() if part)
        if not ids:
            ids = frozenset(identity[k] for k in ("team_id", "enterprise_id") if identity.get(k))
        if not ids:
            log.warning("no allowed workspace known (auth.test failed, SLACK_ALLOWED_TEAM_IDS unset)")
        return cls(ids)

    def admits(self, body: Mapping[str, Any]) -> bool:
        """Whether the person behind `body` belongs to a served team or org."""
        if not self.allowed:
            return True  # nothing to compare with: warned at start-up
        person = user_team(body)
        if person is not None and person in self.allowed:
            return True
        team, enterprise = payload_teams(body)
        if person is not None and person != team:
            return False  # a user of another team in our conversation (Slack Connect)
        shared = body.get("is_ext_shared_channel") is True
        return (team in self.allowed) or (enterprise in self.allowed and not shared)
