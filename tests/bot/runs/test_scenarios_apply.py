"""In Slack: the winner's patch is written back to the source only after an approver clicks."""

from __future__ import annotations

from pathlib import Path

from bot.render import ids
from tests.bot.harness import APPROVER, bot_harness
from tests.fakes.provider_agent import protocol_agent
from tests.fakes.provider_server import ProviderRequest, Reply


def writes_then_follows_the_protocol(request: ProviderRequest) -> Reply:
    wrote = any(m.role == "assistant" and m.tool_calls for m in request.messages)
    if "write_file" in request.tools and "new_answer" in request.tools and not wrote:
        content = f"fixed by {request.model}\n"
        return Reply(tool_calls=[("write_file", {"path": "FIX.md", "content": content})])
    return protocol_agent(request)


def _approve_button(blocks: object) -> str | None:
    for block in blocks if isinstance(blocks, list) else []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == ids.APPROVE_ONCE:
                return str(element["value"])
    return None


async def test_apply_back_waits_for_a_click_then_writes_the_source(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    source.mkdir()
    (source / "README.md").write_text("demo\n")
    extra = f"workspace: {{source: '{source}', apply: ask}}\n"
    state = tmp_path / "state"
    async with bot_harness(
        tmp_path,
        handler=writes_then_follows_the_protocol,
        agents=2,
        tools="real",
        team_extra=extra,
        state_dir=state,
    ) as bot:
        await bot.command("add a FIX.md")
        await bot.wait_for(lambda: any(_approve_button(c.params.get("blocks")) for c in bot.posts()), 30)
        ask = next(c for c in bot.posts() if _approve_button(c.params.get("blocks")))
        assert "FIX.md" in str(ask.params["blocks"]), "the approver sees the file the patch writes"
        assert not (source / "FIX.md").exists(), "nothing is written before the click"
        # The agents' workspaces live under MASSGEN_STATE_DIR while the run waits.
        runs = [p for p in (state / "workspaces").iterdir() if "." not in p.name]  # not the snapshot
        assert len(runs) == 1
        assert sorted(p.name for p in runs[0].iterdir() if not p.name.startswith(".")) == ["a1", "a2"]
        request_id = _approve_button(ask.params["blocks"])
        assert request_id is not None
        await bot.click(ids.APPROVE_ONCE, request_id, user=APPROVER)
        await bot.settle(30)
        run = (await bot.services.runs.history.recent())[0]
        assert run.state == "finished"
        assert (source / "FIX.md").read_text().startswith("fixed by ")
        assert any("Patch applied to the source" in str(c.params) for c in bot.posts())
        assert not list((state / "workspaces").iterdir()), "a finished run's workspaces are removed"
