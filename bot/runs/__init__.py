"""A run in Slack: its supervisor, status message (view, presenter, blocks) and use cases."""

from bot.runs.blocks import ANSWER_GONE, apply_line, help_text, salvage_phrase
from bot.runs.history import RunHistory, SlackRun
from bot.runs.models import SharedModels
from bot.runs.presenter import retire_status
from bot.runs.repositories import RunRepositories, repository_metadata
from bot.runs.request import RunRequest
from bot.runs.submitter import RunSubmitter
from bot.runs.supervisor import ActiveRun, ExecutorOptions, RunSupervisor, ToolsBuilder
from bot.runs.teams import TeamCatalog, TeamChoice, TeamNotFound
from bot.runs.use_cases import RunUseCases, Where

__all__ = [
    "ANSWER_GONE",
    "ActiveRun",
    "ExecutorOptions",
    "RunHistory",
    "RunRepositories",
    "RunRequest",
    "RunSubmitter",
    "RunSupervisor",
    "RunUseCases",
    "SharedModels",
    "SlackRun",
    "TeamCatalog",
    "TeamChoice",
    "TeamNotFound",
    "ToolsBuilder",
    "Where",
    "apply_line",
    "help_text",
    "repository_metadata",
    "retire_status",
    "salvage_phrase",
]
