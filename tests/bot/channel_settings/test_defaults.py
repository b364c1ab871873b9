"""A channel's defaults against the configured names: what a run uses, or a one-line refusal."""

from __future__ import annotations

import pytest

from bot.channel_settings import ChannelDefaults, Choices, Selection, repository_names, select
from bot.slack.parse import StartRun
from orchestrator import TeamConfig, default_team
from orchestrator.repos import RepositoryConfig

CHOICES = Choices(repositories=("billing", "web"), teams=("infra", "present"))
SAVED = ChannelDefaults(repository="billing", team="infra", policy="human", approvers=("U0LEAD",))


@pytest.mark.parametrize(
    ("asked", "saved", "repo", "team", "policy", "sources"),
    [
        (StartRun(task="t"), None, None, None, None, ("none", "none", "none")),
        (StartRun(task="t"), SAVED, "billing", "infra", "human", ("channel", "channel", "channel")),
        (
            StartRun(task="t", repo="web", team="present", policy="deny-all"),
            SAVED,
            "web",
            "present",
            "deny-all",
            ("asked", "asked", "asked"),
        ),
        (StartRun(task="t", repo="web"), SAVED, "web", "infra", "human", ("asked", "channel", "channel")),
    ],
)
def test_the_request_wins_then_the_channel_default_then_the_team_file(
    asked: StartRun,
    saved: ChannelDefaults | None,
    repo: str | None,
    team: str | None,
    policy: str | None,
    sources: tuple[str, str, str],
) -> None:
    result = select(asked, saved, CHOICES)
    assert not isinstance(result, str)
    filled, selection = result
    assert (filled.repo, filled.team, filled.policy, filled.task) == (repo, team, policy, "t")
    assert (selection.repository_from, selection.team_from, selection.policy_from) == sources
    assert selection.repository == repo


@pytest.mark.parametrize(
    ("asked", "saved", "expected"),
    [
        (StartRun(task="t", repo="nope"), None, "Unknown repository `nope`. You may use: `billing`, `web`."),
        (
            StartRun(task="t"),
            ChannelDefaults(repository="gone"),
            "Unknown repository (this channel's default) `gone`. You may use: `billing`, `web`.",
        ),
        (
            StartRun(task="t"),
            ChannelDefaults(team="old"),
            "Unknown team (this channel's default) `old`. You may use: `infra`, `present`.",
        ),
    ],
)
def test_an_unknown_name_is_one_line_listing_the_names_allowed(
    asked: StartRun, saved: ChannelDefaults | None, expected: str
) -> None:
    assert select(asked, saved, CHOICES) == expected
    assert "\n" not in expected


def test_no_repositories_configured_says_so() -> None:
    refusal = select(StartRun(task="t", repo="billing"), None, Choices())
    assert refusal == "Unknown repository `billing`. You may use: none are configured."


def test_channel_approvers_join_the_team_files_and_survive_the_engines_payload() -> None:
    team = default_team()
    team = team.model_copy(
        update={
            "approvals": team.approvals.model_copy(
                update={"approvers": ["U0OPS"], "approver_groups": ["S0A"]}
            )
        }
    )
    selection = Selection(
        repository="billing", repository_from="channel", approvers=("U0LEAD", "U0OPS"), approver_group="S0B"
    )
    again = Selection.of(selection.payload())
    assert again == selection
    applied = selection.apply(team)
    assert applied.approvals.approvers == ["U0OPS", "U0LEAD"]
    assert applied.approvals.approver_groups == ["S0A", "S0B"]
    assert Selection().apply(team) is team
    assert Selection.of(None) is None


def test_the_status_line_names_what_came_from_the_channel() -> None:
    selection = Selection(repository="billing", repository_from="channel", policy_from="asked")
    line = selection.line(team=None, policy="human")
    assert line == "repo `billing` (channel default) · team default · policy `human`"
    assert Selection(team_from="channel").line(team="infra", policy="risk-based") == (
        "no repo · team `infra` (channel default) · policy `risk-based`"
    )


def test_repository_names_reads_the_repositories_section_sorted() -> None:
    repos = [RepositoryConfig(name=n, url=f"file:///srv/{n}.git") for n in ("web", "billing")]
    team = TeamConfig(agents=default_team().agents, repositories=repos)
    assert repository_names(team) == ("billing", "web")
    assert repository_names(default_team()) == ()
