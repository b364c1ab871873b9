"""A Slack run on a named repository: bound once when it starts, the same binding on every resume.

`bind` runs in the worker that starts the run: the repository is the one the run's selection names
(`--repo NAME`, `repo=NAME`, the channel's default) or, for a follow-up in a run's thread, the one
its parent ran on; a follow-up whose parent's branch was pushed starts from that branch's head and
pushes to it again, so its pull request gains a commit instead of a twin. The binding (mirror, base
commit, branch) is written to the database before the run's first event, and `restore` rebinds a
resumed, stopped or settled run from it, so a run crashed or parked on one worker goes on from the
base it started from, never from the branch's head of the moment.

The team then publishes instead of applying: the run's apply step pushes the winner's patch and
opens the pull request behind one approval (`orchestrator.repos`), by trusted git.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sqlalchemy import Column, Float, MetaData, String, Table, Text, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.batched import Batched
from bot.slack.store import slack_runs
from orchestrator import TeamConfig
from orchestrator.repos import Credentials, RepoBinding, RepoCache, RepositoryError, bind_repository, rebind

log = logging.getLogger(__name__)

repository_metadata = MetaData()

run_repositories = Table(
    "run_repositories",
    repository_metadata,
    Column("run_id", String(64), primary_key=True),
    Column("binding", Text, nullable=False),  # RepoBinding as JSON: names and paths, no secrets
    Column("created_at", Float, nullable=False),
)


class RunRepositories:
    """Binds runs to their repositories and keeps each binding for the run's resumes."""

    def __init__(
        self,
        engine: AsyncEngine,
        cache: RepoCache,
        *,
        credentials: Credentials | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._cache = cache
        self._credentials = credentials
        self._clock = clock
        # After a restart every resumed run asks at once: one query for all of them, not one each.
        self._bindings = Batched(self._bindings_of)

    async def create_schema(self) -> None:
        """Create the table if missing (tests on a bare engine; deployments migrate)."""
        async with self._engine.begin() as conn:
            await conn.run_sync(repository_metadata.create_all)

    async def bind(
        self, run_id: str, team: TeamConfig, *, name: str | None, channel: str, thread_ts: str | None
    ) -> TeamConfig:
        """The team of a new run: bound to its repository (fetched now) and the binding stored.

        Raises `OrchestratorError` (one line: an unknown name, a failed fetch) when it cannot be.
        """
        parent = None if thread_ts is None else await self._in_thread(run_id, channel, thread_ts)
        if parent is not None and name in (None, parent.repository.name):
            bound = await self._follow_up(run_id, team, parent)
        elif name is not None:
            bound = await asyncio.to_thread(
                bind_repository, team, self._cache, name, run_id, credentials=self._credentials
            )
        else:
            return team
        binding = bound.workspace.repository
        assert binding is not None  # bind_repository sets it
        await self._save(run_id, binding)
        return bound

    async def restore(self, run_id: str, team: TeamConfig) -> TeamConfig:
        """A stored run's team with the binding it started with (as is when it had no repository)."""
        binding = await self._bindings.get(run_id)
        if binding is None:
            return team
        return await asyncio.to_thread(rebind, team, self._cache, binding)

    async def binding(self, run_id: str) -> RepoBinding | None:
        """The repository `run_id` was bound to, if it was."""
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(run_repositories.c.binding).where(run_repositories.c.run_id == run_id)
                )
            ).first()
        return None if row is None else RepoBinding.model_validate_json(row.binding)

    async def _bindings_of(self, run_ids: list[str]) -> dict[str, RepoBinding]:
        """The bindings of those of `run_ids` that have one, in one query."""
        query = select(run_repositories.c.run_id, run_repositories.c.binding).where(
            run_repositories.c.run_id.in_(run_ids)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {row.run_id: RepoBinding.model_validate_json(row.binding) for row in rows}

    async def _in_thread(self, run_id: str, channel: str, thread_ts: str) -> RepoBinding | None:
        """The binding of the latest other run in this thread that had a repository (the parent, or
        the last follow-up: each one pushes to the same branch)."""
        query = (
            select(run_repositories.c.binding)
            .join(slack_runs, slack_runs.c.run_id == run_repositories.c.run_id)
            .where(
                slack_runs.c.channel == channel,
                slack_runs.c.thread_ts == thread_ts,
                run_repositories.c.run_id != run_id,
            )
            .order_by(run_repositories.c.created_at.desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else RepoBinding.model_validate_json(row.binding)

    async def _follow_up(self, run_id: str, team: TeamConfig, parent: RepoBinding) -> TeamConfig:
        """On the parent's branch when it was pushed; else a fresh branch from the default one."""
        name = parent.repository.name
        try:
            return await asyncio.to_thread(
                bind_repository,
                team,
                self._cache,
                name,
                run_id,
                follow_up_branch=parent.branch,
                credentials=self._credentials,
            )
        except RepositoryError as exc:
            log.info("run %s: follow-up of %s starts a new branch (%s)", run_id, parent.branch, exc)
            return await asyncio.to_thread(
                bind_repository, team, self._cache, name, run_id, credentials=self._credentials
            )

    async def _save(self, run_id: str, binding: RepoBinding) -> None:
        # A step run again before the run's first event binds again: the newer binding replaces it.
        async with self._engine.begin() as conn:
            await conn.execute(delete(run_repositories).where(run_repositories.c.run_id == run_id))
            await conn.execute(
                insert(run_repositories).values(
                    run_id=run_id, binding=binding.model_dump_json(), created_at=self._clock()
                )
            )


__all__ = ["RunRepositories", "repository_metadata", "run_repositories"]
