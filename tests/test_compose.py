"""docker-compose.yml is a valid Compose file, wired as DESIGN.md says; and so is the Dockerfile.

No Docker engine runs here, so the file is checked against the Compose Specification's own JSON
schema. The schema is not committed: it comes from the `check-jsonschema` wheel on PyPI, which
vendors it (with its sha256) and keeps it current. The wheel is downloaded once into .run/.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".run" / "compose-schema"
SCHEMA_WHEEL = "check-jsonschema==0.39.0"
SCHEMA_MEMBER = "check_jsonschema/builtin_schemas/vendor/compose-spec.json"
SHA256_MEMBER = "check_jsonschema/builtin_schemas/vendor/sha256/compose-spec.sha256"


def _download_wheel() -> Path:
    """The check-jsonschema wheel in CACHE_DIR, fetched with pip if it is not there yet."""
    name, _, version = SCHEMA_WHEEL.partition("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(CACHE_DIR.glob(pattern))
    if found:
        return found[0]
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           SCHEMA_WHEEL, "-d", str(CACHE_DIR)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = sorted(CACHE_DIR.glob(pattern))
    if done.returncode != 0 or not found:
        pytest.fail(
            f"cannot get the Compose schema: `{shlex.join(cmd)}` failed "
            f"(exit {done.returncode}) and {CACHE_DIR} holds no copy yet.\n"
            f"{done.stderr[-2000:]}",
            pytrace=False,
        )
    return found[0]


def _read_schema(wheel: Path) -> bytes:
    """The schema out of the wheel, checked against the sha256 the wheel ships beside it."""
    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read(SCHEMA_MEMBER)
        expected = archive.read(SHA256_MEMBER).decode().split()[0]
    if hashlib.sha256(raw).hexdigest() != expected:
        pytest.fail(f"{SCHEMA_MEMBER} in {wheel.name} does not match its sha256", pytrace=False)
    return raw


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The Compose Specification's JSON schema, from the cache or the wheel."""
    cached = CACHE_DIR / "compose-spec.json"
    if not cached.exists():
        raw = _read_schema(_download_wheel())
        partial = cached.with_suffix(".partial")
        partial.write_bytes(raw)
        partial.replace(cached)
    loaded: dict[str, Any] = json.loads(cached.read_text())
    jsonschema.validators.validator_for(loaded).check_schema(loaded)
    return loaded


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """docker-compose.yml, parsed (YAML merge keys resolved)."""
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def _errors(schema: dict[str, Any], document: Any) -> list[str]:
    """Every schema violation in `document`, one readable line each."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(document)]


def _argv(command: str | list[str]) -> list[str]:
    """A Compose `command`, string or list, as an argument list."""
    return shlex.split(command) if isinstance(command, str) else list(command)


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, mapping or KEY=VALUE list, as a dict."""
    env = service.get("environment", {})
    if isinstance(env, list):
        return dict(item.partition("=")[::2] for item in env)
    return {key: str(value) for key, value in env.items()}


def test_compose_file_is_valid_against_the_compose_specification(
    schema: dict[str, Any], compose: dict[str, Any]
) -> None:
    assert _errors(schema, compose) == []


def test_the_schema_check_does_reject_a_broken_compose_file(schema: dict[str, Any]) -> None:
    broken = {"services": {"web": {"image": "x", "ports": "8000:8000", "restart_policy": 1}}}
    assert len(_errors(schema, broken)) >= 2


def test_redis_keeps_an_append_only_file_and_never_evicts(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    argv = _argv(redis["command"])
    assert argv[0] == "redis-server"
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert argv[argv.index("--maxmemory-policy") + 1] == "noeviction"
    volume = redis["volumes"][0]
    assert volume.split(":")[1] == "/data"
    assert volume.split(":")[0] in compose["volumes"]


@pytest.mark.parametrize("name", ["web", "worker", "fakellm"])
def test_chatq_services_run_the_python_m_entry_points(compose: dict[str, Any], name: str) -> None:
    argv = _argv(compose["services"][name]["command"])
    assert argv[:3] == ["python", "-m", name]


@pytest.mark.parametrize("name", ["web", "worker"])
def test_web_and_worker_share_redis_and_the_fake_upstream(
    compose: dict[str, Any], name: str
) -> None:
    env = _environment(compose["services"][name])
    assert env["CHATQ_REDIS_URL"] == "redis://redis:6379/0"
    assert env["CHATQ_UPSTREAM_URLS"] == "http://fakellm:9100/v1"
    assert env["CHATQ_API_KEYS"].startswith("${CHATQ_API_KEYS:-")
    assert compose["services"][name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_web_listens_on_all_interfaces_on_port_8000(compose: dict[str, Any]) -> None:
    web = compose["services"]["web"]
    assert _environment(web)["CHATQ_BIND"] == "0.0.0.0:8000"
    assert "8000:8000" in web["ports"]


def test_dockerfile_runs_the_web_by_default_as_a_non_root_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    cmd = [line for line in instructions if line.upper().startswith("CMD ")][-1]
    assert json.loads(cmd[4:]) == ["python", "-m", "web"]
    assert instructions[0] == "FROM python:3.11-slim"
    user = [line for line in instructions if line.upper().startswith("USER ")][-1]
    assert user.split()[1] not in ("root", "0")
