"""Strict local stand-ins of the GitHub and GitLab REST APIs, over local bare repositories.

For the tests and the playground: a run on a repository ends in a pull request without any account.
Served paths (JSON unless said):
- GitHub: `POST /repos/{o}/{r}/pulls`, `GET /repos/{o}/{r}/pulls?head=o:branch&state=open`,
  `GET /repos/{o}/{r}/installation`, `POST /app/installations/{id}/access_tokens` (App JWT checked).
- GitLab: `POST /projects/{id}/merge_requests`, `GET /projects/{id}/merge_requests?source_branch=…`.
- HTML: `/{o}/{r}/pull/{n}` and `/{path}/-/merge_requests/{n}`: the request with its diff.
Like the real ones: a token is required (401 otherwise), fields are validated (422 GitHub, 400
GitLab), both branches must exist in the repository, and a second open request for one branch is
refused (GitHub 422 "A pull request already exists", GitLab 409).
"""

from __future__ import annotations

import html
import json
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt


@dataclass(slots=True)
class StandInRequest:
    """One pull/merge request the stand-in holds."""

    number: int
    project: str
    title: str
    head: str
    base: str
    body: str
    forge: str
    state: str = "open"


@dataclass(slots=True)
class ForgeState:
    """What the stand-in knows: repositories (project -> bare repo), tokens, requests, calls seen."""

    repos: dict[str, Path]
    token: str
    app_public_key: str | None = None  # PEM: GitHub App JWTs are verified with it
    requests: list[StandInRequest] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    installation_tokens: int = 0
    token_lifetime_s: float = 3600.0  # of an App installation token, like GitHub's hour


class ForgeStandIn:
    """A threaded HTTP server of both APIs; `url` is its base (GitHub `api_url`, GitLab `…/api/v4`)."""

    def __init__(
        self,
        repos: dict[str, Path],
        *,
        token: str = "stand-in-token",  # noqa: S107 (a test token)
        app_public_key: str | None = None,
    ) -> None:
        self.state = ForgeState(repos=dict(repos), token=token, app_public_key=app_public_key)
        state = self.state

        class Handler(_Handler):
            forge = state

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ForgeStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def gitlab_url(self) -> str:
        """The GitLab API base (`api_url` of a `forge: gitlab` repository)."""
        return f"{self.url}/api/v4"

    def diff(self, request: StandInRequest) -> str:
        """The request's diff as the forge shows it: merge base of `base` to `head`."""
        return _git(self.state.repos[request.project], "diff", f"{request.base}...{request.head}")


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", f"--git-dir={repo}", *args],
        capture_output=True,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "HOME": "/nonexistent",
        },
    )
    return proc.stdout.decode(errors="replace") if proc.returncode == 0 else ""


def _branch_exists(repo: Path, branch: str) -> bool:
    return bool(_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").strip())


class _Handler(BaseHTTPRequestHandler):
    forge: ForgeState

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.forge.lock:
            self.forge.calls.append((method, self.path))
        parts = [unquote(p) for p in url.path.split("/") if p]  # GitLab ids are `group%2Fname`
        if method == "GET" and _is_page(parts):
            return self._page(parts)
        if parts[:2] == ["api", "v4"]:
            return self._gitlab(method, parts[2:], query)
        return self._github(method, parts, query)

    # ---- GitHub ----------------------------------------------------------------------------------
    def _github(self, method: str, parts: list[str], query: dict[str, str]) -> None:
        if parts[:2] == ["app", "installations"] and len(parts) == 4 and method == "POST":
            return self._app_token()
        if len(parts) == 4 and parts[0] == "repos" and parts[3] == "installation" and method == "GET":
            if not self._app_jwt():
                return self._send(401, {"message": "A JSON web token could not be decoded"})
            return self._send(200, {"id": 4242})
        if len(parts) != 4 or parts[0] != "repos" or parts[3] != "pulls":
            return self._send(404, {"message": "Not Found"})
        if self.headers.get("Authorization") not in (
            f"Bearer {self.forge.token}",
            f"token {self.forge.token}",
        ):
            return self._send(401, {"message": "Bad credentials"})
        project = f"{parts[1]}/{parts[2]}"
        repo = self.forge.repos.get(project)
        if repo is None:
            return self._send(404, {"message": "Not Found"})
        if method == "GET":
            head = query.get("head", "")
            owner, _, branch = head.partition(":")
            state = query.get("state", "open")
            found = [
                r for r in self._of(project)
                if (not head or (owner == parts[1] and r.head == branch))
                and (state == "all" or r.state == state)
            ]  # fmt: skip
            return self._send(200, [self._github_item(r) for r in found])
        body = self._body()
        if body is None:
            return self._send(400, {"message": "Problems parsing JSON"})
        errors = [
            {"resource": "PullRequest", "field": name, "code": "missing_field"}
            for name in ("title", "head", "base")
            if not isinstance(body.get(name), str) or not body[name]
        ]
        if errors:
            return self._send(422, {"message": "Validation Failed", "errors": errors})
        for name in ("head", "base"):
            if not _branch_exists(repo, body[name]):
                error = {"resource": "PullRequest", "field": name, "code": "invalid"}
                return self._send(422, {"message": "Validation Failed", "errors": [error]})
        with self.forge.lock:
            if any(r.head == body["head"] and r.state == "open" for r in self._of(project)):
                message = f"A pull request already exists for {parts[1]}:{body['head']}."
                return self._send(422, {"message": "Validation Failed", "errors": [{"message": message}]})
            made = self._add(
                project, body["title"], body["head"], body["base"], str(body.get("body") or ""), "github"
            )
        self._send(201, self._github_item(made))

    def _github_item(self, r: StandInRequest) -> dict[str, Any]:
        host = self.headers.get("Host", "127.0.0.1")
        return {
            "number": r.number,
            "title": r.title,
            "state": r.state,
            "body": r.body,
            "html_url": f"http://{host}/{r.project}/pull/{r.number}",
            "head": {"ref": r.head},
            "base": {"ref": r.base},
        }

    def _app_jwt(self) -> bool:
        key = self.forge.app_public_key
        auth = self.headers.get("Authorization", "")
        if key is None or not auth.startswith("Bearer "):
            return False
        try:
            jwt.decode(auth[7:], key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return True

    def _app_token(self) -> None:
        if not self._app_jwt():
            return self._send(401, {"message": "A JSON web token could not be decoded"})
        with self.forge.lock:
            self.forge.installation_tokens += 1
        expires = datetime.now(UTC) + timedelta(seconds=self.forge.token_lifetime_s)
        self._send(201, {"token": self.forge.token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")})

    # ---- GitLab ----------------------------------------------------------------------------------
    def _gitlab(self, method: str, parts: list[str], query: dict[str, str]) -> None:
        if len(parts) != 3 or parts[0] != "projects" or parts[2] != "merge_requests":
            return self._send(404, {"message": "404 Not Found"})
        if self.headers.get("PRIVATE-TOKEN") != self.forge.token:
            return self._send(401, {"message": "401 Unauthorized"})
        project = parts[1]
        repo = self.forge.repos.get(project)
        if repo is None:
            return self._send(404, {"message": "404 Project Not Found"})
        if method == "GET":
            source, state = query.get("source_branch"), query.get("state", "all")
            found = [
                r for r in self._of(project)
                if (source is None or r.head == source) and (state == "all" or r.state == state)
            ]  # fmt: skip
            return self._send(200, [self._gitlab_item(r) for r in found])
        body = self._body()
        if body is None:
            return self._send(400, {"message": "400 Bad request"})
        missing = [
            n
            for n in ("title", "source_branch", "target_branch")
            if not isinstance(body.get(n), str) or not body[n]
        ]
        if missing:
            return self._send(400, {"error": f"{', '.join(missing)} is missing"})
        for name in ("source_branch", "target_branch"):
            if not _branch_exists(repo, body[name]):
                return self._send(400, {"message": {name: ["is invalid"]}})
        with self.forge.lock:
            if any(r.head == body["source_branch"] and r.state == "opened" for r in self._of(project)):
                message = [f"Another open merge request already exists for this source branch: !{project}"]
                return self._send(409, {"message": message})
            made = self._add(
                project, body["title"], body["source_branch"], body["target_branch"],
                str(body.get("description") or ""), "gitlab",
            )  # fmt: skip
        self._send(201, self._gitlab_item(made))

    def _gitlab_item(self, r: StandInRequest) -> dict[str, Any]:
        host = self.headers.get("Host", "127.0.0.1")
        return {
            "iid": r.number,
            "title": r.title,
            "state": r.state,
            "description": r.body,
            "web_url": f"http://{host}/{r.project}/-/merge_requests/{r.number}",
            "source_branch": r.head,
            "target_branch": r.base,
        }

    # ---- shared ----------------------------------------------------------------------------------
    def _of(self, project: str) -> list[StandInRequest]:
        return [r for r in self.forge.requests if r.project == project]

    def _add(self, project: str, title: str, head: str, base: str, body: str, forge: str) -> StandInRequest:
        made = StandInRequest(
            number=len(self._of(project)) + 1, project=project, title=title, head=head, base=base, body=body,
            forge=forge, state="open" if forge == "github" else "opened",
        )  # fmt: skip
        self.forge.requests.append(made)
        return made

    def _page(self, parts: list[str]) -> None:
        number = int(parts[-1])
        project = "/".join(parts[:-2] if parts[-2] == "pull" else parts[:-3])
        found = [r for r in self._of(project) if r.number == number]
        if not found:
            return self._send_html(404, "<h1>Not found</h1>")
        r = found[0]
        diff = _git(self.forge.repos[project], "diff", f"{r.base}...{r.head}")
        page = (
            f"<!doctype html><meta charset=utf-8><title>{html.escape(r.title)}</title>"
            f"<h1>{html.escape(r.title)} <small>#{r.number}</small></h1>"
            f"<p>{html.escape(r.project)}: <code>{html.escape(r.head)}</code> into "
            f"<code>{html.escape(r.base)}</code> ({html.escape(r.state)})</p>"
            f"<pre>{html.escape(r.body)}</pre><h2>Diff</h2><pre class=diff>{html.escape(diff)}</pre>"
        )
        self._send_html(200, page)

    def _body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get_content_type() != "application/json" or length > 1_000_000:
            return None
        try:
            data = json.loads(self.rfile.read(length))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_html(self, status: int, page: str) -> None:
        data = page.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _is_page(parts: list[str]) -> bool:
    if len(parts) >= 4 and parts[-2] == "pull" and parts[-1].isdigit():
        return True
    return len(parts) >= 4 and parts[-3:-1] == ["-", "merge_requests"] and parts[-1].isdigit()


DEMO_PROJECT = "playground/demo"
DEMO_TOKEN_ENV = "MASSGEN_PLAYGROUND_FORGE_TOKEN"  # noqa: S105 (a variable name)
_DEMO_FILES = {
    "README.md": "# demo\n\nA tiny project for the playground: ask the agents to fix `total()`.\n",
    "billing.py": "def total(prices):\n    return sum(prices) + 1  # off by one\n",
    "test_billing.py": "from billing import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
}


def demo_remote(folder: Path) -> Path:
    """A local bare repository (`folder/demo.git`) with one commit of a tiny project on `main`."""
    remote, seed = folder / "demo.git", folder / "demo-seed"
    if (remote / "HEAD").is_file():
        return remote
    env = {
        "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "playground", "GIT_AUTHOR_EMAIL": "p@local",
        "GIT_COMMITTER_NAME": "playground", "GIT_COMMITTER_EMAIL": "p@local",
    }  # fmt: skip

    def git(*args: str) -> None:
        subprocess.run(["git", *args], env=env, check=True, capture_output=True)

    git("init", "-q", "--bare", "--initial-branch=main", str(remote))
    git("init", "-q", "--initial-branch=main", str(seed))
    for rel, text in _DEMO_FILES.items():
        (seed / rel).write_text(text)
    git("-C", str(seed), "add", "-A")
    git("-C", str(seed), "commit", "-q", "-m", "demo project")
    git("-C", str(seed), "push", "-q", str(remote), "main")
    return remote
