"""What the orchestrator's door loads, and its package data (its `__all__`: tests/test_front_doors.py)."""

from __future__ import annotations

import subprocess
import sys


def test_the_door_loads_no_database_driver_until_asked() -> None:
    code = "import sys, orchestrator; print(sorted({'sqlalchemy', 'apscheduler'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_prompts_are_package_data_of_the_run_room() -> None:
    from importlib import resources

    prompts = resources.files("orchestrator.run").joinpath("prompts")
    assert prompts.joinpath("system.md").is_file()
