"""Browser tests of the playground: Debian's Chromium (never a downloaded one), driven by Playwright."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright, expect

CHROMIUM = "/usr/bin/chromium"  # Debian's package; `.ci/run` installs it when missing
# Headless in a container: no sandbox (no user namespaces for it), no GPU, nothing that would reach
# the network on its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000
expect.set_options(timeout=WAIT_MS)  # a loaded two-core machine: generous, and never a sleep

# The only reason a browser test may skip.
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Chromium is not installed at /usr/bin/chromium (.ci/run installs it)"
)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium for one test."""
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()
