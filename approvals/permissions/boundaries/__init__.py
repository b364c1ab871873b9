"""Where an action may reach: the workspace and secret boundaries, path rules, URLs and hosts.

`paths.py` draws the boundaries, `access.py` judges one path access against them and the path
rules, `fetch.py` judges a URL, `hosts.py` reads the hosts an egress action reaches.
"""

from __future__ import annotations

from approvals.permissions.boundaries.access import path_finding
from approvals.permissions.boundaries.fetch import judge_fetch
from approvals.permissions.boundaries.hosts import egress_hosts, hosts_note
from approvals.permissions.boundaries.paths import Boundary, is_raw_device, within

__all__ = [
    "Boundary",
    "egress_hosts",
    "hosts_note",
    "is_raw_device",
    "judge_fetch",
    "path_finding",
    "within",
]
