"""Forge REST calls: open (or find) the pull/merge request of a branch; GitHub App installation tokens.

GitHub: `GET /repos/{o}/{r}/pulls?head={o}:{branch}&state=open`, `POST /repos/{o}/{r}/pulls`.
GitLab: `GET /projects/{id}/merge_requests?source_branch=…&state=opened`, `POST …/merge_requests`.
Finding first is what keeps a follow-up from opening a second request for the same branch; a
create that races another (GitHub 422, GitLab 409) looks again instead of failing.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
import jwt

from orchestrator.config.repos import RepositoryConfig
from orchestrator.errors import OrchestratorError

HTTP_TIMEOUT_S = 30.0
_REFRESH_MARGIN_S = 300.0  # an installation token this close to expiry is replaced


class ForgeError(OrchestratorError):
    """A forge call failed (status and the forge's message in the text), or credentials are missing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenedRequest:
    """The pull (merge) request of a branch: its page, number, title, and whether this call made it."""

    url: str
    number: int
    title: str
    created: bool


class Credentials:
    """Tokens of the configured repositories; GitHub App installation tokens cached and refreshed."""

    def __init__(self, environ: dict[str, str] | None = None, clock: object = time.time) -> None:
        self._environ = environ
        self._clock = clock
        self._cache: dict[tuple[int, str], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def token(self, repository: RepositoryConfig) -> str | None:
        """The token for `repository` (None: none configured, e.g. a `file://` remote)."""
        creds = repository.credentials
        if creds.token_env is not None:
            env = os.environ if self._environ is None else self._environ
            value = env.get(creds.token_env)
            if not value:
                raise ForgeError(f"repository {repository.name}: ${creds.token_env} is not set")
            return value
        if creds.app_id is None:
            return None
        with self._lock:
            return self._installation_token(repository)

    def git_auth(self, repository: RepositoryConfig) -> dict[str, str]:
        """Environment for a trusted git call: the token as an HTTP header (never in argv or a URL)."""
        if not repository.url.startswith(("https://", "http://")):
            return {}  # file://, ssh://: no HTTP header (ssh keys are the host's)
        token = self.token(repository)
        if token is None:
            return {}
        user = "oauth2" if repository.forge == "gitlab" else "x-access-token"
        basic = base64.b64encode(f"{user}:{token}".encode()).decode()
        return {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def _installation_token(self, repository: RepositoryConfig) -> str:
        creds = repository.credentials
        assert creds.app_id is not None
        assert creds.private_key_file is not None
        key = (creds.app_id, repository.project_path)
        cached = self._cache.get(key)
        if cached is not None and cached[1] - self._now() > _REFRESH_MARGIN_S:
            return cached[0]
        try:
            private_key = creds.private_key_file.read_text()
        except OSError as exc:
            raise ForgeError(f"repository {repository.name}: cannot read the App key: {exc}") from exc
        now = int(self._now())
        app_jwt = jwt.encode(
            {"iat": now - 60, "exp": now + 540, "iss": str(creds.app_id)}, private_key, "RS256"
        )
        headers = {"Authorization": f"Bearer {app_jwt}", "Accept": "application/vnd.github+json"}
        api = repository.api
        assert api is not None
        with httpx2.Client(timeout=HTTP_TIMEOUT_S, headers=headers) as client:
            installation = creds.installation_id
            if installation is None:
                found = _json(
                    client.get(f"{api}/repos/{repository.project_path}/installation"), "installation"
                )
                installation = int(found["id"])
            made = _json(client.post(f"{api}/app/installations/{installation}/access_tokens"), "token")
        token = str(made["token"])
        expires = _parse_expiry(str(made.get("expires_at", "")), self._now() + 3600)
        self._cache[key] = (token, expires)
        return token


def open_request(
    repository: RepositoryConfig, token: str | None, *, branch: str, base: str, title: str, body: str
) -> OpenedRequest:
    """The open request for `branch` (found, or created now); `ForgeError` on any forge refusal."""
    api = repository.api
    if api is None:
        raise ForgeError(f"repository {repository.name} has forge: none (push only)")
    if token is None:
        raise ForgeError(f"repository {repository.name} has no credentials for its forge")
    if repository.forge == "github":
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
    else:
        headers = {"PRIVATE-TOKEN": token}
    with httpx2.Client(timeout=HTTP_TIMEOUT_S, headers=headers) as client:
        for attempt in (1, 2):
            found = _find(client, repository, api, branch)
            if found is not None:
                return found
            made = _create(client, repository, api, branch=branch, base=base, title=title, body=body)
            if made is not None or attempt == 2:
                break
    if made is None:
        raise ForgeError(f"the forge refused a request for {branch} and none exists")
    return made


def _find(client: httpx2.Client, repository: RepositoryConfig, api: str, branch: str) -> OpenedRequest | None:
    project = repository.project_path
    if repository.forge == "github":
        owner = project.split("/", 1)[0]
        params = {"head": f"{owner}:{branch}", "state": "open"}
        items = _json(client.get(f"{api}/repos/{project}/pulls", params=params), "pulls")
        key, link = "number", "html_url"
    else:
        params = {"source_branch": branch, "state": "opened"}
        items = _json(
            client.get(f"{api}/projects/{quote(project, safe='')}/merge_requests", params=params), "mrs"
        )
        key, link = "iid", "web_url"
    if not isinstance(items, list) or not items:
        return None
    item = items[0]
    return OpenedRequest(url=str(item[link]), number=int(item[key]), title=str(item["title"]), created=False)


def _create(
    client: httpx2.Client,
    repository: RepositoryConfig,
    api: str,
    *,
    branch: str,
    base: str,
    title: str,
    body: str,
) -> OpenedRequest | None:
    project = repository.project_path
    if repository.forge == "github":
        payload = {"title": title, "head": branch, "base": base, "body": body}
        response = client.post(f"{api}/repos/{project}/pulls", json=payload)
        duplicate, key, link = 422, "number", "html_url"
    else:
        payload = {"title": title, "source_branch": branch, "target_branch": base, "description": body}
        response = client.post(f"{api}/projects/{quote(project, safe='')}/merge_requests", json=payload)
        duplicate, key, link = 409, "iid", "web_url"
    if response.status_code == duplicate:
        return None  # made by someone else meanwhile: find it
    item = _json(response, "create")
    return OpenedRequest(url=str(item[link]), number=int(item[key]), title=str(item["title"]), created=True)


def _json(response: httpx2.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise ForgeError(f"forge {what}: HTTP {response.status_code}: {response.text[:300]}")
    try:
        return response.json()
    except ValueError as exc:
        raise ForgeError(f"forge {what}: not JSON") from exc


def _parse_expiry(text: str, default: float) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default
