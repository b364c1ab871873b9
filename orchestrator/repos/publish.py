"""Publishing the winner's patch: one commit on `massgen/<run>`, one push, one pull request.

`plan_publish` is pure: what the approver sees and what the approval binds (`digest`, over the
repository, base commit, branch and the exact patch). `publish` runs only after the approval, as
trusted code on trusted state: the patch is applied to a private index built from the bot's mirror
(`git apply --cached`: no file of the patch is ever written to disk, no hook or config of the
agents' is ever read), committed with the requester as author and the bot as committer, pushed to
the remote without force, and the branch's pull request is found or opened on the forge.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from approvals.permissions import action_digest
from orchestrator.config.repos import RepoBinding
from orchestrator.events import PullRequest
from orchestrator.repos.forge import Credentials, open_request
from orchestrator.repos.sensitive import sensitive_paths, stat_text
from orchestrator.repos.trusted_git import BOT, Identity, run_git

PUBLISH_TOOL = "publish_pull_request"
_TITLE_CHARS = 72


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishPlan:
    """One publish, as approved: where, from which commit, exactly which patch."""

    binding: RepoBinding
    patch: str
    files: tuple[str, ...]
    title: str
    body: str
    author: Identity
    digest: str
    stat: str
    sensitive: tuple[str, ...]

    def context(self) -> dict[str, str]:
        """What the approval request carries (`ApprovalRequest.context`), the diff whole."""
        repo = self.binding.repository
        return {
            "repository": repo.name,
            "repository_url": repo.url,
            "branch": self.binding.branch,
            "base_commit": self.binding.base,
            "target_branch": repo.default_branch,
            "forge": repo.forge,
            "diff_stat": self.stat,
            "diff": self.patch,
            # The diff's own hash: Slack's "View diff" shows the bytes only if they match it.
            "diff_sha256": hashlib.sha256(self.patch.encode()).hexdigest(),
            "action_digest": self.digest,
            "files": ", ".join(self.files)[:2000],
            "sensitive_paths": ", ".join(self.sensitive),
            "title": self.title,
        }


def plan_publish(
    binding: RepoBinding, patch: str, files: tuple[str, ...], *, run_id: str, requester: str | None, task: str
) -> PublishPlan:
    """The publish of `patch` for a run (nothing runs: this is what the approver is shown)."""
    from orchestrator.repos.trusted_git import requester_identity

    first = " ".join(task.split())[: _TITLE_CHARS - len("massgen: ")] or run_id
    title = f"massgen: {first}"
    stat = stat_text(patch)
    body = f"Run `{run_id}`" + (f", asked by {requester}" if requester else "") + f".\n\n{stat}\n"
    digest = action_digest(
        PUBLISH_TOOL,
        {
            "repository": binding.repository.name,
            "url": binding.repository.url,
            "base": binding.base,
            "branch": binding.branch,
            "patch": patch,
        },
    )
    return PublishPlan(
        binding=binding,
        patch=patch,
        files=files,
        title=title,
        body=body,
        author=requester_identity(requester),
        digest=digest,
        stat=stat,
        sensitive=sensitive_paths(files),
    )


def publish(plan: PublishPlan, credentials: Credentials) -> PullRequest:
    """Commit, push and open (or find) the pull request; raises `GitError`/`ForgeError` on failure."""
    binding = plan.binding
    repo = binding.repository
    mirror = binding.mirror
    auth = credentials.git_auth(repo)
    parent = binding.base
    if binding.follow_up:  # push on top of the branch as the remote has it now (the patch is against base)
        run_git(
            [
                "fetch",
                "--quiet",
                "--no-tags",
                "--",
                repo.url,
                f"+refs/heads/{binding.branch}:refs/heads/{binding.branch}",
            ],
            cwd=mirror,
            git_dir=mirror,
            extra_env=auth,
        )
        parent = run_git(
            ["rev-parse", "--verify", f"refs/heads/{binding.branch}^{{commit}}"], cwd=mirror, git_dir=mirror
        ).strip()
    with tempfile.TemporaryDirectory(prefix="massgen-publish-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run_git(["read-tree", parent], cwd=Path(scratch), git_dir=mirror, extra_env=index)
        run_git(
            ["apply", "--cached", "--whitespace=nowarn", "-"],
            cwd=Path(scratch),
            git_dir=mirror,
            extra_env=index,
            stdin=plan.patch.encode(),
        )
        tree = run_git(["write-tree"], cwd=Path(scratch), git_dir=mirror, extra_env=index).strip()
    message = f"{plan.title}\n\n{plan.body}"
    commit = run_git(
        ["commit-tree", tree, "-p", parent, "-F", "-"],
        cwd=mirror,
        git_dir=mirror,
        author=plan.author,
        committer=BOT,
        stdin=message.encode(),
    ).strip()
    run_git(
        ["push", "--quiet", "--no-verify", "--", repo.url, f"{commit}:refs/heads/{binding.branch}"],
        cwd=mirror,
        git_dir=mirror,
        extra_env=auth,
    )
    run_git(["update-ref", f"refs/heads/{binding.branch}", commit], cwd=mirror, git_dir=mirror)
    if repo.forge == "none":
        return PullRequest(
            repository=repo.name, branch=binding.branch, commit=commit, title=plan.title, stat=plan.stat
        )
    opened = open_request(
        repo,
        credentials.token(repo),
        branch=binding.branch,
        base=repo.default_branch,
        title=plan.title,
        body=plan.body,
    )
    return PullRequest(
        repository=repo.name,
        branch=binding.branch,
        commit=commit,
        title=opened.title,
        stat=plan.stat,
        url=opened.url,
        number=opened.number,
        created=opened.created,
    )
