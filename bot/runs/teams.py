"""Which team a Slack run uses: the default (`--team FILE` / built-in) or a named file in the teams folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.slack.parse import StartRun
from orchestrator import TeamConfig, TeamConfigError, default_team, load_team, missing_model_files


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamChoice:
    """A team ready to run, with the name shown in Slack."""

    name: str
    team: TeamConfig


class TeamNotFound(LookupError):
    """The user named a team or agent that does not exist; the message is safe to show."""


class TeamCatalog:
    """Resolves `/massgen --team NAME --agents a,b --policy P` against the default team and `teams_dir`."""

    def __init__(
        self, default: TeamConfig, *, default_name: str = "default", teams_dir: Path = Path("teams")
    ):
        self.default = TeamChoice(name=default_name, team=default)
        self._dir = teams_dir

    @classmethod
    def load(cls, team_file: Path | None, teams_dir: Path) -> TeamCatalog:
        """From `--team FILE` (or the built-in default team); raises `TeamConfigError` on a bad file."""
        if team_file is None:
            return cls(default_team(), teams_dir=teams_dir)
        return cls(load_team(team_file), default_name=team_file.stem, teams_dir=teams_dir)

    def problems(self) -> dict[str, str]:
        """Named teams that would be refused now (a bad file, a missing model file): name -> why.

        Said at start-up, so an operator hears it before a user's `--team NAME` does; the files are
        read again at each run, so a fix needs no restart.
        """
        found = {}
        for name in self.names():
            try:
                self.startable(StartRun(task="", team=name))
            except TeamNotFound as exc:
                found[name] = str(exc)
        return found

    def names(self) -> list[str]:
        """Named teams available in the teams folder."""
        if not self._dir.is_dir():
            return []
        return sorted({p.stem for p in self._dir.iterdir() if p.suffix in {".yaml", ".yml"}})

    def choose(self, command: StartRun) -> TeamChoice:
        """The team for one run, with `--agents` and `--policy` applied; raises `TeamNotFound`."""
        choice = self.default if command.team is None else self._named(command.team)
        team = choice.team
        if command.agents:
            known = {agent.id for agent in team.agents}
            unknown = [a for a in command.agents if a not in known]
            if unknown:
                names = ", ".join(sorted(known))
                raise TeamNotFound(f"Unknown agent `{unknown[0]}` in team `{choice.name}`. Agents: {names}.")
            team = team.model_copy(update={"agents": [a for a in team.agents if a.id in command.agents]})
        if command.policy is not None:
            permissions = team.permissions.model_copy(update={"policy": command.policy})
            team = team.model_copy(update={"permissions": permissions})
        return TeamChoice(name=choice.name, team=team)

    def startable(self, command: StartRun) -> TeamChoice:
        """`choose`, for a new run: a team whose local model file is missing is refused now, in one
        line, rather than started and failed at its first model call. (Who may stop a run is still
        judged by its team whatever its model files: `choose`.)"""
        choice = self.choose(command)
        if (missing := _missing_models(choice.team)) is not None:
            raise TeamNotFound(f"Team `{choice.name}` cannot run here: {missing}.")
        return choice

    def _named(self, name: str) -> TeamChoice:
        # `name` was validated by the parser (no slashes, no leading dot), so it cannot leave the folder.
        for suffix in (".yaml", ".yml"):
            path = self._dir / f"{name}{suffix}"
            if path.is_file():
                try:
                    return TeamChoice(name=name, team=load_team(path))
                except TeamConfigError as exc:
                    raise TeamNotFound(f"Team `{name}` has an error: {exc}") from exc
        available = ", ".join(self.names()) or "none"
        raise TeamNotFound(f"No team named `{name}` in {self._dir}/. Available: {available}.")


def _missing_models(team: TeamConfig) -> str | None:
    """The team's local agents whose model file is not there, in one line (None: all are)."""
    missing = missing_model_files(team)
    return "; ".join(f"agent `{agent}`: {why}" for agent, why in missing.items()) or None
