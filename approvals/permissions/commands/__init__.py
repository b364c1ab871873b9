"""Judging a `command(<shell text>)` action: every part the shell would run, and what it touches.

`judge.py` walks the invocations (floor, rules, boundaries, risk for each); the other modules are
the command-specific checks: environment assignments, option values, secret readers, stored
values, and files written then run or read as code (with the tables of `tool_files.py`).
"""

from __future__ import annotations

from approvals.permissions.commands.judge import CommandJudge

__all__ = [
    "CommandJudge",
]
