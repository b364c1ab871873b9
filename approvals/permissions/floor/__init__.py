"""The floor: destructive commands that nothing overrides (no rule, no policy, no approval).

`judge.py` decides; `effects.py` says what each program run destroys or overwrites, and where;
`interpreter_code.py` reads what literal `-c` code deletes or runs.
"""

from __future__ import annotations

from approvals.permissions.floor.judge import SYSTEM_DIRS, classify_path, invocation_floor, lexical_floor

__all__ = [
    "SYSTEM_DIRS",
    "classify_path",
    "invocation_floor",
    "lexical_floor",
]
