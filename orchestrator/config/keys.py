"""Where a backend connects and which variable holds its key (pure: no SDK, no network).

The client factory (`orchestrator.llm.factory`) and the pre-run check (`missing_keys`) read the
same rules, so a run that passes the check never fails later for want of a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.config.presets import PRESETS

if TYPE_CHECKING:
    from orchestrator.config.team import BackendConfig, TeamConfig


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A backend's base URL (None: the SDK's default), its key variable, and whether it needs a key."""

    url: str | None
    key_env: str | None
    keyless_ok: bool


def endpoint(type: str, base_url: str | None, api_key_env: str | None, env: Mapping[str, str]) -> Endpoint:
    """The endpoint of a wire type or preset name.

    A key may be missing when the caller set a base URL (a local or private server) or chose a
    preset without a key variable; otherwise the key variable must be set.
    """
    if type in ("claude", "anthropic"):
        url = base_url or env.get("ANTHROPIC_BASE_URL") or None
        return Endpoint(url, api_key_env or "ANTHROPIC_API_KEY", url is not None)
    if type in PRESETS:
        preset_url, preset_env = PRESETS[type]
        return Endpoint(
            base_url or preset_url, api_key_env or preset_env, base_url is not None or preset_env is None
        )
    url = base_url or env.get("OPENAI_BASE_URL") or None
    return Endpoint(url, api_key_env or "OPENAI_API_KEY", url is not None)


def backend_endpoint(backend: BackendConfig, env: Mapping[str, str]) -> Endpoint:
    """The endpoint of a team file's backend (a preset's own URL counts as the preset, not as a server)."""
    preset_url = PRESETS[backend.preset][0] if backend.preset in PRESETS else None
    base_url = None if backend.base_url == preset_url else backend.base_url
    return endpoint(backend.preset or backend.type, base_url, backend.api_key_env, env)


def missing_keys(team: TeamConfig, env: Mapping[str, str]) -> dict[str, str]:
    """Agent id -> the variable to set, for each agent whose provider key is given nowhere."""
    missing: dict[str, str] = {}
    for agent in team.agents:
        backend = agent.backend
        if backend.type == "local" or (backend.api_key is not None and backend.api_key.get_secret_value()):
            continue
        found = backend_endpoint(backend, env)
        if not found.keyless_ok and not (found.key_env and env.get(found.key_env)):
            missing[agent.id] = found.key_env or "the API key variable"
    return missing
