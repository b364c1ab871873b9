"""What starts a run from Slack: the request, plain data for the engine, and the run's id.

The front end (`RunSubmitter`) makes one from a command or a mention and submits its `payload()`;
a worker rebuilds it with `RunRequest.of` and the team catalog of its own process (no secrets
travel through the engine's database).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from bot.channel_settings import Selection
from bot.ops import bound_request
from bot.runs.teams import TeamCatalog, TeamChoice
from bot.slack.parse import StartRun


def run_id_for(delivery: str | None) -> str:
    """A run's id: derived from Slack's delivery id (the same request delivered twice, to any front
    end, is one workflow and so one run), else random."""
    if delivery is None:
        return f"run-{secrets.token_hex(6)}"
    return f"run-{hashlib.sha256(delivery.encode()).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """A run to start from Slack."""

    choice: TeamChoice
    task: str
    requester: str
    channel: str
    thread_ts: str | None = None  # a follow-up posts into its parent's thread
    context: str | None = None  # the previous final answer, for a follow-up
    response_url: str | None = None  # a slash command's webhook: works where the bot cannot post
    parsed: StartRun | None = None  # what was asked for: a worker resolves the team from it again
    delivery: str | None = None  # Slack's id for the request: the run id derives from it
    request_id: str | None = None  # the id the request's log records carry (its run's carry it too)
    selection: Selection | None = None  # repository, defaults used, channel approvers (settings room)

    def payload(self) -> dict[str, Any]:
        """Plain data for the engine (pickled into its database: no secrets, so no team config)."""
        parsed = self.parsed
        return {
            "team": None if parsed is None else parsed.team,
            "agents": [] if parsed is None else list(parsed.agents),
            "policy": None if parsed is None else parsed.policy,
            "task": self.task,
            "requester": self.requester,
            "channel": self.channel,
            "thread_ts": self.thread_ts,
            "context": self.context,
            "response_url": self.response_url,
            "request_id": self.request_id or bound_request(),
            "selection": None if self.selection is None else self.selection.payload(),
        }

    def used(self) -> str:
        """What the status message says the run used ("repo `billing` (channel default) · …"), or ""."""
        if self.selection is None:
            return ""
        team = None if self.parsed is None else self.parsed.team
        return self.selection.line(team=team, policy=self.choice.team.permissions.policy)

    @classmethod
    def of(cls, payload: dict[str, Any], teams: TeamCatalog) -> RunRequest:
        """The request back from its payload, its team resolved from this process's catalog."""
        parsed = StartRun(
            task=str(payload["task"]),
            team=payload.get("team"),
            agents=tuple(payload.get("agents") or ()),
            policy=payload.get("policy"),
        )
        selection = Selection.of(payload.get("selection"))
        choice = teams.choose(parsed)
        if selection is not None:  # the channel's approvers, as when the run was asked for
            choice = TeamChoice(name=choice.name, team=selection.apply(choice.team))
        return cls(
            choice=choice,
            task=parsed.task,
            requester=str(payload["requester"]),
            channel=str(payload["channel"]),
            thread_ts=payload.get("thread_ts"),
            context=payload.get("context"),
            response_url=payload.get("response_url"),
            parsed=parsed,
            request_id=payload.get("request_id"),
            selection=selection,
        )


__all__ = ["RunRequest", "run_id_for"]
