"""The apply-back outcome (`RunFinished.applied`) in the Slack final message and the terminal panel."""

from __future__ import annotations

import pytest
from rich.console import Console

from bot.cli.run_view import final_panel
from bot.runs.blocks import final_answer_messages
from orchestrator import RunView
from orchestrator import events as ev
from tests.bot.blockkit import EVIL, assert_valid_message

PATCH = "--- a/fix.py\n+++ b/fix.py\n@@ -1 +1 @@\n-BUG = True\n+BUG = False\n"


def _finished(applied: bool | None, reason: str | None) -> ev.RunFinished:
    return ev.RunFinished(winner="a1", answer="fixed", patch=PATCH, applied=applied, apply_reason=reason)


@pytest.mark.parametrize(
    ("applied", "reason", "line"),
    [
        (True, "applied 1 file(s) to /srv/repo", "Patch applied to the source"),
        (False, "denied by U0APPROVER: not now", "Patch not applied: denied by U0APPROVER: not now"),
        (False, "the approval request expired", "Patch not applied: the approval request expired"),
        (None, None, None),
    ],
)
def test_final_message_says_whether_the_patch_was_applied(
    applied: bool | None, reason: str | None, line: str | None
) -> None:
    messages = final_answer_messages(_finished(applied, reason), RunView())
    for message in messages:
        assert_valid_message(message)
    last = messages[-1][1]
    contexts = [e["text"] for b in last if b["type"] == "context" for e in b["elements"]]
    patch_lines = [t for t in contexts if t.startswith("Patch ")]
    assert patch_lines == ([line] if line else [])
    panel = Console(width=200, record=True)
    panel.print(final_panel(_finished(applied, reason), None))
    drawn = panel.export_text()
    if line:
        assert line in drawn
    else:
        assert "Patch" not in drawn


def test_a_hostile_reason_is_escaped_and_redacted() -> None:
    (message,) = final_answer_messages(_finished(False, f"git apply failed: {EVIL}"), RunView())
    assert_valid_message(message)  # no live mentions, no secret
    assert "Patch not applied: git apply failed:" in str(message[1])


def test_a_workspace_rebuilt_after_a_takeover_is_said_in_the_final_message() -> None:
    view = RunView().apply(
        ev.WorkspaceRebuilt(agent_id="a1", reason=f"a.bin is 40.0 MB, over the limit {EVIL}")
    )
    messages = final_answer_messages(_finished(None, None), view)
    for message in messages:
        assert_valid_message(message)
    contexts = [e["text"] for b in messages[-1][1] if b["type"] == "context" for e in b["elements"]]
    [notice] = [t for t in contexts if "rebuilt from the source" in t]
    assert notice.startswith("⚠️ a1's workspace could not be restored")
    assert "a.bin is 40.0 MB" in notice
    assert "<!channel>" not in notice
    plain = final_answer_messages(_finished(None, None), RunView())
    assert "rebuilt from the source" not in str(plain)
