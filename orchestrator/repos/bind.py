"""A run on a named repository: fetch its mirror, pick the base commit, point the workspaces at it.

`bind_repository` is what a surface (the CLI, the Slack side) calls once per run, before the run
starts: it resolves the name against the team's `repositories:` (a one-line error listing the
names otherwise), fetches the mirror, takes the default branch's head (or, for a follow-up, the
head of the previous run's branch), checks that commit's files out once, and returns the team with
`workspace.source` on those files, `workspace.apply: ask` (the apply step publishes) and the
binding that the publish and the approval read. Agents cannot push themselves: `git push` is
denied by a rule; the run's result is published by trusted code behind one approval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.config.repos import RepoBinding, RepositoryConfig, find_repository
from orchestrator.config.team import TeamConfig
from orchestrator.errors import OrchestratorError
from orchestrator.repos.forge import Credentials
from orchestrator.repos.mirror import RepoCache

# Agents never push: the final phase publishes through trusted code instead (issue 16, item 2).
PUSH_RULES = ("command(git push *)", "command(git push)")
_BRANCH_ID = re.compile(r"[^A-Za-z0-9_.-]")


class RepositoryError(OrchestratorError):
    """A run's repository could not be prepared (fetch failed, branch missing...)."""


def branch_for(run_id: str) -> str:
    """The branch a run's result is pushed to: `massgen/<run id>` (characters git refuses replaced)."""
    name = _BRANCH_ID.sub("-", run_id)
    while ".." in name:  # git refuses `..` in a ref name
        name = name.replace("..", ".")
    name = name[:100].strip(".-").removesuffix(".lock") or "run"
    return f"massgen/{name}"


def resolve_repository(team: TeamConfig, name: str) -> RepositoryConfig:
    """The team's repository called `name`; `UnknownRepository` (one line, the allowed names) if none."""
    return find_repository(team.repositories, name.strip())


def bind_repository(
    team: TeamConfig,
    cache: RepoCache,
    name: str,
    run_id: str,
    *,
    follow_up_branch: str | None = None,
    credentials: Credentials | None = None,
) -> TeamConfig:
    """The team for one run on repository `name` (blocking: call it in a thread from async code)."""
    repository = resolve_repository(team, name)
    credentials = credentials or Credentials()
    mirror = cache.fetch(repository, credentials.git_auth(repository))
    if follow_up_branch is not None:
        branch = follow_up_branch
        base = cache.head(repository, branch)
        if base is None:
            raise RepositoryError(f"repository {repository.name} has no branch {branch} to follow up on")
    else:
        branch = branch_for(run_id)
        base = cache.head(repository, repository.default_branch)
        if base is None:
            raise RepositoryError(
                f"repository {repository.name} has no branch {repository.default_branch} (default_branch)"
            )
    tree = cache.tree(repository, base)
    binding = RepoBinding(
        repository=repository, mirror=mirror, base=base, branch=branch, follow_up=follow_up_branch is not None
    )
    return bound_team(team, binding, tree)


def rebind(team: TeamConfig, cache: RepoCache, binding: RepoBinding) -> TeamConfig:
    """A stored run's team with the binding it started with (its base tree checked out again if gone)."""
    return bound_team(team, binding, cache.tree(binding.repository, binding.base))


def bound_team(team: TeamConfig, binding: RepoBinding, tree: Path) -> TeamConfig:
    """The team with its workspaces on `tree`, the apply step publishing, and `git push` denied."""
    workspace = team.workspace.model_copy(update={"source": tree, "apply": "ask", "repository": binding})
    rules: dict[str, list[Any]] = {key: list(value) for key, value in team.permissions.rules.items()}
    deny = rules.get("deny", [])
    rules["deny"] = [*deny, *(rule for rule in PUSH_RULES if rule not in deny)]
    permissions = team.permissions.model_copy(update={"rules": rules})
    return team.model_copy(update={"workspace": workspace, "permissions": permissions})
