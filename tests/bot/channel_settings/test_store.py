"""Channel settings in SQLite and PostgreSQL: a save and its audit rows land together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals import make_engine
from bot.channel_settings import ChannelDefaults, ChannelSettingsStore
from tests.conftest import SQL_DATABASES, empty_database


@pytest.fixture(params=SQL_DATABASES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChannelSettingsStore]:
    async with empty_database(request.param, f"sqlite:///{tmp_path / 'channels.db'}") as url:
        engine = make_engine(url)
        clock = iter(float(n) for n in range(100, 200))
        store = ChannelSettingsStore(engine, clock=lambda: next(clock))
        await store.create_schema()
        yield store
        await engine.dispose()


async def test_a_save_audits_each_changed_field_old_to_new(store: ChannelSettingsStore) -> None:
    assert await store.get("C1") is None
    first = ChannelDefaults(repository="billing", approvers=("U0A", "U0B"))
    changed = await store.save("C1", first, actor="U0ADMIN")
    assert [(c.field, c.old, c.new) for c in changed] == [
        ("repository", None, "billing"),
        ("approvers", None, "U0A,U0B"),
    ]
    assert await store.get("C1") == first
    second = ChannelDefaults(
        repository="web", policy="human", approvers=("U0A", "U0B"), approver_group="S0OPS"
    )
    await store.save("C1", second, actor="U0A")
    assert await store.get("C1") == second
    trail = [(c.actor, c.field, c.old, c.new, c.at) for c in await store.audit("C1")]
    assert trail == [
        ("U0ADMIN", "repository", None, "billing", 100.0),
        ("U0ADMIN", "approvers", None, "U0A,U0B", 100.0),
        ("U0A", "repository", "billing", "web", 101.0),
        ("U0A", "policy", None, "human", 101.0),
        ("U0A", "approver_group", None, "S0OPS", 101.0),
    ]
    assert await store.audit("C2") == []


async def test_saving_the_same_settings_writes_no_audit(store: ChannelSettingsStore) -> None:
    same = ChannelDefaults(team="infra")
    await store.save("C1", same, actor="U0A")
    assert await store.save("C1", same, actor="U0B") == []
    assert [c.actor for c in await store.audit("C1")] == ["U0A"]
    cleared = await store.save("C1", ChannelDefaults(), actor="U0B")
    assert [(c.field, c.old, c.new) for c in cleared] == [("team", "infra", None)]
    assert await store.get("C1") == ChannelDefaults()
