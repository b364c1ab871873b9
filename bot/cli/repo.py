"""`massgen-bot run --repo NAME`: the run on a named repository, its binding kept for `--resume`.

The binding (mirror, base commit, branch) is saved beside the run's workspaces as
`<run_id>.repo.json`, so a resumed or cancelled run uses exactly the base it started from, not the
branch's head of the moment. The PR link is printed at the end; the approval prompt shows the
repository, the branch, the diff stat, the sensitive paths and the diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from approvals import ApprovalRequest
    from orchestrator import TeamConfig
    from orchestrator.events import RunEvent

DIFF_LINES = 200  # of the diff shown at the terminal prompt (the request carries it whole)


class RepoUsageError(Exception):
    """The repository cannot be used for this run (one line for the user)."""


def _saved(root: Path, run_id: str) -> Path:
    return root / f"{run_id}.repo.json"


def for_run(
    team: TeamConfig, name: str | None, run_id: str, *, stored: bool, state: Path, root: Path
) -> TeamConfig:
    """The team of this run: bound to `name` (a new run), as saved (`--resume`/`--cancel`), or as is."""
    if stored:
        return restore(team, run_id, state=state, root=root)
    return team if name is None else bind(team, name, run_id, state=state, root=root)


def bind(team: TeamConfig, name: str, run_id: str, *, state: Path, root: Path) -> TeamConfig:
    """The team for a new run on repository `name` (fetched now); the binding saved for `--resume`."""
    from orchestrator import OrchestratorError
    from orchestrator.repos import RepoCache, bind_repository

    try:
        bound = bind_repository(team, RepoCache(state), name, run_id)
    except OrchestratorError as exc:
        raise RepoUsageError(str(exc)) from None
    binding = bound.workspace.repository
    assert binding is not None
    root.mkdir(parents=True, exist_ok=True)
    _saved(root, run_id).write_text(binding.model_dump_json())
    return bound


def restore(team: TeamConfig, run_id: str, *, state: Path, root: Path) -> TeamConfig:
    """A stored run's team as it was bound (unchanged when the run had no repository)."""
    from orchestrator import OrchestratorError
    from orchestrator.repos import RepoBinding, RepoCache, rebind

    saved = _saved(root, run_id)
    if not saved.is_file():
        return team
    try:
        return rebind(team, RepoCache(state), RepoBinding.model_validate_json(saved.read_text()))
    except (OrchestratorError, ValueError) as exc:
        raise RepoUsageError(f"cannot restore the run's repository: {exc}") from None


def request_lines(request: ApprovalRequest) -> str:
    """The terminal prompt's extra lines for a patch: where it goes, its stat, sensitive paths, the diff."""
    context = request.context
    diff = context.get("diff")
    if not diff:
        return ""
    lines = []
    if "repository" in context:
        lines.append(
            f"repository {context['repository']} · branch {context.get('branch', '?')} "
            f"→ {context.get('target_branch', '?')} · {context.get('diff_stat', '')}"
        )
    sensitive = context.get("sensitive_paths")
    if sensitive:
        lines.append(f"sensitive paths (change what runs): {sensitive}")
    body = diff.splitlines()
    lines += body[:DIFF_LINES]
    if len(body) > DIFF_LINES:
        lines.append(f"… {len(body) - DIFF_LINES} more diff lines (massgen-bot approvals show {request.id})")
    return "\n".join(lines)


def pull_request_line(terminal: RunEvent) -> str | None:
    """What the CLI prints at the end of a run that published (None otherwise)."""
    from orchestrator import RunFinished

    pull_request = terminal.pull_request if isinstance(terminal, RunFinished) else None
    if pull_request is None:
        return None
    where = pull_request.url or f"branch {pull_request.branch} (pushed)"
    return f"pull request: {where} · {pull_request.title} · {pull_request.stat}"
