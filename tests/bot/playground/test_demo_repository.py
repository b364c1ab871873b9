"""The playground's `demo` repository: a local bare remote and the GitHub stand-in, no account."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx2
import pytest

from bot.playground.forge import DEMO_TOKEN_ENV
from bot.playground.run import with_demo_repository
from orchestrator.repos import Credentials, RepoCache, bind_repository, plan_publish, publish
from orchestrator.testing import scripted_team


async def test_a_run_on_the_demo_repository_ends_in_a_pull_request_page_with_its_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEMO_TOKEN_ENV, raising=False)  # the stand-in's token is set for this test only
    async with contextlib.AsyncExitStack() as stack:
        team = with_demo_repository(scripted_team(1), stack, tmp_path)
        assert [r.name for r in team.repositories] == ["demo"]
        assert with_demo_repository(team, stack, tmp_path) is team  # once
        bound = bind_repository(team, RepoCache(tmp_path / "state"), "demo", "run-1")
        binding = bound.workspace.repository
        assert binding is not None
        assert bound.workspace.source is not None
        assert "off by one" in (bound.workspace.source / "billing.py").read_text()
        patch = (
            "diff --git a/billing.py b/billing.py\n--- a/billing.py\n+++ b/billing.py\n@@ -1,2 +1,2 @@\n"
            " def total(prices):\n-    return sum(prices) + 1  # off by one\n+    return sum(prices)\n"
        )
        plan = plan_publish(binding, patch, ("billing.py",), run_id="run-1", requester="U1", task="fix total")
        made = publish(plan, Credentials())
        assert made.url is not None
        page = httpx2.get(made.url)
        assert page.status_code == 200
        assert "massgen: fix total" in page.text
        assert "+    return sum(prices)" in page.text
