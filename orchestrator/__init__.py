"""The agent team: providers, coordination, tools, sandboxed workspaces, run events and cost.

Imports `approvals`; never Slack. This is the package's front door: other packages import only the
names in `__all__`. Adapters with heavy dependencies (the SQL run store, the tool room) load on first
use, so `import orchestrator` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orchestrator.config import (
    AgentConfig,
    BackendConfig,
    TeamConfig,
    default_team,
    load_team,
    local_team,
    missing_keys,
    parse_team,
)
from orchestrator.errors import (
    OrchestratorError,
    PatchConflict,
    ProviderConfigError,
    ProviderError,
    RunNotResumable,
    RunStoreError,
    SandboxUnavailable,
    TeamConfigError,
    ToolParked,
    WorkspaceError,
)
from orchestrator.events import (
    RUN_EVENT_ADAPTER,
    TERMINAL_KINDS,
    AgentFailed,
    AgentInfo,
    AgentRestarted,
    AgentState,
    AgentStatus,
    AnswerSubmitted,
    ConsensusReached,
    FinalDelta,
    GrantAdded,
    ModelCallCompleted,
    RunCancelled,
    RunConcluded,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunStarted,
    TextDelta,
    ToolApprovalRequested,
    ToolApprovalResolved,
    ToolAwaiting,
    ToolCalled,
    ToolDecided,
    ToolStarted,
    TurnMessage,
    UsageUpdated,
    VoteCast,
    VoteIgnored,
    WorkspaceRebuilt,
    to_line,
)
from orchestrator.ports import (
    AgentToolbox,
    CallAdmission,
    ManifestEntry,
    ModelClient,
    RunContext,
    RunStore,
    RunTools,
    RunToolsFactory,
    SpaceManifest,
    SpaceUpdate,
    ToolOutcome,
    ToolPhase,
    WorkspaceStore,
)
from orchestrator.run import (
    ActionResult,
    AgentCard,
    CoordinationState,
    ModelFactory,
    Parked,
    PendingApproval,
    RunDriver,
    RunHandle,
    RunIsParked,
    RunOutcome,
    RunView,
    default_models,
    drive_run,
    rebuild_state,
    resume_run,
    start_run,
    stop_parked_run,
)
from orchestrator.store import InMemoryRunStore, RunQuery, RunStatus, RunSummary

if TYPE_CHECKING:
    from orchestrator.llm.deferred import after_sdk_loads
    from orchestrator.llm.factory import preload_sdks
    from orchestrator.llm.stats import ProviderStats, provider_stats
    from orchestrator.llm.warmup import warm_up
    from orchestrator.sql import SqlRunStore, create_run_schema, run_metadata
    from orchestrator.tools import SnapshotLimits, build_run_tools, sandbox_status
    from orchestrator.workspace_sql import SqlWorkspaceStore, prune_unused_blobs, workspace_metadata

# name -> module, imported on first access (PEP 562): SQLAlchemy, tree-sitter and httpx stay unloaded
# until a command needs them.
_LAZY = {
    "ProviderStats": "orchestrator.llm.stats",
    "SnapshotLimits": "orchestrator.tools",
    "SqlRunStore": "orchestrator.sql",
    "SqlWorkspaceStore": "orchestrator.workspace_sql",
    "after_sdk_loads": "orchestrator.llm.deferred",
    "build_run_tools": "orchestrator.tools",
    "create_run_schema": "orchestrator.sql",
    "preload_sdks": "orchestrator.llm.factory",
    "provider_stats": "orchestrator.llm.stats",
    "prune_unused_blobs": "orchestrator.workspace_sql",
    "run_metadata": "orchestrator.sql",
    "sandbox_status": "orchestrator.tools",
    "warm_up": "orchestrator.llm.warmup",
    "workspace_metadata": "orchestrator.workspace_sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "RUN_EVENT_ADAPTER",
    "TERMINAL_KINDS",
    "ActionResult",
    "AgentCard",
    "AgentConfig",
    "AgentFailed",
    "AgentInfo",
    "AgentRestarted",
    "AgentState",
    "AgentStatus",
    "AgentToolbox",
    "AnswerSubmitted",
    "BackendConfig",
    "CallAdmission",
    "ConsensusReached",
    "CoordinationState",
    "FinalDelta",
    "GrantAdded",
    "InMemoryRunStore",
    "ManifestEntry",
    "ModelCallCompleted",
    "ModelClient",
    "ModelFactory",
    "OrchestratorError",
    "Parked",
    "PatchConflict",
    "PendingApproval",
    "ProviderConfigError",
    "ProviderError",
    "ProviderStats",
    "RunCancelled",
    "RunConcluded",
    "RunContext",
    "RunDriver",
    "RunEvent",
    "RunFailed",
    "RunFinished",
    "RunHandle",
    "RunIsParked",
    "RunNotResumable",
    "RunOutcome",
    "RunParked",
    "RunQuery",
    "RunStarted",
    "RunStatus",
    "RunStore",
    "RunStoreError",
    "RunSummary",
    "RunTools",
    "RunToolsFactory",
    "RunView",
    "SandboxUnavailable",
    "SnapshotLimits",
    "SpaceManifest",
    "SpaceUpdate",
    "SqlRunStore",
    "SqlWorkspaceStore",
    "TeamConfig",
    "TeamConfigError",
    "TextDelta",
    "ToolApprovalRequested",
    "ToolApprovalResolved",
    "ToolAwaiting",
    "ToolCalled",
    "ToolDecided",
    "ToolOutcome",
    "ToolParked",
    "ToolPhase",
    "ToolStarted",
    "TurnMessage",
    "UsageUpdated",
    "VoteCast",
    "VoteIgnored",
    "WorkspaceError",
    "WorkspaceRebuilt",
    "WorkspaceStore",
    "after_sdk_loads",
    "build_run_tools",
    "create_run_schema",
    "default_models",
    "default_team",
    "drive_run",
    "load_team",
    "local_team",
    "missing_keys",
    "parse_team",
    "preload_sdks",
    "provider_stats",
    "prune_unused_blobs",
    "rebuild_state",
    "resume_run",
    "run_metadata",
    "sandbox_status",
    "start_run",
    "stop_parked_run",
    "to_line",
    "warm_up",
    "workspace_metadata",
]
