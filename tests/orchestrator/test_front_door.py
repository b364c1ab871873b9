"""The orchestrator's front doors (package and rooms): a sorted `__all__` that is exactly the public API."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

DOORS = {
    "orchestrator": [
        "RUN_EVENT_ADAPTER",
        "TERMINAL_KINDS",
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
        "ConsensusReached",
        "CoordinationState",
        "FinalDelta",
        "InMemoryRunStore",
        "ModelClient",
        "ModelFactory",
        "OrchestratorError",
        "PatchConflict",
        "PendingApproval",
        "ProviderConfigError",
        "ProviderError",
        "RunCancelled",
        "RunContext",
        "RunEvent",
        "RunFailed",
        "RunFinished",
        "RunHandle",
        "RunNotResumable",
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
        "SqlRunStore",
        "TeamConfig",
        "TeamConfigError",
        "TextDelta",
        "ToolApprovalRequested",
        "ToolApprovalResolved",
        "ToolCalled",
        "ToolDecided",
        "ToolOutcome",
        "ToolPhase",
        "UsageUpdated",
        "VoteCast",
        "VoteIgnored",
        "WorkspaceError",
        "build_run_tools",
        "create_run_schema",
        "default_models",
        "default_team",
        "load_team",
        "parse_team",
        "rebuild_state",
        "resume_run",
        "sandbox_status",
        "start_run",
        "to_line",
        "warm_up",
    ],
    "orchestrator.config": [
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
        "parse_team",
        "resolve_price",
    ],
    "orchestrator.llm": [
        "BACKEND_TYPES",
        "AssistantMessage",
        "Message",
        "RetryPolicy",
        "StopReason",
        "StreamItem",
        "TextDelta",
        "ToolCall",
        "ToolCallReady",
        "ToolResultMessage",
        "ToolSpec",
        "TurnEnd",
        "Usage",
        "UserMessage",
        "make_model_client",
        "resolve_api_key",
        "warm_up",
    ],
    "orchestrator.run": [
        "AgentCard",
        "AgentView",
        "Answer",
        "Choice",
        "CoordinationState",
        "ModelFactory",
        "PendingApproval",
        "Phase",
        "RunHandle",
        "RunView",
        "Subscriber",
        "Terminal",
        "ViewPhase",
        "default_models",
        "rebuild_state",
        "resume_run",
        "start_run",
    ],
    "orchestrator.tools": [
        "DEFERRED",
        "TOOL_NAMES",
        "AgentTools",
        "CommandResult",
        "EngineFactory",
        "GateCall",
        "GateResult",
        "PermissionGate",
        "RunGrants",
        "RunWorkspaces",
        "Sandbox",
        "SandboxSpec",
        "ToolArgumentError",
        "ToolEnv",
        "WorkspaceRunTools",
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
    ],
}


@pytest.mark.parametrize("module", sorted(DOORS))
def test_front_door_exports_exactly_its_api(module: str) -> None:
    door = importlib.import_module(module)
    assert door.__all__ == DOORS[module]
    assert door.__all__ == sorted(door.__all__, key=lambda name: (not name.isupper(), name))
    for name in door.__all__:
        assert getattr(door, name) is not None


def test_the_door_loads_no_database_driver_until_asked() -> None:
    code = "import sys, orchestrator; print(sorted({'sqlalchemy', 'apscheduler'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_prompts_are_package_data_of_the_run_room() -> None:
    from importlib import resources

    prompts = resources.files("orchestrator.run").joinpath("prompts")
    assert prompts.joinpath("system.md").is_file()
