"""Repositories by name: a run's checkout cost on a 10,000-file repository, and push + PR time.

Per run after the first fetch: `bind_repository` (fetch into the mirror, the base tree checked out
once per commit) plus the run's workspaces (the `.source` links and one copy per agent, three
agents, all taken from what the previous run's refill left ready; `tools.ready`), for a run on an
unchanged branch and for one after a new commit landed (a fresh base tree; the ready copies are
brought to it by the paths the commits differ in). The first run's workspaces, with no ready
copies yet, are shown once, and the load average with each place. Then the
approved publish against the local stand-ins: commit on a private index, push to a `file://`
bare remote, open the pull request on the GitHub stand-in. Goal: bind + workspaces (until the
agents can run a tool) p50 < 1 s.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bot.playground.forge import ForgeStandIn
from orchestrator.config.repos import RepoCredentials, RepositoryConfig
from orchestrator.repos import Credentials, RepoCache, bind_repository, plan_publish, publish
from orchestrator.testing import scripted_team
from orchestrator.tools.workspace import RunWorkspaces

FILES = 10_000
RUNS = 5  # each waits for its refill (seconds on a busy disk; the tmpfs pass shows the copy-free cost)
AGENTS = ("a0", "a1", "a2")
CREDENTIALS = Credentials({"T": "t"})
NEW_FILE = "diff --git a/README b/README\nnew file mode 100644\n"
NEW_FILE += "--- /dev/null\n+++ b/README\n@@ -0,0 +1 @@\n+run {i}\n"
_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
_WHO = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@x",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@x",
}


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**_ENV, **_WHO}, check=True, capture_output=True, text=True
    ).stdout


def _seed(root: Path) -> tuple[Path, Path]:
    remote, seed = root / "remote.git", root / "seed"
    _git("init", "-q", "--bare", "--initial-branch=main", str(remote))
    _git("init", "-q", "--initial-branch=main", str(seed))
    for i in range(FILES):
        folder = seed / f"pkg{i % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    _git("add", "-A", cwd=seed)
    _git("commit", "-q", "-m", "seed", cwd=seed)
    _git("push", "-q", str(remote), "main", cwd=seed)
    return remote, seed


def _advance(seed: Path, remote: Path, n: int) -> None:
    (seed / "pkg00" / "mod0.py").write_text(f"VALUE_0 = {n}\n")
    _git("commit", "-qam", f"change {n}", cwd=seed)
    _git("push", "-q", str(remote), "main", cwd=seed)


def _checkout(team: object, cache: RepoCache, root: Path, run: str) -> tuple[float, float]:
    """(bind: fetch + base tree, workspaces: `.source` + one copy per agent) in seconds."""
    started = time.perf_counter()
    bound = bind_repository(team, cache, "big", run, credentials=CREDENTIALS)  # type: ignore[arg-type]
    bound_at = time.perf_counter()
    source = bound.workspace.source
    spaces = RunWorkspaces.create(root=root / "ws", run_id=run, agent_ids=AGENTS, source=source)
    done = time.perf_counter()
    if spaces.filling is not None:  # the next run's ready copies (runs minutes apart, not timed)
        spaces.filling.join()
    spaces.close()
    return bound_at - started, done - bound_at


def _report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    print(f"   {name:<56} p50 {statistics.median(samples) * 1000:7.0f} ms   p90 {p90 * 1000:7.0f} ms")


def main() -> None:
    places = [Path(tempfile.gettempdir())]
    if Path("/dev/shm").is_dir():
        places.append(Path("/dev/shm"))  # tmpfs: what the copies cost without a busy disk
    for place in places:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"   -- state and workspaces under {place} (load average {load})")
        _bench(place)


def _bench(place: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-repos-", dir=place))
    try:
        remote, seed = _seed(root)
        with ForgeStandIn({"acme/big": remote}, token="t") as forge:
            repository = RepositoryConfig(
                name="big", url=f"file://{remote}", api_url=forge.url, project="acme/big",
                credentials=RepoCredentials(token_env="T"),
            )  # fmt: skip
            team = scripted_team(3).model_copy(update={"repositories": [repository]})
            cache = RepoCache(root / "state")
            started = time.perf_counter()
            bind_repository(team, cache, "big", "first", credentials=CREDENTIALS)
            print(f"   first fetch + base tree ({FILES} files)       {time.perf_counter() - started:7.2f} s")
            _bind_s, copy_s = _checkout(team, cache, root, "cold")
            print(f"   first run's workspaces (no ready copies yet)  {copy_s:7.2f} s")
            same = [_checkout(team, cache, root, f"same{i}") for i in range(RUNS)]
            moved = []
            for i in range(RUNS):
                _advance(seed, remote, i)
                moved.append(_checkout(team, cache, root, f"moved{i}"))
            _report("checkout (fetch + base tree), same base", [b for b, _ in same])
            _report("checkout (fetch + base tree), new commit", [b for b, _ in moved])
            _report(f"workspaces (.source + {len(AGENTS)} ready copies), same base", [w for _, w in same])
            _report(f"workspaces (.source + {len(AGENTS)} ready copies), new commit", [w for _, w in moved])
            _report("until agents can run a tool, same base", [b + w for b, w in same])
            felt = [b + w for b, w in moved]
            _report("until agents can run a tool, new commit", felt)
            met = statistics.median(felt) < 1
            print(f"   goal p50 < 1 s (bind + workspaces, new commit): {'met' if met else 'NOT met'}")
            times = []
            for i in range(RUNS):
                bound = bind_repository(team, cache, "big", f"pub{i}", credentials=CREDENTIALS)
                binding = bound.workspace.repository
                assert binding is not None
                patch = NEW_FILE.format(i=i)
                plan = plan_publish(
                    binding, patch, ("README",), run_id=f"pub{i}", requester="U1", task="bench"
                )
                started = time.perf_counter()
                publish(plan, CREDENTIALS)
                times.append(time.perf_counter() - started)
            _report("publish: commit + push + PR (stand-in)", times)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
