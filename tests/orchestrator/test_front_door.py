"""The orchestrator's front doors: a sorted `__all__` that is exactly the public API."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

DOORS = {
    "orchestrator": [
        "RUN_EVENT_ADAPTER",
        "TERMINAL_KINDS",
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
        "ProviderConfigError",
        "ProviderError",
        "RunCancelled",
        "RunContext",
        "RunEvent",
        "RunFailed",
        "RunFinished",
        "RunHandle",
        "RunNotResumable",
        "RunStarted",
        "RunStatus",
        "RunStore",
        "RunStoreError",
        "RunSummary",
        "RunTools",
        "RunToolsFactory",
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
        "close_model_client",
        "create_run_schema",
        "default_models",
        "default_team",
        "load_team",
        "parse_team",
        "rebuild_state",
        "resume_run",
        "start_run",
        "to_line",
        "warm_up",
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
