"""Repositories by name: the bot's mirrors, trusted git, publishing a run's patch as a pull request.

`bind_repository` prepares a run on a named repository (mirror fetched, base commit checked out,
the team pointed at it); the run's apply step then publishes through `plan_publish`/`publish`,
behind one approval bound to the diff. Every git step here is `run_git`: trusted code on trusted
state, never an agent's `.git`, hooks or config.
"""

from orchestrator.config.repos import RepoBinding, RepositoryConfig, UnknownRepository
from orchestrator.repos.bind import (
    PUSH_RULES,
    RepositoryError,
    bind_repository,
    bound_team,
    branch_for,
    rebind,
    resolve_repository,
)
from orchestrator.repos.forge import Credentials, ForgeError, OpenedRequest, open_request
from orchestrator.repos.mirror import RepoCache
from orchestrator.repos.publish import PUBLISH_TOOL, PublishPlan, plan_publish, publish
from orchestrator.repos.sensitive import diff_stat, sensitive_paths, stat_text
from orchestrator.repos.trusted_git import BOT, GitError, Identity, requester_identity, run_git, trusted_env

__all__ = [
    "BOT",
    "PUBLISH_TOOL",
    "PUSH_RULES",
    "Credentials",
    "ForgeError",
    "GitError",
    "Identity",
    "OpenedRequest",
    "PublishPlan",
    "RepoBinding",
    "RepoCache",
    "RepositoryConfig",
    "RepositoryError",
    "UnknownRepository",
    "bind_repository",
    "bound_team",
    "branch_for",
    "diff_stat",
    "open_request",
    "plan_publish",
    "publish",
    "rebind",
    "requester_identity",
    "resolve_repository",
    "run_git",
    "sensitive_paths",
    "stat_text",
    "trusted_env",
]
