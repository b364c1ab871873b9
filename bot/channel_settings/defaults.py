"""A channel's defaults and what one run uses: the repository, team and policy, asked for or defaulted.

Pure: `select(parsed, defaults, choices)` resolves a `/massgen` request against the channel's saved
defaults and the configured names, or says in one line why not. Approvers saved for the channel
*extend* the team file's (`Selection.apply`): the operator's approvers always keep their say, and a
channel adds its own people or user group. Overriding would let a channel's settings silence the
approvers the operator named for the team, which is the wrong way to fail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from bot.render.escape import code
from bot.slack.parse import POLICIES, StartRun
from orchestrator import TeamConfig

Source = Literal["asked", "channel", "none"]
MAX_APPROVERS: Final = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelDefaults:
    """What a channel saved (every field optional: unset means the team file's own default)."""

    repository: str | None = None
    team: str | None = None
    policy: str | None = None
    approvers: tuple[str, ...] = ()
    approver_group: str | None = None

    def fields(self) -> dict[str, str | None]:
        """Each setting as text, for the audit trail (approvers comma separated)."""
        return {
            "repository": self.repository,
            "team": self.team,
            "policy": self.policy,
            "approvers": ",".join(self.approvers) or None,
            "approver_group": self.approver_group,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Choices:
    """The names a user may pick: configured repositories, named teams, policies."""

    repositories: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()
    policies: tuple[str, ...] = POLICIES


def repository_names(config: TeamConfig) -> tuple[str, ...]:
    """The repository names `--repo` accepts, from the team file's `repositories:` section, sorted."""
    return tuple(sorted({repo.name for repo in config.repositories}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What one run uses and where each came from; travels with the run (plain data, no secrets)."""

    repository: str | None = None
    repository_from: Source = "none"
    team_from: Source = "none"
    policy_from: Source = "none"
    approvers: tuple[str, ...] = ()  # added to the team file's approvers
    approver_group: str | None = None  # added to the team file's approver groups

    def payload(self) -> dict[str, Any]:
        """Plain data for the engine's database."""
        return {
            "repository": self.repository,
            "repository_from": self.repository_from,
            "team_from": self.team_from,
            "policy_from": self.policy_from,
            "approvers": list(self.approvers),
            "approver_group": self.approver_group,
        }

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Selection | None:
        """The selection back from `payload()` (None: the run predates selections)."""
        if not data:
            return None
        return cls(
            repository=data.get("repository"),
            repository_from=data.get("repository_from", "none"),
            team_from=data.get("team_from", "none"),
            policy_from=data.get("policy_from", "none"),
            approvers=tuple(data.get("approvers") or ()),
            approver_group=data.get("approver_group"),
        )

    def apply(self, team: TeamConfig) -> TeamConfig:
        """The team with the channel's approvers and group added to its own."""
        if not self.approvers and not self.approver_group:
            return team
        approvals = team.approvals
        users = list(dict.fromkeys([*approvals.approvers, *self.approvers]))
        groups = list(approvals.approver_groups)
        if self.approver_group and self.approver_group not in groups:
            groups.append(self.approver_group)
        update = {"approvers": users, "approver_groups": groups}
        return team.model_copy(update={"approvals": approvals.model_copy(update=update)})

    def line(self, *, team: str | None, policy: str) -> str:
        """ "repo `billing` (channel default) · team default · policy human": what the run used."""
        repo = f"repo {code(self.repository, 64)}" if self.repository else "no repo"
        who = "team default" if team is None else f"team {code(team, 64)}"
        return " · ".join(
            (
                repo + _from(self.repository_from),
                who + _from(self.team_from),
                f"policy {code(policy, 32)}" + _from(self.policy_from),
            )
        )


def _from(source: Source) -> str:
    return " (channel default)" if source == "channel" else ""


def _source(asked: object, default: object) -> Source:
    if asked is not None:
        return "asked"
    return "channel" if default is not None else "none"


def unknown(kind: str, name: str, allowed: Sequence[str]) -> str:
    """The one-line refusal of an unknown name, listing the names the user may use."""
    names = ", ".join(code(n, 64) for n in allowed) if allowed else "none are configured"
    return f"Unknown {kind} {code(name, 64)}. You may use: {names}."


def select(
    parsed: StartRun, defaults: ChannelDefaults | None, choices: Choices
) -> tuple[StartRun, Selection] | str:
    """The request with the channel's defaults filled in, and what was used; or a one-line refusal."""
    saved = defaults or ChannelDefaults()
    repo = parsed.repo if parsed.repo is not None else saved.repository
    if repo is not None and repo not in choices.repositories:
        kind = "repository" if parsed.repo is not None else "repository (this channel's default)"
        return unknown(kind, repo, choices.repositories)
    team = parsed.team if parsed.team is not None else saved.team
    if parsed.team is None and team is not None and team not in choices.teams:
        return unknown("team (this channel's default)", team, choices.teams)
    policy = parsed.policy if parsed.policy is not None else saved.policy
    if policy is not None and policy not in choices.policies:
        return unknown("policy", policy, choices.policies)
    filled = dataclasses.replace(parsed, repo=repo, team=team, policy=policy)
    selection = Selection(
        repository=repo,
        repository_from=_source(parsed.repo, saved.repository),
        team_from=_source(parsed.team, saved.team),
        policy_from=_source(parsed.policy, saved.policy),
        approvers=saved.approvers,
        approver_group=saved.approver_group,
    )
    return filled, selection
