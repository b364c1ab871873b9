"""An agent's tools: specs and arguments, the per-run toolbox, the permission gate, sandbox and workspaces.

`build_run_tools` is the room's entry point (a `RunToolsFactory` once its keywords are bound).
"""

from orchestrator.tools.gate import DEFERRED, GateCall, GateResult, PermissionGate, RunGrants, approvers_of
from orchestrator.tools.limits import Limits
from orchestrator.tools.proxy import EgressProxy, EgressRules
from orchestrator.tools.ready import tidy_ready_copies
from orchestrator.tools.sandbox import CommandResult, Sandbox, SandboxSpec, sandbox_status, scrubbed_env
from orchestrator.tools.specs import (
    TOOL_NAMES,
    ToolArgumentError,
    ToolEnv,
    actions_for,
    execute,
    parse_args,
    tool_specs,
)
from orchestrator.tools.toolbox import (
    AgentTools,
    EngineFactory,
    WorkspaceRunTools,
    build_run_tools,
    default_engine,
)
from orchestrator.tools.workspace import RunWorkspaces, apply_patch_to_source, patch_paths
from orchestrator.tools.wsync import Rebuilt, SnapshotLimits, WorkspaceSync

__all__ = [
    "DEFERRED",
    "TOOL_NAMES",
    "AgentTools",
    "CommandResult",
    "EgressProxy",
    "EgressRules",
    "EngineFactory",
    "GateCall",
    "GateResult",
    "Limits",
    "PermissionGate",
    "Rebuilt",
    "RunGrants",
    "RunWorkspaces",
    "Sandbox",
    "SandboxSpec",
    "SnapshotLimits",
    "ToolArgumentError",
    "ToolEnv",
    "WorkspaceRunTools",
    "WorkspaceSync",
    "actions_for",
    "apply_patch_to_source",
    "approvers_of",
    "build_run_tools",
    "default_engine",
    "execute",
    "parse_args",
    "patch_paths",
    "sandbox_status",
    "scrubbed_env",
    "tidy_ready_copies",
    "tool_specs",
]
