"""Done means: on a machine with no keys, the playground's default team (three local agents on the
embedded model) runs `/massgen write a haiku about on-call` to a final answer. Slow is fine; bounded."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from bot.playground import CHANNEL, REQUESTER, playground_team
from tests.bot.playground.harness import playground, ui_post

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None, reason="the `local` extra is not installed (xllamacpp)"
    ),
]
BOUND = 600.0  # seconds: three agents on SmolLM2-135M over two shared cores


def _texts(channel: dict[str, dict[str, object]]) -> str:
    return "\n".join(str(m.get("text")) + str(m.get("blocks")) for m in channel.values())


async def test_the_default_local_team_writes_the_haiku_to_a_final_answer(tmp_path: Path) -> None:
    pick = playground_team({})  # no provider keys
    assert [a.backend.type for a in pick.team.agents] == ["local", "local", "local"]
    async with playground(tmp_path, team=pick) as pg:
        began = time.monotonic()
        status, answer = await ui_post(
            pg, "/ui/send", {"user": REQUESTER.id, "text": "/massgen write a haiku about on-call"}
        )
        assert (status, answer["ok"]) == (200, True)

        def finished() -> bool:
            return "Final answer" in _texts(pg.slack.messages.get(CHANNEL, {}))

        await pg.slack.wait_for(finished, BOUND)
        seen = _texts(pg.slack.messages.get(CHANNEL, {}))
        assert "votes:" in seen  # the final answer names the votes it came from
        print(f"local team: final answer after {time.monotonic() - began:.0f} s")
        assert pg.slack.violations == []
