"""Provider clients shared by every run of the bot process.

Building a client costs ~35 ms of event-loop time (an SSL context loads the CA bundle) and holds a
connection pool; per run and per agent that stalls every ack under load and leaks pools in a
long-lived server. One client per distinct backend config is reused instead (the SDK clients are
made for concurrent use) and closed at shutdown.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

from orchestrator import AgentConfig, BackendConfig, ModelClient, default_models

log = logging.getLogger(__name__)


def backend_key(backend: BackendConfig) -> str:
    """Everything that makes two clients different (the key's secret included, never logged)."""
    api_key = backend.api_key.get_secret_value() if backend.api_key is not None else None
    fields = [backend.type, backend.preset, backend.model, backend.base_url, api_key, backend.api_key_env]
    return json.dumps([fields, backend.extras], sort_keys=True, default=str)


class SharedModels:
    """A `start_run(models=...)` factory that builds each distinct client once."""

    def __init__(self, make: Callable[[AgentConfig], ModelClient] = default_models) -> None:
        self._make = make
        self._clients: dict[str, ModelClient] = {}

    def __call__(self, agent: AgentConfig) -> ModelClient:
        key = backend_key(agent.backend)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._make(agent)
        return client

    def prebuild(self, agents: Iterable[AgentConfig]) -> None:
        """Build the default team's clients at start-up, before any ack can wait on that work.

        A config the factory refuses (a missing key, say) is skipped: the run reports it.
        """
        for agent in agents:
            try:
                self(agent)
            except Exception as exc:
                log.warning("model client for %s not prebuilt: %s", agent.id, exc)

    @property
    def size(self) -> int:
        """Distinct clients built so far (not `__len__`: an empty factory must still be truthy)."""
        return len(self._clients)

    async def aclose(self) -> None:
        """Close every client's connections (shutdown, after the runs have drained)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.close()
            except Exception as exc:  # one failing close must not keep the others open
                log.warning("closing a model client failed: %s", exc)
