"""What the lifecycle's door loads (its `__all__`: tests/test_front_doors.py)."""

from __future__ import annotations

import subprocess
import sys


def test_the_door_loads_no_database_driver_until_asked() -> None:
    # Nor the permission engine (the shell grammar and program tables): the lifecycle names actions only.
    heavy = "{'sqlalchemy', 'apscheduler', 'approvals.permissions.engine', 'tree_sitter'}"
    code = f"import sys, approvals; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
