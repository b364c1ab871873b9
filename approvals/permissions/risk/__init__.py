"""Blast-radius risk of one program run, by deterministic tables: low, medium, high.

`classify` is the entry; the subcommand, code-option and environment-dump tables it reads are
here too. What is critical is the floor's (`approvals.permissions.floor`).
"""

from __future__ import annotations

from approvals.permissions.risk.classify import WORKSPACE_PROGRAM, classify

__all__ = [
    "WORKSPACE_PROGRAM",
    "classify",
]
