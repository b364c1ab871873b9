"""A run: the supervisor, one session per agent, the finish, and the coordination fold over run events.

Other rooms and packages import only these names; `prompts.py` and the `prompts/*.md` templates are
this room's package data.
"""

from orchestrator.run.coordination import AgentView, Answer, Choice, CoordinationState, Phase, rebuild_state
from orchestrator.run.driver import RunDriver, drive_run
from orchestrator.run.emitter import Subscriber
from orchestrator.run.launch import RunHandle, default_models, resume_run, start_run, stop_parked_run
from orchestrator.run.supervisor import ModelFactory, Parked, RunOutcome, Suspended, Terminal
from orchestrator.run.view import ActionResult, AgentCard, PendingApproval, RunView, ViewPhase

__all__ = [
    "ActionResult",
    "AgentCard",
    "AgentView",
    "Answer",
    "Choice",
    "CoordinationState",
    "ModelFactory",
    "Parked",
    "PendingApproval",
    "Phase",
    "RunDriver",
    "RunHandle",
    "RunOutcome",
    "RunView",
    "Subscriber",
    "Suspended",
    "Terminal",
    "ViewPhase",
    "default_models",
    "drive_run",
    "rebuild_state",
    "resume_run",
    "start_run",
    "stop_parked_run",
]
