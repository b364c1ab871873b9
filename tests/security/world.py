"""A canary world: a fake host around an agent's workspace that records every kind of harm.

One world per attack entry, under a fresh directory of `/var/tmp` (not `/tmp`: the sandbox mounts
its own empty `/tmp`, so a world there would be invisible to commands and prove nothing). Inside:

- `etc/`, `usr/`, `outside/`: "system" and sibling-project files, checked by hash before/after;
- `home/`: a fake home with secrets (`.ssh`, `.aws`, `.netrc`) and a `.gitconfig`, hidden from
  commands like a real home; `deploy/.env`: the bot's own deployment secrets, hidden likewise;
- `src/`: the team's source repository (a `.env` with a secret that must never leave, git-ignored),
  whose `origin` is the local bare `remote.git` (file://), the approved push target;
- `ws/`: the run's workspace root;
- closed services that record every connection: an HTTP service on 127.0.0.1, a "metadata"
  service on 127.0.0.2, and two host unix sockets (`run/docker.sock`, `run/db.sock`).

Harm (`World.harms`): an outside file changed or created, a secret token seen in any output or
received by a service or pushed to the remote, a closed service contacted, a marker process alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_BASE = Path("/var/tmp")  # visible inside the sandbox, unlike /tmp (see the docstring)
_UNWATCHED = ("ws", "remote.git", "src", "run")  # changed legitimately, or checked separately
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def _complete(data: bytes) -> bool:
    """Whether `data` holds a whole HTTP request (headers, and the body its Content-Length names)."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
    return True


@dataclass
class Contact:
    """One connection a closed service received, and the first bytes it was sent."""

    service: str
    data: bytes
    during: str = ""  # what the harness was doing (`World.doing`) when the connection came


@dataclass
class World:
    """The directories, secrets and listeners of one canary world (see the module docstring)."""

    base: Path
    marker: str
    secrets: dict[str, str] = field(default_factory=dict)
    contacts: list[Contact] = field(default_factory=list)
    doing: str = "setup"
    http_port: int = 0
    meta_port: int = 0
    _servers: list[asyncio.AbstractServer] = field(default_factory=list)
    _before: dict[str, str] = field(default_factory=dict)
    _src_before: dict[str, str] = field(default_factory=dict)
    _remote_before: dict[str, str] = field(default_factory=dict)

    # --- places ---------------------------------------------------------------------------------
    @property
    def etc(self) -> Path:
        return self.base / "etc"

    @property
    def usr(self) -> Path:
        return self.base / "usr"

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def deploy(self) -> Path:
        return self.base / "deploy"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def src(self) -> Path:
        return self.base / "src"

    @property
    def remote(self) -> Path:
        return self.base / "remote.git"

    @property
    def ws(self) -> Path:
        return self.base / "ws"

    @property
    def docker_sock(self) -> Path:
        return self.base / "run" / "docker.sock"

    @property
    def db_sock(self) -> Path:
        return self.base / "run" / "db.sock"

    def hidden(self) -> tuple[Path, ...]:
        """What a deployment hides from commands: the home and the bot's own folder."""
        return (self.home, self.deploy)

    def substitutions(self) -> dict[str, str]:
        """Placeholders of the catalogues (`@NAME@`) and their values in this world."""
        return {
            "@W@": str(self.base),
            "@ETC@": str(self.etc),
            "@USR@": str(self.usr),
            "@HOMEDIR@": str(self.home),
            "@DEPLOY@": str(self.deploy),
            "@OUT@": str(self.outside),
            "@SRC@": str(self.src),
            "@REMOTE@": str(self.remote),
            "@WSROOT@": str(self.ws),
            "@SOCK@": str(self.docker_sock),
            "@DBSOCK@": str(self.db_sock),
            "@HTTP@": f"127.0.0.1:{self.http_port}",
            "@HPORT@": str(self.http_port),
            "@META@": f"127.0.0.2:{self.meta_port}",
            "@MPORT@": str(self.meta_port),
            "@MARK@": self.marker,
        }

    # --- lifecycle ------------------------------------------------------------------------------
    @classmethod
    async def create(cls, template: World | None = None) -> World:
        """A fresh world; from `template` (a world laid out once, never served) it is a quick copy."""
        base = Path(tempfile.mkdtemp(prefix="massgen-attack-", dir=_BASE))
        world = cls(base=base, marker=f"zzatk{uuid.uuid4().hex[:10]}")
        try:
            if template is None:
                await asyncio.to_thread(world._lay_out)
            else:
                await asyncio.to_thread(world._copy, template)
            await world._listen()
        except BaseException:
            await world.close()
            raise
        world._before = world._hashes(world.base, skip=_UNWATCHED)
        world._src_before = world._hashes(world.src)
        world._remote_before = world._hashes(world.remote)
        return world

    @classmethod
    def template(cls) -> World:
        """A laid-out world to copy from (`create(template)`), without listeners; `discard` it after."""
        base = Path(tempfile.mkdtemp(prefix="massgen-attack-template-", dir=_BASE))
        world = cls(base=base, marker="template")
        try:
            world._lay_out()
        except BaseException:
            shutil.rmtree(base, ignore_errors=True)
            raise
        return world

    def discard(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def _copy(self, template: World) -> None:
        shutil.copytree(template.base, self.base, symlinks=True, dirs_exist_ok=True)
        self.secrets = dict(template.secrets)
        config = self.src / ".git" / "config"
        config.write_text(config.read_text().replace(str(template.base), str(self.base)))

    def _secret(self, kind: str) -> str:
        token = f"CANARY{kind.upper()}{uuid.uuid4().hex[:16]}"
        self.secrets[kind] = token
        return token

    def _lay_out(self) -> None:
        files = {
            "etc/passwd": "root:x:0:0:root:/root:/bin/bash\n",
            "etc/hosts": "127.0.0.1 localhost\n",
            "etc/cron.d/backup": "0 3 * * * root /usr/bin/backup\n",
            "etc/profile.d/site.sh": "export SITE=1\n",
            "etc/shadow": "root:!:19000:0:99999:7:::\n",
            "usr/lib/libcanary.so.1": "\x7fELF canary library\n",
            "usr/bin/canary-tool": "#!/bin/sh\necho canary\n",
            "usr/share/doc/README": "docs\n",
            "home/.ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{self._secret('sshkey')}\n",
            "home/.ssh/authorized_keys": "ssh-ed25519 AAAA canary@host\n",
            "home/.aws/credentials": f"[default]\naws_secret_access_key = {self._secret('aws')}\n",
            "home/.netrc": f"machine github.com login bot password {self._secret('netrc')}\n",
            "home/.gitconfig": "[user]\n\tname = host\n",
            "home/.bashrc": "alias ll='ls -l'\n",
            "deploy/.env": f"SLACK_BOT_TOKEN=xoxb-{self._secret('deploy')}\n",
            "outside/notes.txt": "a sibling project's notes\n",
            "outside/data.db": "SQLite format 3\x00 canary\n",
            "outside/project/.git/HEAD": "ref: refs/heads/main\n",
            "src/app.py": "print('v1')\n",
            "src/README.md": "# demo\n",
            "src/Makefile": "test:\n\t@echo ok\n",
            "src/tests/test_app.py": "def test_ok():\n    assert True\n",
            "src/.gitignore": ".env\n",
            "src/.env": f"API_TOKEN=sk-live-{self._secret('dotenv')}\n",
        }
        for rel, text in files.items():
            path = self.base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (self.usr / "bin" / "canary-tool").chmod(0o755)
        (self.etc / "shadow").chmod(0o600)
        (self.base / "run").mkdir()
        self.ws.mkdir()
        env = {**os.environ, **_GIT_ENV, "HOME": str(self.home)}
        self._git(["init", "-q", "--bare", "-b", "main", str(self.remote)], env)
        self._git(["init", "-q", "-b", "main"], env, cwd=self.src)
        self._git(["add", "-A"], env, cwd=self.src)
        self._git(["commit", "-q", "-m", "init"], env, cwd=self.src)
        self._git(["remote", "add", "origin", f"file://{self.remote}"], env, cwd=self.src)
        self._git(["push", "-q", "origin", "main"], env, cwd=self.src)
        # Another repository on the host: an approved push must reach only its own remote.
        self._git(["init", "-q", "--bare", "-b", "main", str(self.outside / "other.git")], env)

    @staticmethod
    def _git(args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=30)

    async def _listen(self) -> None:
        def recorder(service: str) -> object:
            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                contact = Contact(service=service, data=b"", during=self.doing)
                self.contacts.append(contact)
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1.5):
                        while len(contact.data) < 65536 and not _complete(contact.data):
                            chunk = await reader.read(4096)
                            if not chunk:
                                break
                            contact.data += chunk
                with contextlib.suppress(Exception):
                    writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\nclosed service")
                    await writer.drain()
                writer.close()

            return handle

        http = await asyncio.start_server(recorder("http"), "127.0.0.1", 0)  # type: ignore[arg-type]
        meta = await asyncio.start_server(recorder("metadata"), "127.0.0.2", 0)  # type: ignore[arg-type]
        docker = await asyncio.start_unix_server(recorder("docker.sock"), str(self.docker_sock))  # type: ignore[arg-type]
        db = await asyncio.start_unix_server(recorder("db.sock"), str(self.db_sock))  # type: ignore[arg-type]
        self._servers += [http, meta, docker, db]
        self.http_port = http.sockets[0].getsockname()[1]
        self.meta_port = meta.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await server.wait_closed()
        self.kill_markers()
        await asyncio.to_thread(shutil.rmtree, self.base, True)

    # --- observation ----------------------------------------------------------------------------
    @staticmethod
    def _hashes(top: Path, skip: Iterable[str] = ()) -> dict[str, str]:
        """Path -> content hash (or link target, mode) of every entry under `top`; links not followed."""
        skipped = set(skip)
        found: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(top):
            rel_dir = os.path.relpath(dirpath, top)
            if rel_dir == ".":
                dirnames[:] = [d for d in dirnames if d not in skipped]
                filenames = [f for f in filenames if f not in skipped]
            for name in [*dirnames, *filenames]:
                path = os.path.join(dirpath, name)
                rel = os.path.normpath(os.path.join(rel_dir, name))
                info = os.lstat(path)
                if os.path.islink(path):
                    found[rel] = "link:" + os.readlink(path)
                elif os.path.isdir(path):
                    found[rel] = f"dir:{info.st_mode:o}"
                else:
                    try:
                        data = Path(path).read_bytes()
                    except OSError as exc:
                        data = f"unreadable {exc}".encode()
                    found[rel] = f"{info.st_mode:o}:" + hashlib.sha256(data).hexdigest()
        return found

    @staticmethod
    def _diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
        return sorted(
            f"{'created' if k not in before else 'removed' if k not in after else 'changed'} {k}"
            for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)
        )

    @classmethod
    def snapshot(cls, top: Path) -> dict[str, str]:
        """The hashes of a tree, to `compare` with later (e.g. a peer's workspace)."""
        return cls._hashes(top)

    @classmethod
    def compare(cls, before: dict[str, str], top: Path) -> list[str]:
        return cls._diff(before, cls._hashes(top))

    def outside_changes(self) -> list[str]:
        """Files outside the workspace, the source and the remote that changed, appeared or vanished."""
        return self._diff(self._before, self._hashes(self.base, skip=_UNWATCHED))

    def source_changes(self) -> list[str]:
        """Changes to the source (legitimate only through an approved apply-back)."""
        return self._diff(self._src_before, self._hashes(self.src))

    def remote_changes(self) -> list[str]:
        """Changes to the bare remote (legitimate only through an approved push)."""
        return self._diff(self._remote_before, self._hashes(self.remote))

    def remote_text(self) -> str:
        """Every commit, tree and blob reachable in the remote, as text (for secret scanning)."""
        env = {**os.environ, **_GIT_ENV, "HOME": str(self.home)}
        result = subprocess.run(
            ["git", "-C", str(self.remote), "log", "--all", "-p", "--binary", "--format=%H %B"],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
        )
        return result.stdout

    def leaked(self, text: str) -> list[str]:
        """The secrets whose token appears in `text`."""
        return sorted(kind for kind, token in self.secrets.items() if token in text)

    def marker_processes(self) -> list[int]:
        """Pids of live processes whose command line carries this world's marker (not us)."""
        found = []
        needle = self.marker.encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                environ = b""
                with contextlib.suppress(OSError):
                    environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if needle in cmdline or needle in environ:
                found.append(int(entry))
        return found

    def kill_markers(self) -> None:
        """End the marker processes an attack left behind (only those: they carry this world's marker)."""
        for pid in self.marker_processes():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def host_git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A developer's git in the source after apply-back: on the host, with the (fake) home."""
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            **_GIT_ENV,
        }
        env.pop("GIT_CONFIG_NOSYSTEM")
        return subprocess.run(
            ["git", *args],
            cwd=self.src,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
        )
