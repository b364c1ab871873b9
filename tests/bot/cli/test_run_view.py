"""The terminal approver's prompt: legible, and never styled by the agent's text."""

from __future__ import annotations

from datetime import timedelta

from rich.console import Console

from approvals.permissions import Action
from approvals.testing import EPOCH, sample_request
from bot.cli.run_view import CHOICES_PROMPT, approval_text


def test_the_request_shows_what_layer_risk_and_expiry() -> None:
    request = sample_request(action=Action(kind="command", target="git push origin main"), layer="rule")
    text = approval_text(request, now=EPOCH + timedelta(seconds=60)).plain
    assert "agent1 wants to run" in text
    assert "git push origin main" in text
    assert "risk medium · layer rule · asked" in text
    assert "expires in 240 s (12:05:00 UTC)" in text


def test_markup_in_the_action_is_shown_as_written() -> None:
    target = "echo '[bold red]approved[/] [link=https://evil.example]x[/link]'"
    console = Console(record=True, width=200, color_system=None)
    console.print(approval_text(sample_request(action=Action(kind="command", target=target)), now=EPOCH))
    assert target in console.export_text()


def test_the_choices_keep_their_brackets() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(CHOICES_PROMPT, markup=False, highlight=False)
    assert "[y] yes, once · [r] yes, for this run · [n] no:" in console.export_text()
