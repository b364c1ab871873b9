"""A run: the supervisor, one session per agent, the finish, and the coordination fold over run events.

Other rooms and packages import only these names; `prompts.py` and the `prompts/*.md` templates are
this room's package data.
"""

from orchestrator.run.coordination import AgentView, Answer, Choice, CoordinationState, Phase, rebuild_state
from orchestrator.run.emitter import Subscriber
from orchestrator.run.supervisor import (
    ModelFactory,
    RunHandle,
    Terminal,
    default_models,
    resume_run,
    start_run,
)
from orchestrator.run.view import ActionResult, AgentCard, PendingApproval, RunView, ViewPhase

__all__ = [
    "ActionResult",
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
]
