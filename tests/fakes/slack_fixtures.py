"""pytest fixture: a running `SlackEmulator` that fails the test at teardown on any violation.

Use it with `pytest_plugins = ["tests.fakes.slack_fixtures"]` in a conftest, or import the fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.playground.emulator import SlackEmulator


@pytest.fixture
async def slack_emulator() -> AsyncIterator[SlackEmulator]:
    """A started emulator; tests may tighten `.limits` or add `.allowed_mentions` before calling it."""
    async with SlackEmulator() as emulator:
        yield emulator
        # Checked before close so the failure names what the bot sent wrong.
        emulator.assert_clean()
