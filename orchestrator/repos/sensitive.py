"""Paths in a patch that make code run later (git config, hooks, CI, build and package scripts).

An approver of a patch (apply-back or a pull request) sees every such path named on the request:
these are the files where a change is a change to what runs, not to what is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

_NAMES = frozenset(
    {
        # git, environment and shell start-up
        ".gitconfig", ".gitmodules", ".gitattributes", ".envrc", ".bashrc", ".profile", ".zshrc",
        ".bash_profile", ".bash_login", ".bash_logout", ".zshenv", ".zprofile", ".zlogin", "config.fish",
        "lefthook.yml", ".lefthook.yml", ".pre-commit-config.yaml",
        # build files (their recipes run)
        "Makefile", "GNUmakefile", "makefile", "Justfile", "justfile", "Rakefile", "Taskfile.yml",
        "CMakeLists.txt", "meson.build", "BUILD", "BUILD.bazel", "WORKSPACE", "MODULE.bazel", ".bazelrc",
        "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradlew",
        "gradle-wrapper.properties", "pom.xml", "mvnw", "build.rs", "build.sbt", "Cargo.toml",
        "go.mod", "Vagrantfile", "Dockerfile", "docker-compose.yml", "docker-compose.yaml",
        "compose.yml", "compose.yaml",
        # package manifests and their hooks
        "package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", "Gemfile", "pyproject.toml",
        "setup.py", "setup.cfg", "conftest.py", "tox.ini", "noxfile.py", "sitecustomize.py",
        "usercustomize.py",
        # CI
        ".gitlab-ci.yml", "Jenkinsfile", ".travis.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml",
        ".drone.yml", "appveyor.yml", ".appveyor.yml", "cloudbuild.yaml",
    }
)  # fmt: skip
_DIRS = frozenset(
    {
        ".git", "hooks", ".husky", ".githooks", ".devcontainer", ".circleci", ".vscode", ".idea",
        ".buildkite", ".cargo", ".mvn", ".gitlab",
    }
)  # fmt: skip
_SUFFIXES = (".gitconfig", ".mk", ".cmake", ".pth", ".gradle", ".gradle.kts")
_PREFIXES = (".github/workflows/", ".github/actions/")


def sensitive_paths(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths (in order, each once) whose change changes what runs."""
    found: list[str] = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if not parts:
            continue
        hit = (
            parts[-1] in _NAMES
            or any(part in _DIRS for part in parts[:-1])
            or path.startswith(_PREFIXES)
            or parts[-1].endswith(_SUFFIXES)
        )
        if hit and path not in found:
            found.append(path)
    return tuple(found)


def diff_stat(patch: str) -> tuple[int, int, int]:
    """(files, insertions, deletions) of a unified diff, counted in one pass."""
    files = insertions = deletions = 0
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            files += 1
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            insertions += 1
        elif in_hunk and line.startswith("-"):
            deletions += 1
    return files, insertions, deletions


def stat_text(patch: str) -> str:
    """`git diff --stat`'s summary line for a patch."""
    files, plus, minus = diff_stat(patch)
    text = f"{files} file{'s' if files != 1 else ''} changed"
    if plus:
        text += f", {plus} insertion{'s' if plus != 1 else ''}(+)"
    if minus:
        text += f", {minus} deletion{'s' if minus != 1 else ''}(-)"
    return text
