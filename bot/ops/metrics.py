"""Prometheus metrics of one bot process, served as `GET /metrics` beside `/healthz` in both modes.

Counters are fed where things happen: run events (runs started and ended, tokens, cost, the gate's
decisions) through the supervisor's observer, approval events (requests, decisions and their
latency) through the approval service, Slack calls and 429s from the outbox's own counters, model
calls and errors from `orchestrator.provider_stats()` (every attempt passes the one retry loop).
Gauges that describe shared state (runs by state, approvals pending and the oldest's age) are read
from the database at scrape time, so every replica reports the same truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from orchestrator import provider_stats, run_metadata

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from approvals import ApprovalEvent, ApprovalService
    from bot.slack import Outbox
    from orchestrator import RunEvent

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Humans answer in seconds to hours (a phone, the next morning).
_DECISION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
# Seconds a model request waited for its provider's limits: polls of ~0.05 s up to a full minute's window.
_ADMISSION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_RUN_STATES = ("running", "finished", "failed", "cancelled")
_TERMINAL = {"finished", "failed", "cancelled"}


class _Snapshots(Collector):
    """Counters other components keep (the outbox, the provider loop), read at scrape time."""

    def __init__(self, outbox: Callable[[], Outbox | None]) -> None:
        self._outbox = outbox

    def collect(self) -> Iterable[Metric]:
        calls = CounterMetricFamily(
            "massgen_slack_calls", "Slack Web API calls made, by method", labels=["method"]
        )
        limited = CounterMetricFamily("massgen_slack_rate_limited", "Slack HTTP 429 answers")
        retries = CounterMetricFamily("massgen_slack_retries", "Slack calls retried (429, 5xx, timeouts)")
        outbox = self._outbox()
        if outbox is not None:
            for method, count in sorted(outbox.stats.calls_by_method.items()):
                calls.add_metric([method], count)
            limited.add_metric([], outbox.stats.rate_limited)
            retries.add_metric([], outbox.stats.retries)
        model = CounterMetricFamily(
            "massgen_provider_calls",
            "Model call attempts by provider and outcome (ok, retried, error) and HTTP status",
            labels=["provider", "outcome", "status"],
        )
        for (provider, outcome, status), count in sorted(provider_stats().snapshot().items()):
            model.add_metric([provider, outcome, status], count)
        yield from (calls, limited, retries, model)


class Metrics:
    """The process's registry and every metric in it (one per process; tests make their own)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._outbox: Outbox | None = None
        self._usage: dict[str, tuple[int, int, float]] = {}  # run id -> totals seen so far
        self.registry = registry = CollectorRegistry()
        self.runs_started = Counter("massgen_runs_started", "Runs started by this process", registry=registry)
        self.runs_ended = Counter(
            "massgen_runs_ended", "Runs ended in this process, by outcome", ["outcome"], registry=registry
        )
        self.tokens = Counter(
            "massgen_tokens", "Model tokens, by direction (input, output)", ["direction"], registry=registry
        )
        self.cost = Counter("massgen_cost_usd", "Model spend in US dollars", registry=registry)
        self.tool_decisions = Counter(
            "massgen_tool_decisions",
            "The permission gate's decisions on tool calls (allow, ask, deny)",
            ["decision"],
            registry=registry,
        )
        self.approvals = Counter(
            "massgen_approvals",
            "Approval events: requested, approved, denied, expired, cancelled, rejected",
            ["event"],
            registry=registry,
        )
        self.decision_latency = Histogram(
            "massgen_approval_decision_seconds",
            "Time from an approval request to its decision (or expiry), by outcome",
            ["outcome"],
            buckets=_DECISION_BUCKETS,
            registry=registry,
        )
        self.admission_wait = Histogram(
            "massgen_provider_admission_seconds",
            "Time a model request waited for its provider's limits (MASSGEN_PROVIDER_LIMITS), by provider",
            ["provider"],
            buckets=_ADMISSION_BUCKETS,
            registry=registry,
        )
        self.runs = Gauge("massgen_runs", "Runs in the run store, by state", ["state"], registry=registry)
        self.approvals_pending = Gauge(
            "massgen_approvals_pending", "Approval requests waiting for a human", registry=registry
        )
        self.oldest_pending = Gauge(
            "massgen_approval_oldest_pending_seconds",
            "Age of the oldest pending approval request (0 when none)",
            registry=registry,
        )
        registry.register(_Snapshots(lambda: self._outbox))
        ProcessCollector(registry=registry)  # process_resident_memory_bytes, cpu seconds, open fds
        PlatformCollector(registry=registry)  # python_info

    def observe_admission(self, provider: str, seconds: float) -> None:
        """One model request admitted under its provider's limits after `seconds`."""
        self.admission_wait.labels(provider=provider).observe(seconds)

    def watch_outbox(self, outbox: Outbox) -> None:
        """Report this outbox's Slack call counters."""
        self._outbox = outbox

    def on_run_event(self, run_id: str, event: RunEvent) -> None:
        """The supervisor's observer: count runs, tokens, cost and gate decisions."""
        if event.kind == "started":
            self.runs_started.inc()
        elif event.kind == "usage":
            seen_in, seen_out, seen_cost = self._usage.get(run_id, (0, 0, 0.0))
            self.tokens.labels("input").inc(max(0, event.run_input_tokens - seen_in))
            self.tokens.labels("output").inc(max(0, event.run_output_tokens - seen_out))
            self.cost.inc(max(0.0, event.run_cost_usd - seen_cost))
            self._usage[run_id] = (event.run_input_tokens, event.run_output_tokens, event.run_cost_usd)
        elif event.kind == "tool_decision":
            self.tool_decisions.labels(event.decision).inc()
        elif event.kind in _TERMINAL:
            self.runs_ended.labels(event.kind).inc()
            self._usage.pop(run_id, None)

    def on_approval_event(self, event: ApprovalEvent) -> None:
        """The approval service's subscriber: count events, observe decision latency."""
        if event.kind == "approval_requested":
            self.approvals.labels("requested").inc()
        elif event.kind == "decision_rejected":
            self.approvals.labels("rejected").inc()
        elif event.kind in ("approval_decided", "approval_expired", "approval_cancelled"):
            request = event.request
            if event.kind == "approval_decided" and not event.final:
                return  # a quorum vote: the request is still pending
            self.approvals.labels(request.status).inc()
            if event.kind != "approval_cancelled":
                ended = request.decided_at or request.expires_at
                waited = (ended - request.created_at).total_seconds()
                self.decision_latency.labels(request.status).observe(max(0.0, waited))

    async def refresh(self, engine: AsyncEngine, approvals: ApprovalService) -> None:
        """Read the shared state the gauges describe (runs by state, pending approvals)."""
        runs = run_metadata.tables["runs"]
        async with engine.connect() as conn:
            rows = (await conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status))).all()
        counts: dict[str, int] = dict.fromkeys(_RUN_STATES, 0)
        counts.update({str(status): int(n) for status, n in rows})
        for state, n in counts.items():
            self.runs.labels(state).set(n)
        pending = await approvals.pending()
        self.approvals_pending.set(len(pending))
        oldest = min((r.created_at.timestamp() for r in pending), default=None)
        self.oldest_pending.set(0.0 if oldest is None else max(0.0, self._clock() - oldest))

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)


def subscribe_all(metrics: Metrics, approvals: ApprovalService, outbox: Outbox) -> Callable[[], None]:
    """Feed `metrics` from the approval service and the outbox; returns the unsubscribe."""
    metrics.watch_outbox(outbox)
    unsubscribe: Callable[[], None] = approvals.subscribe(metrics.on_approval_event)
    return unsubscribe


def observer(
    metrics: Metrics, also: Callable[[str, RunEvent], None] | None
) -> Callable[[str, RunEvent], None]:
    """The supervisor's run-event observer: the metrics, then `also` (tests and benches observe too)."""

    def observe(run_id: str, event: RunEvent) -> None:
        metrics.on_run_event(run_id, event)
        if also is not None:
            also(run_id, event)

    return observe


__all__ = ["CONTENT_TYPE", "Metrics", "observer", "subscribe_all"]
