"""Operations: Prometheus metrics, logging (ids, JSON, redaction), retention sweeps.

The door loads its modules on first use (PEP 562): the terminal runner logs without loading
Prometheus, and the logging set-up needs no SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals import lazy_exports

if TYPE_CHECKING:
    from bot.ops.logs import RedactFilter, bind_request, bind_run, bound_request, configure_logging
    from bot.ops.metrics import CONTENT_TYPE, Metrics, observer, subscribe_all
    from bot.ops.retention import PruneReport, prune, retention_loop

_MODULES = {
    "CONTENT_TYPE": "bot.ops.metrics",
    "Metrics": "bot.ops.metrics",
    "PruneReport": "bot.ops.retention",
    "RedactFilter": "bot.ops.logs",
    "bind_request": "bot.ops.logs",
    "bind_run": "bot.ops.logs",
    "bound_request": "bot.ops.logs",
    "configure_logging": "bot.ops.logs",
    "observer": "bot.ops.metrics",
    "prune": "bot.ops.retention",
    "retention_loop": "bot.ops.retention",
    "subscribe_all": "bot.ops.metrics",
}


__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "CONTENT_TYPE",
    "Metrics",
    "PruneReport",
    "RedactFilter",
    "bind_request",
    "bind_run",
    "bound_request",
    "configure_logging",
    "observer",
    "prune",
    "retention_loop",
    "subscribe_all",
]
