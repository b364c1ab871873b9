"""The parts of a repository run: config, names, sensitive paths, trusted git, forge calls and stand-ins."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.playground.forge import ForgeStandIn
from orchestrator.config.repos import RepoBinding, RepoCredentials, RepositoryConfig
from orchestrator.config.team import parse_team
from orchestrator.errors import TeamConfigError
from orchestrator.repos import (
    Credentials,
    ForgeError,
    RepoCache,
    UnknownRepository,
    bind_repository,
    branch_for,
    open_request,
    plan_publish,
    resolve_repository,
    run_git,
    sensitive_paths,
    stat_text,
    trusted_env,
)
from orchestrator.testing import scripted_team
from tests.orchestrator.repos.remotes import bare_remote, git

AGENTS = "agents: [{id: a, backend: {type: openai, model: m}}]\n"


def test_repositories_section_loads_with_defaults_and_key_files(tmp_path: Path) -> None:
    team = parse_team(
        AGENTS
        + "repositories:\n"
        + "  - {name: billing, url: 'https://github.com/acme/billing.git', credentials: {token_env: TOK}}\n"
        + "  - {name: app, url: 'git@github.com:acme/app.git',"
        + " credentials: {app_id: 7, private_key_file: k.pem}}\n"
        + "  - {name: gl, url: 'https://gitlab.example/grp/sub/proj.git', forge: gitlab,"
        + " api_url: 'https://gitlab.example/api/v4/'}\n",
        base_dir=tmp_path,
    )
    billing, app, gl = team.repositories
    assert (billing.default_branch, billing.forge, billing.api, billing.project_path) == (
        "main", "github", "https://api.github.com", "acme/billing",
    )  # fmt: skip
    assert app.project_path == "acme/app"
    assert app.credentials.private_key_file == tmp_path / "k.pem"
    assert (gl.api, gl.project_path) == ("https://gitlab.example/api/v4", "grp/sub/proj")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{name: a, url: u, credentials: {app_id: 1}}", "needs both app_id and private_key_file"),
        (
            "{name: a, url: u, forge: gitlab, credentials: {app_id: 1, private_key_file: k}}",
            "need forge: github",
        ),
        ("{name: a, url: 'ext::sh -c x'}", "unsupported repository url"),
        ("{name: a, url: u, default_branch: 'a..b'}", "not a branch name"),
        ("{name: a, url: u, forge: bitbucket}", "Input should be"),
        ("{name: a, url: u, token: x}", "Extra inputs"),
    ],
)
def test_bad_repository_entries_name_the_line(tmp_path: Path, entry: str, message: str) -> None:
    with pytest.raises(TeamConfigError, match=message) as raised:
        parse_team(AGENTS + f"repositories:\n  - {entry}\n", base_dir=tmp_path)
    assert raised.value.line == 3


def test_duplicate_names_and_a_binding_in_the_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TeamConfigError, match="duplicate repository name 'a'"):
        parse_team(AGENTS + "repositories: [{name: a, url: u}, {name: a, url: v}]\n", base_dir=tmp_path)
    with pytest.raises(TeamConfigError, match="set by the run"):
        parse_team(
            AGENTS + "workspace: {repository: {repository: {name: a, url: u}, mirror: /x, "
            "base: '" + "a" * 40 + "', branch: massgen/x}}\n",
            base_dir=tmp_path,
        )


def test_an_unknown_name_is_one_line_listing_the_allowed_names() -> None:
    team = scripted_team(1).model_copy(
        update={
            "repositories": [RepositoryConfig(name="web", url="u"), RepositoryConfig(name="billing", url="u")]
        }
    )
    assert resolve_repository(team, " billing ").name == "billing"
    with pytest.raises(UnknownRepository) as raised:
        resolve_repository(team, "payments")
    assert str(raised.value) == "unknown repository 'payments'; you may use: billing, web"
    with pytest.raises(UnknownRepository, match="none are configured"):
        resolve_repository(scripted_team(1), "x")


@pytest.mark.parametrize(
    ("path", "sensitive"),
    [
        (".gitconfig", True), ("vendor/lib/.gitconfig", True), (".github/workflows/ci.yml", True),
        (".gitlab-ci.yml", True), (".envrc", True), ("Makefile", True), ("sub/package.json", True),
        ("pyproject.toml", True), ("setup.py", True), (".pre-commit-config.yaml", True),
        (".devcontainer/devcontainer.json", True), ("tools/hooks/pre-push", True),
        (".husky/pre-commit", True),
        # Found by the blind catalogue (build, CI and start-up files that were not named):
        ("CMakeLists.txt", True), ("cmake/deps.cmake", True), ("build.gradle.kts", True),
        ("pom.xml", True), ("build.rs", True), (".cargo/config.toml", True), ("gradlew", True),
        ("Jenkinsfile", True), (".travis.yml", True), (".zshenv", True), (".bash_profile", True),
        ("lib/python3.11/site-packages/x.pth", True), ("sitecustomize.py", True),
        (".buildkite/pipeline.yml", True), ("docker-compose.yml", True), ("Gemfile", True),
        ("src/app.py", False), ("src/cmake_notes.txt", False), ("pathlib.py", False),
        ("docs/makefile.md", False), ("README.md", False), ("hooks.py", False),
    ],
)  # fmt: skip
def test_sensitive_paths(path: str, sensitive: bool) -> None:
    assert sensitive_paths([path]) == ((path,) if sensitive else ())


def test_stat_counts_only_hunk_lines() -> None:
    patch = (
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,2 +1,2 @@\n-x\n+y\n--- z\n"
        "diff --git a/b b/b\nnew file mode 100644\n--- /dev/null\n+++ b/b\n@@ -0,0 +1 @@\n+q\n"
    )
    assert stat_text(patch) == "2 files changed, 2 insertions(+), 2 deletions(-)"


def test_branch_names_are_what_git_accepts() -> None:
    assert branch_for("run-1a2b") == "massgen/run-1a2b"
    for run_id in ("wf:abc/../x y", "a..b", "x.lock", "..", "-.-", "é" * 300):
        git("check-ref-format", f"refs/heads/{branch_for(run_id)}")
    assert branch_for("wf:abc/../x y") == "massgen/wf-abc-.-x-y"


def test_trusted_env_ignores_the_bots_own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A global config the bot's user has (HOME) or an agent planted is never read."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = planted\n[alias]\n\tst = !touch canary\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))  # nothing of the bot's env leaks in
    env = trusted_env(tmp_path / "empty")
    assert (env["GIT_CONFIG_GLOBAL"], env["GIT_CONFIG_NOSYSTEM"], env["GIT_TERMINAL_PROMPT"]) == (
        os.devnull, "1", "0",
    )  # fmt: skip
    assert "GIT_DIR" not in env
    repo = tmp_path / "r"
    git("init", "-q", str(repo))
    shown = run_git(["config", "--list", "--show-origin"], cwd=repo)
    assert "planted" not in shown
    assert "core.hookspath=/dev/null" in shown.lower()


def _binding(tmp: Path, remote: Path, api: str, forge: str = "github") -> RepoBinding:
    repository = RepositoryConfig(
        name="r", url=f"file://{remote}", forge=forge, api_url=api, project="acme/r",  # type: ignore[arg-type]
        credentials=RepoCredentials(token_env="TOK"),
    )  # fmt: skip
    team = scripted_team(1).model_copy(update={"repositories": [repository]})
    bound = bind_repository(
        team, RepoCache(tmp / "state"), "r", "run-1", credentials=Credentials({"TOK": "t"})
    )
    assert bound.workspace.repository is not None
    assert bound.workspace.apply == "ask"
    assert "command(git push *)" in bound.permissions.rules["deny"]
    return bound.workspace.repository


def test_the_approval_binds_repository_base_branch_and_patch(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, {"f": "1\n"})
    binding = _binding(tmp_path, remote, "http://127.0.0.1:9")
    patch = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-1\n+2\n"
    plan = plan_publish(binding, patch, ("f",), run_id="run-1", requester="U1", task="fix")
    assert plan.context()["diff"] == patch
    assert plan.context()["base_commit"] == git(f"--git-dir={remote}", "rev-parse", "main").strip()
    others = [
        plan_publish(binding, patch + "+3\n", ("f",), run_id="run-1", requester="U1", task="fix"),
        plan_publish(binding.model_copy(update={"branch": "massgen/other"}), patch, ("f",), run_id="run-1",
                     requester="U1", task="fix"),
        plan_publish(binding.model_copy(update={"base": "b" * 40}), patch, ("f",), run_id="run-1",
                     requester="U1", task="fix"),
    ]  # fmt: skip
    assert len({plan.digest, *(o.digest for o in others)}) == 4


def test_a_second_fetch_reuses_the_mirror_and_sees_new_commits(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, {"f": "1\n"})
    first = _binding(tmp_path, remote, "http://127.0.0.1:9")
    objects = first.mirror / "objects"
    marker = objects / "keep-me"
    marker.write_text("")  # a re-clone would lose it
    seed = tmp_path / "seed"
    (seed / "f").write_text("2\n")
    git("commit", "-qam", "two", cwd=seed)
    git("push", "-q", str(remote), "main", cwd=seed)
    second = _binding(tmp_path, remote, "http://127.0.0.1:9")
    assert marker.exists()
    assert second.base != first.base
    tree = RepoCache(tmp_path / "state").tree(second.repository, second.base)
    assert (tree / "f").read_text() == "2\n"
    assert not (tree / ".git").exists()


def test_stand_ins_are_strict_like_the_forges(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, {"f": "1\n"})
    git(f"--git-dir={remote}", "branch", "feature", "main")
    with ForgeStandIn({"acme/r": remote}, token="t") as forge:
        gh = f"{forge.url}/repos/acme/r/pulls"
        auth = {"Authorization": "Bearer t"}
        assert httpx2.post(gh, json={"title": "x", "head": "feature", "base": "main"}).status_code == 401
        missing = httpx2.post(gh, json={"head": "feature", "base": "main"}, headers=auth)
        assert (missing.status_code, missing.json()["errors"][0]["field"]) == (422, "title")
        no_branch = httpx2.post(gh, json={"title": "x", "head": "nope", "base": "main"}, headers=auth)
        assert no_branch.status_code == 422
        ok = httpx2.post(gh, json={"title": "x", "head": "feature", "base": "main"}, headers=auth)
        assert ok.status_code == 201
        again = httpx2.post(gh, json={"title": "y", "head": "feature", "base": "main"}, headers=auth)
        assert again.status_code == 422
        assert "already exists" in again.text
        gl = f"{forge.gitlab_url}/projects/acme%2Fr/merge_requests"
        body = {"title": "x", "source_branch": "feature", "target_branch": "main"}
        assert httpx2.post(gl, json=body).status_code == 401
        assert httpx2.post(gl, json=body, headers={"PRIVATE-TOKEN": "t"}).status_code == 201
        assert httpx2.post(gl, json=body, headers={"PRIVATE-TOKEN": "t"}).status_code == 409
        page = httpx2.get(ok.json()["html_url"])
        assert page.status_code == 200
        assert "<h1>x <small>#1</small></h1>" in page.text


def test_a_create_that_races_another_finds_it(tmp_path: Path) -> None:
    """GitHub's 422 for a duplicate (made between our look and our create) ends in the existing PR."""
    remote = bare_remote(tmp_path, {"f": "1\n"})
    git(f"--git-dir={remote}", "branch", "massgen/x", "main")
    with ForgeStandIn({"acme/r": remote}, token="t") as forge:
        repository = RepositoryConfig(name="r", url="u", api_url=forge.url, project="acme/r")
        made = open_request(repository, "t", branch="massgen/x", base="main", title="t1", body="")
        found = open_request(repository, "t", branch="massgen/x", base="main", title="t2", body="")
        assert (made.created, found.created, found.number, found.title) == (True, False, 1, "t1")
        with pytest.raises(ForgeError, match="HTTP 401"):
            open_request(repository, "wrong", branch="massgen/x", base="main", title="t", body="")
        assert len(forge.state.requests) == 1


def test_github_app_tokens_come_from_a_jwt_and_are_cached(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    (tmp_path / "app.pem").write_bytes(pem)
    remote = bare_remote(tmp_path, {"f": "1\n"})
    with ForgeStandIn({"acme/r": remote}, token="inst-token", app_public_key=public) as forge:
        repository = RepositoryConfig(
            name="r", url="https://example.invalid/acme/r.git", api_url=forge.url, project="acme/r",
            credentials=RepoCredentials(app_id=99, private_key_file=tmp_path / "app.pem"),
        )  # fmt: skip
        credentials = Credentials({})
        assert credentials.token(repository) == "inst-token"
        assert credentials.token(repository) == "inst-token"
        assert forge.state.installation_tokens == 1  # cached while far from expiry
        forge.state.token_lifetime_s = 120  # within the refresh margin: each use gets a new one
        fresh = Credentials({})
        fresh.token(repository)
        fresh.token(repository)
        assert forge.state.installation_tokens == 3
        assert "Authorization: Basic" in credentials.git_auth(repository)["GIT_CONFIG_VALUE_0"]
        other = RepositoryConfig(
            name="r", url="u", api_url=forge.url, project="acme/r",
            credentials=RepoCredentials(app_id=99, private_key_file=tmp_path / "missing.pem"),
        )  # fmt: skip
        with pytest.raises(ForgeError, match="cannot read the App key"):
            Credentials({}).token(other)


def test_a_missing_token_variable_is_named() -> None:
    repository = RepositoryConfig(
        name="r", url="https://h/o/r", credentials=RepoCredentials(token_env="NOPE")
    )
    with pytest.raises(ForgeError, match=r"\$NOPE is not set"):
        Credentials({}).token(repository)
