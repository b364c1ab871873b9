"""An agent's tools: specs and arguments, the per-run toolbox, the permission gate, sandbox and workspaces.

`build_run_tools` is the room's entry point (a `RunToolsFactory` once its keywords are bound).
"""

from orchestrator.tools.gate import DEFERRED, GateCall, GateResult, PermissionGate, RunGrants
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
    approvers_of,
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
    "EngineFactory",
    "GateCall",
    "GateResult",
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
    "tool_specs",
]
