"""docker-compose.yml is a valid Compose file, wired as docs/how-it-works.md says and safe by
default; the Dockerfile builds a runtime image that holds the service and its locked
dependencies only.

No Docker engine runs here, so the file is checked against the Compose Specification's own JSON
schema. The schema is not committed: it comes from the `check-jsonschema` wheel on PyPI, which
vendors it (with its sha256) and keeps it current. The wheel is downloaded once into .run/.
Compose's variable interpolation (`${VAR:-default}`, `${VAR:?error}`) is done here as the
Compose Specification describes it, so that the file is checked as Compose would run it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import redis
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
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        SCHEMA_WHEEL,
        "-d",
        str(CACHE_DIR),
    ]
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
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(document)
    ]


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


# --- Compose's interpolation, as the Compose Specification defines it ------------------------

SECRETS = {
    "CHATQ_API_KEYS": "demo:sk-compose-test-key",
    "CHATQ_METRICS_TOKEN": "compose-test-metrics-token",
    "REDIS_PASSWORD": "0123abcdef",
    "GRAFANA_ADMIN_PASSWORD": "grafana-test-password",
}
_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_]\w*))"
)


class MissingVariable(Exception):
    """A `${VAR:?error}` whose VAR is unset or empty: Compose refuses the whole file."""


def _substitute(text: str, env: dict[str, str]) -> str:
    """`text` with its variables replaced from `env`, as Compose does."""

    def one(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        op, arg, value = match["op"] or "", match["arg"] or "", env.get(name)
        is_set = value is not None and (value != "" or not op.startswith(":"))
        if op.endswith("?") and not is_set:
            raise MissingVariable(name)
        if op.endswith("-") and not is_set:
            return arg
        if op.endswith("+"):
            return arg if is_set else ""
        return value or ""

    return _VARIABLE.sub(one, text)


def _resolve(node: Any, env: dict[str, str]) -> Any:
    """A parsed Compose file (or part of one) with every string interpolated."""
    if isinstance(node, dict):
        return {key: _resolve(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolve(item, env) for item in node]
    return _substitute(node, env) if isinstance(node, str) else node


def _missing(compose: dict[str, Any], env: dict[str, str]) -> str | None:
    """The first required variable `env` lacks, or None when Compose would accept it."""
    try:
        _resolve(compose, env)
    except MissingVariable as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def resolved(compose: dict[str, Any]) -> dict[str, Any]:
    """docker-compose.yml as Compose runs it with the required secrets set, and nothing else."""
    loaded: dict[str, Any] = _resolve(compose, dict(SECRETS))
    return loaded


def test_the_interpolation_here_reads_compose_syntax_as_compose_does() -> None:
    env = {"SET": "x", "EMPTY": ""}
    text = "${SET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d} $SET $$SET"
    assert _substitute(text, env) == "x d  d x $SET"
    assert _substitute("${SET:+alt}|${UNSET:+alt}", env) == "alt|"
    for required in ("${EMPTY:?e}", "${UNSET?e}"):
        with pytest.raises(MissingVariable):
            _substitute(required, env)
    assert _substitute("${EMPTY?e}", env) == ""


# --- secrets: required, never defaulted ------------------------------------------------------


def test_compose_refuses_to_start_without_each_secret(
    compose: dict[str, Any], resolved: dict[str, Any]
) -> None:
    assert _missing(compose, dict(SECRETS)) is None
    for name in SECRETS:
        assert _missing(compose, {k: v for k, v in SECRETS.items() if k != name}) == name
        assert _missing(compose, {**SECRETS, name: ""}) == name
    for name in ("web", "worker"):
        env = _environment(resolved["services"][name])
        assert env["CHATQ_API_KEYS"] == SECRETS["CHATQ_API_KEYS"]
        assert env["CHATQ_METRICS_TOKEN"] == SECRETS["CHATQ_METRICS_TOKEN"]


def _ports(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A service's published ports as (host address, host port, container port)."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append(
                (port.get("host_ip", ""), str(port.get("published", "")), str(port["target"]))
            )
            continue
        host, _, container = str(port).rpartition(":")
        address, _, published = host.rpartition(":")
        out.append((address, published, container))
    return out


def test_every_port_is_published_on_loopback_by_default(resolved: dict[str, Any]) -> None:
    published = {
        name: _ports(service)
        for name, service in resolved["services"].items()
        if service.get("ports")
    }
    assert set(published) == {"web", "prometheus", "grafana", "jaeger"}
    for name, ports in published.items():
        assert [address for address, _, _ in ports] == ["127.0.0.1"], (name, ports)
    assert published["web"] == [("127.0.0.1", "8000", "8000")]


def test_publish_address_opens_the_web_only(compose: dict[str, Any]) -> None:
    opened = _resolve(compose, {**SECRETS, "PUBLISH_ADDRESS": "0.0.0.0"})["services"]
    assert _ports(opened["web"]) == [("0.0.0.0", "8000", "8000")]
    for name in ("prometheus", "grafana", "jaeger"):
        assert [address for address, _, _ in _ports(opened[name])] == ["127.0.0.1"]


def test_the_monitoring_profile_adds_jaeger_that_chatq_sends_spans_to_only_when_told(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert services["jaeger"]["profiles"] == ["monitoring"]
    assert _environment(services["jaeger"])["COLLECTOR_OTLP_ENABLED"] == "true"
    for name in ("web", "worker"):
        assert (
            _environment(_resolve(compose, SECRETS)["services"][name])[
                "OTEL_EXPORTER_OTLP_ENDPOINT"
            ]
            == ""
        )
        told = _resolve(compose, {**SECRETS, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"})
        assert _environment(told["services"][name])["OTEL_EXPORTER_OTLP_ENDPOINT"] == (
            "http://jaeger:4318"
        )
    datasource = (ROOT / "deploy/grafana/provisioning/datasources/jaeger.yml").read_text()
    assert "url: http://jaeger:16686" in datasource


# --- Redis -------------------------------------------------------------------------------------


def _option(argv: list[str], name: str) -> str:
    """The value after `name` in a redis-server command line."""
    assert name in argv, (name, argv)
    return argv[argv.index(name) + 1]


def test_redis_keeps_an_append_only_file_and_never_evicts(resolved: dict[str, Any]) -> None:
    redis_service = resolved["services"]["redis"]
    argv = _argv(redis_service["command"])
    assert argv[0] == "redis-server"
    assert _option(argv, "--appendonly") == "yes"
    assert _option(argv, "--maxmemory-policy") == "noeviction"
    volume = redis_service["volumes"][0]
    assert volume.split(":")[1] == "/data"
    assert volume.split(":")[0] in resolved["volumes"]


def test_redis_has_a_memory_limit_that_the_operator_can_change(compose: dict[str, Any]) -> None:
    argv = _argv(_resolve(compose, dict(SECRETS))["services"]["redis"]["command"])
    assert re.fullmatch(r"[1-9]\d*(gb|mb)", _option(argv, "--maxmemory"))
    changed = _resolve(compose, {**SECRETS, "REDIS_MAXMEMORY": "3gb"})["services"]["redis"]
    assert _option(_argv(changed["command"]), "--maxmemory") == "3gb"


def test_redis_requires_the_password_that_every_chatq_service_sends(
    resolved: dict[str, Any],
) -> None:
    services = resolved["services"]
    assert (
        _option(_argv(services["redis"]["command"]), "--requirepass") == SECRETS["REDIS_PASSWORD"]
    )
    # redis-cli reads REDISCLI_AUTH: the health check must authenticate too.
    assert _environment(services["redis"])["REDISCLI_AUTH"] == SECRETS["REDIS_PASSWORD"]
    for name in ("web", "worker"):
        env = _environment(services[name])
        parsed = redis.connection.parse_url(env["CHATQ_REDIS_URL"])
        assert (parsed["host"], parsed["port"], parsed.get("db")) == ("redis", 6379, 0)
        assert parsed["password"] == SECRETS["REDIS_PASSWORD"]
        assert env["CHATQ_UPSTREAM_URLS"] == "http://fakellm:9100/v1"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"


SENTINEL_PROFILE = {"redis-replica-1", "redis-replica-2", "sentinel-1", "sentinel-2", "sentinel-3"}


def test_the_sentinel_profile_adds_two_replicas_and_three_sentinels(
    resolved: dict[str, Any],
) -> None:
    services = resolved["services"]
    profiled = {name for name, s in services.items() if "sentinel" in s.get("profiles", [])}
    assert profiled == SENTINEL_PROFILE
    password = SECRETS["REDIS_PASSWORD"]
    for name in ("redis-replica-1", "redis-replica-2"):
        argv = _argv(services[name]["command"])
        assert argv[argv.index("--replicaof") + 1 : argv.index("--replicaof") + 3] == [
            "redis",
            "6379",
        ]
        assert _option(argv, "--masterauth") == _option(argv, "--requirepass") == password
        assert _option(argv, "--maxmemory-policy") == "noeviction"
        assert _option(argv, "--appendonly") == "yes"
    for name in ("sentinel-1", "sentinel-2", "sentinel-3"):
        script = _argv(services[name]["command"])[-1]
        assert "sentinel monitor mymaster redis 6379 2" in script  # quorum 2 of 3
        assert '"sentinel auth-pass mymaster $REDIS_PASSWORD"' in script
        assert _environment(services[name])["REDIS_PASSWORD"] == password
        assert script.rstrip().endswith("exec redis-server /tmp/sentinel.conf --sentinel")


def test_chatq_asks_the_sentinels_the_profile_starts_for_the_primary_it_monitors(
    compose: dict[str, Any], resolved: dict[str, Any]
) -> None:
    from chatq.config import settings as config

    for name in ("web", "worker"):
        plain = config.load(_environment(resolved["services"][name]))
        assert plain.redis_sentinels == () and plain.redis_min_replicas == 0
    names = "sentinel-1:26379,sentinel-2:26379,sentinel-3:26379"
    services = _resolve(compose, {**SECRETS, "CHATQ_REDIS_SENTINELS": names})["services"]
    for name in ("web", "worker"):
        settings = config.load(_environment(services[name]))
        assert {host for host, _ in settings.redis_sentinels} <= SENTINEL_PROFILE
        assert len(settings.redis_sentinels) == 3
        assert settings.redis_master_name == "mymaster"  # the name the Sentinels monitor


def test_grafana_asks_for_a_login_with_the_operators_password(resolved: dict[str, Any]) -> None:
    env = _environment(resolved["services"]["grafana"])
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == SECRETS["GRAFANA_ADMIN_PASSWORD"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"


# --- images ------------------------------------------------------------------------------------

EXACT_TAG = re.compile(r"v?\d+\.\d+\.\d+(?:-[a-z0-9.]+)*(?:@sha256:[0-9a-f]{64})?")


def _stages() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The Dockerfile's stages, in order: (name, FROM image, [(INSTRUCTION, arguments)])."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: list[tuple[str, str, list[tuple[str, str]]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            image, _, name = rest.partition(" AS ")
            stages.append((name.strip(), image.strip(), []))
        else:
            stages[-1][2].append((keyword.upper(), rest.strip()))
    return stages


def _chain(name: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Stage `name` and every stage it is built FROM, base first."""
    by_name = {stage[0]: stage for stage in _stages()}
    chain = [by_name[name]]
    while chain[0][1] in by_name:
        chain.insert(0, by_name[chain[0][1]])
    return chain


def test_every_image_is_pinned_to_an_exact_version(compose: dict[str, Any]) -> None:
    stage_names = {name for name, _, _ in _stages()}
    images = [image for _, image, _ in _stages() if image not in stage_names]
    images += [s["image"] for s in compose["services"].values() if "build" not in s]
    assert len(images) >= 4
    for image in images:
        _, _, tag = image.partition(":")
        assert EXACT_TAG.fullmatch(tag), f"{image} is not pinned to an exact version"


def test_compose_builds_the_runtime_image_for_chatq_and_fakellm_its_own(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    stages = _stages()
    assert stages[-1][0] == "runtime", "a plain `docker build .` must make the runtime image"
    for name in ("web", "worker"):
        assert services[name]["build"] == {"context": ".", "target": "runtime"}
    assert services["fakellm"]["build"] == {"context": ".", "target": "fakellm"}
    assert services["fakellm"]["image"] != services["web"]["image"]
    assert "fakellm" in {name for name, _, _ in stages}


def _copied(stages: list[tuple[str, str, list[tuple[str, str]]]]) -> set[str]:
    """What the COPY lines of `stages` take from the build context, trailing slashes dropped."""
    sources: set[str] = set()
    for _, _, instructions in stages:
        for keyword, arguments in instructions:
            if keyword in ("COPY", "ADD"):
                assert "--from" not in arguments, arguments
                sources.update(item.rstrip("/") for item in arguments.split()[:-1])
    return sources


def test_the_runtime_image_holds_the_service_and_its_locked_packages_only() -> None:
    chain = _chain("runtime")
    assert _copied(chain) == {"requirements.lock", "chatq", "web", "worker"}
    installs = [
        arguments
        for _, _, instructions in chain
        for keyword, arguments in instructions
        if keyword == "RUN" and "pip" in arguments
    ]
    assert installs == ["pip install --require-hashes -r requirements.lock"]
    assert "fakellm" not in (ROOT / "Dockerfile").read_text().split("FROM base AS runtime")[1]


def test_the_build_context_holds_only_what_the_dockerfile_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "everything is left out unless named"
    included = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert included == _copied(_stages())


def test_dockerfile_runs_the_web_by_default_as_a_non_root_user() -> None:
    _, _, instructions = _stages()[-1]
    cmd = [arguments for keyword, arguments in instructions if keyword == "CMD"][-1]
    assert json.loads(cmd) == ["python", "-m", "web"]
    users = [
        arguments
        for _, _, ins in _chain("runtime")
        for keyword, arguments in ins
        if keyword == "USER"
    ]
    assert users and users[-1] not in ("root", "0")


@pytest.mark.parametrize("name", ["web", "worker", "fakellm"])
def test_chatq_services_run_the_python_m_entry_points(compose: dict[str, Any], name: str) -> None:
    argv = _argv(compose["services"][name]["command"])
    assert argv[:3] == ["python", "-m", name]


def test_web_listens_on_all_interfaces_of_its_container(compose: dict[str, Any]) -> None:
    assert _environment(compose["services"]["web"])["CHATQ_BIND"] == "0.0.0.0:8000"
