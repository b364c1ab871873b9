"""A team: its file format (YAML with line numbers in errors), model prices and provider presets.

Pure configuration: nothing here builds a provider client or imports a vendor SDK.
"""

from orchestrator.config.cost import DEFAULT_PRICES, FREE, UNKNOWN_MODEL_PRICE, Price, cost_usd, resolve_price
from orchestrator.config.keys import missing_keys
from orchestrator.config.presets import LOCAL_PRESETS, PRESETS
from orchestrator.config.team import (
    BACKEND_TYPES,
    AgentConfig,
    ApprovalsConfig,
    BackendConfig,
    BackendType,
    FinalAnswerStrategy,
    OrchestratorConfig,
    PermissionsConfig,
    Policy,
    PriceConfig,
    TeamConfig,
    ToolsConfig,
    WorkspaceConfig,
    default_team,
    load_team,
    local_team,
    parse_team,
)

__all__ = [
    "BACKEND_TYPES",
    "DEFAULT_PRICES",
    "FREE",
    "LOCAL_PRESETS",
    "PRESETS",
    "UNKNOWN_MODEL_PRICE",
    "AgentConfig",
    "ApprovalsConfig",
    "BackendConfig",
    "BackendType",
    "FinalAnswerStrategy",
    "OrchestratorConfig",
    "PermissionsConfig",
    "Policy",
    "Price",
    "PriceConfig",
    "TeamConfig",
    "ToolsConfig",
    "WorkspaceConfig",
    "cost_usd",
    "default_team",
    "load_team",
    "local_team",
    "missing_keys",
    "parse_team",
    "resolve_price",
]
