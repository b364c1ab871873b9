"""/readyz's database check writes: a full disk under the state folder makes it fail, not pass.

The state folder is a small tmpfs (mounting one needs root: skipped elsewhere), filled for real.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.settings import BotSettings
from bot.wiring import open_storage


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


async def test_a_full_disk_fails_the_readiness_probe_and_space_back_passes_it(small_disk: Path) -> None:
    settings = BotSettings.with_values(MASSGEN_STATE_DIR=small_disk, MASSGEN_DB_UPGRADE="auto")
    storage = await open_storage(settings)
    try:
        assert await storage.ping() is None
        filler = _fill(small_disk)
        reason = await storage.ping()
        assert reason is not None
        assert "full" in reason.lower() or "space" in reason.lower() or "disk" in reason.lower()
        filler.unlink()
        assert await storage.ping() is None
    finally:
        await storage.close()
