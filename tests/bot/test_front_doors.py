"""What the bot's doors load (each `__all__`: tests/test_front_doors.py)."""

from __future__ import annotations


def test_the_cli_door_imports_no_subcommand() -> None:
    """`massgen-bot run` must not pay for the Slack side: the door loads only the chosen module."""
    import subprocess
    import sys

    code = "import sys, bot.cli; print(sorted(m for m in sys.modules if m.startswith('bot.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['bot.cli']"


def test_the_terminal_runner_and_its_storage_never_load_slack() -> None:
    """`massgen-bot run` builds its stores through the composition root without the Slack SDK."""
    import subprocess
    import sys

    code = (
        "import sys, bot.cli.run, bot.cli.run_view, bot.wiring; "
        "print([m for m in ('slack_sdk', 'slack_bolt', 'aiohttp', 'dbos') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
