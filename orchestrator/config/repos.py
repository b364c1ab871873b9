"""The team file's `repositories:` section: repositories a run may take by name, and how to reach them.

```yaml
repositories:
  - name: billing
    url: https://github.com/acme/billing.git
    default_branch: main
    forge: github            # github | gitlab | none (push only)
    api_url: https://api.github.com
    credentials: {token_env: BILLING_TOKEN}
    # or a GitHub App: {app_id: 12345, private_key_file: keys/app.pem, installation_id: 678}
```
Secrets never sit in the file: a token is named by its environment variable, an App by its key file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.errors import OrchestratorError

Forge = Literal["github", "gitlab", "none"]
_DEFAULT_API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RepoCredentials(_Model):
    """A token in an environment variable, or a GitHub App (id + private key file → installation token)."""

    token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    app_id: int | None = Field(default=None, ge=1)
    private_key_file: Path | None = None
    installation_id: int | None = Field(default=None, ge=1)  # None: looked up for the repository

    @model_validator(mode="after")
    def _one_kind(self) -> RepoCredentials:
        app = self.app_id is not None or self.private_key_file is not None
        if app and (self.app_id is None or self.private_key_file is None):
            raise ValueError("a GitHub App needs both app_id and private_key_file")
        if app and self.token_env is not None:
            raise ValueError("give either token_env or a GitHub App (app_id, private_key_file), not both")
        return self

    @property
    def github_app(self) -> bool:
        """Whether these are GitHub App credentials."""
        return self.app_id is not None


class RepositoryConfig(_Model):
    """One `repositories:` entry."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    url: str = Field(min_length=1)  # clone URL: https://…, ssh://…, file://… (tests, the playground)
    default_branch: str = Field(default="main", pattern=r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")
    forge: Forge = "github"
    api_url: str | None = None  # None: the public forge's; set for GitHub Enterprise, self-hosted GitLab
    # The forge's name of the repository (`owner/name` on GitHub, the path or numeric id on GitLab);
    # None: read from `url`.
    project: str | None = None
    credentials: RepoCredentials = Field(default_factory=RepoCredentials)

    @model_validator(mode="after")
    def _checked(self) -> RepositoryConfig:
        if self.url.startswith(("ext::", "fd::", "-")) or "\n" in self.url:
            raise ValueError(f"unsupported repository url {self.url!r}")
        if self.credentials.github_app and self.forge != "github":
            raise ValueError("GitHub App credentials need forge: github")
        if ".." in self.default_branch or self.default_branch.endswith((".lock", "/")):
            raise ValueError(f"not a branch name: {self.default_branch!r}")
        return self

    @property
    def api(self) -> str | None:
        """The forge's REST base URL (None for `forge: none`)."""
        if self.forge == "none":
            return None
        return (self.api_url or _DEFAULT_API[self.forge]).rstrip("/")

    @property
    def project_path(self) -> str:
        """`owner/name` (GitHub) or the project path (GitLab), from `project` or the URL."""
        if self.project:
            return self.project
        url = self.url.rstrip("/").removesuffix(".git")
        path = url.split("://", 1)[1].partition("/")[2] if "://" in url else url.partition(":")[2]
        parts = [p for p in path.split("/") if p]
        return "/".join(parts[-2:] if self.forge == "github" else parts)


class RepoBinding(_Model):
    """A run's repository, bound at its start: the entry, the bot's mirror, the base commit, the branch.

    Set by the composition root (`orchestrator.repos.bind_repository`), never by the team file.
    """

    repository: RepositoryConfig
    mirror: Path  # the bare mirror under the bot's state folder (trusted state)
    base: str = Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # the commit the agents started from
    branch: str = Field(pattern=r"^massgen/[A-Za-z0-9_.-]{1,100}$")  # where the result is pushed
    follow_up: bool = False  # the branch exists already (a follow-up run): push on top, same PR

    @model_validator(mode="after")
    def _ref_name(self) -> RepoBinding:
        if ".." in self.branch or self.branch.endswith((".", ".lock")):
            raise ValueError(f"not a branch name: {self.branch!r}")
        return self


class UnknownRepository(OrchestratorError):
    """A run named a repository the team file does not list; the message lists those it does."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        allowed = ", ".join(known) if known else "none are configured (add a `repositories:` section)"
        super().__init__(f"unknown repository {name!r}; you may use: {allowed}")
        self.name = name
        self.known = known


def find_repository(repositories: Sequence[RepositoryConfig], name: str) -> RepositoryConfig:
    """The entry called `name` (exact); `UnknownRepository` (one line listing the names) otherwise."""
    for repository in repositories:
        if repository.name == name:
            return repository
    raise UnknownRepository(name, tuple(sorted(r.name for r in repositories)))


def unique_names(repositories: list[RepositoryConfig]) -> list[RepositoryConfig]:
    """Validator helper: two entries never share a name."""
    seen: set[str] = set()
    for repository in repositories:
        if repository.name in seen:
            raise ValueError(f"duplicate repository name {repository.name!r}")
        seen.add(repository.name)
    return repositories


def with_key_files(repositories: Sequence[RepositoryConfig], base_dir: Path) -> list[RepositoryConfig]:
    """A relative `private_key_file` is relative to the team file's folder."""
    out = []
    for repository in repositories:
        key = repository.credentials.private_key_file
        if key is not None and not key.is_absolute():
            credentials = repository.credentials.model_copy(update={"private_key_file": base_dir / key})
            repository = repository.model_copy(update={"credentials": credentials})
        out.append(repository)
    return out
