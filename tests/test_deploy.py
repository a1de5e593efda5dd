"""deploy/ and the Compose `monitoring` profile, each checked by its project's own schema or tool.

No schema is committed; each is fetched once into .run/deploy-schemas/ from a registry package:
- Compose: the Compose Specification's schema, through tests/test_compose.py's fixtures.
- KEDA: the `cloudcoil-models-keda` wheel (PyPI) holds pydantic models generated from KEDA's CRD
  YAML (their openAPIV3Schema); pydantic exports them as JSON Schema. Objects are then closed
  (unknown fields rejected), as the API server's strict field validation does.
- Kubernetes: the `kubernetes-validate` wheel (PyPI) ships Kubernetes' OpenAPI as JSON Schema.
- Prometheus: Debian's `promtool` checks the config, and every PromQL query as a rule.
- Grafana: no registry package ships Grafana's dashboard JSON schema (@grafana/schema carries
  TypeScript types only), so the dashboard's structure is checked here, and its queries name
  only metrics chatq exposes, with their own labels.
A schema or tool that cannot be had fails the test, with the reason; it never skips.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import yaml

from chatq.config.settings import Settings
from tests.test_compose import _environment, _errors, compose, schema  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".run" / "deploy-schemas"
KEDA_DIR = ROOT / "deploy" / "keda"
PROMETHEUS_YML = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "chatq.json"

# Wheels pinned by version and sha256; their contents are read, never installed.
KEDA_WHEELS = {
    "cloudcoil==0.6.0": "91793dea2e86ad292af143c5d335ce2e5d27dfbe66fd4b945c2f069224cf7698",
    "cloudcoil-models-keda==2.16.1.0": (
        "9ec4a118def872b68216d9057ef386701b32fcb0ec2173f49c6214d309176b46"
    ),
}
K8S_WHEEL = (
    "kubernetes-validate==1.37.0",
    "85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9",
)
KEDA_EXPORT = """
import json, sys
from cloudcoil.models.keda.v1alpha1 import ScaledObject, TriggerAuthentication
models = (ScaledObject, TriggerAuthentication)
json.dump({m.__name__: m.model_json_schema(by_alias=True) for m in models}, sys.stdout)
"""

# Every series chatq exposes (names final), with its labels.
COUNTERS = {
    "chatq_jobs_submitted_total": {"priority"},
    "chatq_cache_lookups_total": {"result"},
    "chatq_admission_rejections_total": {"reason"},
    "chatq_jobs_finished_total": {"status"},
    "chatq_upstream_retries_total": {"endpoint", "reason"},
    "chatq_upstream_cooldowns_total": {"endpoint"},
    "chatq_tokens_total": {"direction"},
}
GAUGES = {
    "chatq_http_requests_in_progress": set(),
    "chatq_longpoll_waiters": set(),
    "chatq_queue_depth": {"queue"},
    "chatq_queue_oldest_age_seconds": {"queue"},
    "chatq_jobs_in_progress": set(),
    "chatq_recommended_concurrency": set(),
    "chatq_worker_running_jobs": set(),
    "chatq_worker_slots": set(),
}
HISTOGRAMS = {
    "chatq_http_request_duration_seconds": {"method", "endpoint", "status"},
    "chatq_job_queue_wait_seconds": set(),
    "chatq_job_time_to_first_token_seconds": set(),
    "chatq_job_duration_seconds": set(),
    "chatq_upstream_request_duration_seconds": {"endpoint", "status_code"},
}
# Labels Prometheus itself attaches (deploy/prometheus/prometheus.yml).
TARGET_LABELS = {"job", "instance", "component", "namespace", "pod"}
SERIES = {
    **COUNTERS,
    **GAUGES,
    **{
        f"{h}_{part}": labels | ({"le"} if part == "bucket" else set())
        for h, labels in HISTOGRAMS.items()
        for part in ("bucket", "count", "sum")
    },
}
# Series that only make sense as a rate: counters and the parts of histograms.
RATE_ONLY = set(COUNTERS) | (set(SERIES) - set(GAUGES) - set(COUNTERS))
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


# --- fetching the schemas -------------------------------------------------------------------


def _wheel(spec: str, sha256: str) -> Path:
    """The wheel `spec` in CACHE_DIR, fetched with pip once, checked against its sha256."""
    name, _, version = spec.partition("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(CACHE_DIR.glob(pattern))
    if not found:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            spec,
            "-d",
            str(CACHE_DIR),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        found = sorted(CACHE_DIR.glob(pattern))
        if done.returncode != 0 or not found:
            pytest.fail(
                f"cannot get a schema: `{shlex.join(cmd)}` failed (exit "
                f"{done.returncode}) and {CACHE_DIR} holds no copy.\n"
                f"{done.stderr[-2000:]}",
                pytrace=False,
            )
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != sha256:
        pytest.fail(f"{found[0].name} has sha256 {digest}, not the pinned {sha256}", pytrace=False)
    return found[0]


def _export_keda_schemas() -> bytes:
    """KEDA's ScaledObject and TriggerAuthentication schemas, exported from the model wheels."""
    site = CACHE_DIR / "cloudcoil-site"
    for spec, sha256 in KEDA_WHEELS.items():
        with zipfile.ZipFile(_wheel(spec, sha256)) as archive:
            archive.extractall(site, [m for m in archive.namelist() if m.startswith("cloudcoil/")])
    done = subprocess.run(
        [sys.executable, "-c", KEDA_EXPORT],
        capture_output=True,
        timeout=300,
        env={"PYTHONPATH": str(site), "PATH": ""},
    )
    if done.returncode != 0:
        pytest.fail(
            "cannot export KEDA's schema from cloudcoil-models-keda:\n"
            f"{done.stderr.decode(errors='replace')[-2000:]}",
            pytrace=False,
        )
    return done.stdout


def _closed(node: Any) -> Any:
    """`node` with every object that lists its properties closed to any other property."""
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _closed(value) for key, value in node.items()}
    if out.get("properties") and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def keda_schemas() -> dict[str, Any]:
    """KEDA's CRD schemas by kind, strict about unknown fields."""
    cached = CACHE_DIR / "keda-v1alpha1.json"
    if not cached.exists():
        raw = _export_keda_schemas()
        partial = cached.with_suffix(".partial")
        partial.write_bytes(raw)
        partial.replace(cached)
    loaded: dict[str, Any] = json.loads(cached.read_text())
    for kind in loaded.values():
        jsonschema.Draft202012Validator.check_schema(kind)
    return {kind: _closed(value) for kind, value in loaded.items()}


@pytest.fixture(scope="module")
def deployment_validator() -> jsonschema.protocols.Validator:
    """A validator for apps/v1 Deployment, from kubernetes-validate's strict schemas."""
    cached = CACHE_DIR / "k8s"
    if not (cached / "_definitions.json").exists():
        with zipfile.ZipFile(_wheel(*K8S_WHEEL)) as archive:
            dirs = {
                m.split("/")[2]
                for m in archive.namelist()
                if re.fullmatch(
                    r"kubernetes_validate/kubernetes-json-schema/"
                    r"v1\.\d+\.0-local-strict/_definitions\.json",
                    m,
                )
            }
            newest = max(dirs, key=lambda d: int(d.split(".")[1]))
            cached.mkdir(parents=True, exist_ok=True)
            base = f"kubernetes_validate/kubernetes-json-schema/{newest}"
            for name in ("deployment-apps-v1.json", "_definitions.json"):
                (cached / name).write_bytes(archive.read(f"{base}/{name}"))
    definitions = json.loads((cached / "_definitions.json").read_text())
    registry = referencing.Registry().with_resource(
        definitions["$id"], referencing.Resource.from_contents(definitions)
    )
    root = json.loads((cached / "deployment-apps-v1.json").read_text())
    return jsonschema.Draft202012Validator(root, registry=registry)


@pytest.fixture(scope="module")
def promtool() -> str:
    """The path of promtool; the test fails if Debian's `prometheus` package is missing."""
    found = shutil.which("promtool")
    if not found:
        pytest.fail(
            "promtool is not installed: it comes with Debian's `prometheus` package "
            "(`make test` installs it when TEST_DEB_PACKAGES lists `prometheus`)",
            pytrace=False,
        )
    return found


# --- reading the files ----------------------------------------------------------------------


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _commented_block(path: Path, name: str) -> str:
    """The YAML between `# NAME begin` and `# NAME end` in `path`, comment marks removed."""
    text = path.read_text()
    match = re.search(rf"^# {name} begin\n(.*?)^# {name} end$", text, re.M | re.S)
    assert match, f"{path.name} has no '{name}' block"
    return "\n".join(
        line[2:] if line.startswith("# ") else line[1:] for line in match.group(1).splitlines()
    )


def _leaves(errors: Any) -> list[jsonschema.ValidationError]:
    """The innermost errors: through anyOf (pydantic's Optional), skipping its null branch."""
    out = []
    for error in errors:
        if error.context:
            out += _leaves(error.context)
        elif error.validator != "type" or error.validator_value != "null":
            out.append(error)
    return out


def _schema_errors(kind_schema: dict[str, Any], document: Any) -> list[str]:
    """Every violation of `kind_schema` in `document`, one line each, by path."""
    validator = jsonschema.Draft202012Validator(kind_schema)
    return sorted(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in _leaves(validator.iter_errors(document))
    )


def _scaledobject() -> dict[str, Any]:
    loaded: dict[str, Any] = _yaml(KEDA_DIR / "scaledobject.yaml")
    return loaded


def _deployment() -> dict[str, Any]:
    loaded: dict[str, Any] = _yaml(KEDA_DIR / "worker-deployment.yaml")
    return loaded


def _worker_container() -> dict[str, Any]:
    containers = _deployment()["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _queries() -> list[str]:
    """Every PromQL expression of the dashboard and of the KEDA triggers."""
    panels = [p for p in _dashboard()["panels"] if p["type"] != "row"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    return exprs + [t["metadata"]["query"] for t in _scaledobject()["spec"]["triggers"]]


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """A Compose service's bind mounts as {target: source}, short syntax."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        out[target] = source
    return out


# --- Compose: the monitoring profile ---------------------------------------------------------


def test_compose_file_with_the_monitoring_profile_is_valid(
    schema: dict[str, Any],  # noqa: F811
    compose: dict[str, Any],  # noqa: F811
) -> None:
    assert _errors(schema, compose) == []


def test_prometheus_and_grafana_start_only_with_the_monitoring_profile(
    compose: dict[str, Any],  # noqa: F811
) -> None:
    services = compose["services"]
    assert services["prometheus"]["profiles"] == ["monitoring"]
    assert services["grafana"]["profiles"] == ["monitoring"]
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    always = {name for name, s in services.items() if "profiles" not in s}
    assert always == {"redis", "fakellm", "worker", "web"}


def test_prometheus_mounts_the_scrape_config(compose: dict[str, Any]) -> None:  # noqa: F811
    mounts = _mounts(compose["services"]["prometheus"])
    source = mounts["/etc/prometheus/prometheus.yml"]
    assert (ROOT / source).resolve() == PROMETHEUS_YML
    assert "127.0.0.1:9090:9090" in compose["services"]["prometheus"]["ports"]


def test_grafana_mounts_provisioning_and_dashboard_and_asks_for_a_login(
    compose: dict[str, Any],  # noqa: F811
) -> None:
    grafana = compose["services"]["grafana"]
    mounts = _mounts(grafana)
    assert (ROOT / mounts["/etc/grafana/provisioning"]).resolve() == GRAFANA_DIR / "provisioning"
    provider = _yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "chatq.yml")["providers"][0]
    dashboards_at = provider["options"]["path"]
    assert (ROOT / mounts[dashboards_at]).resolve() == DASHBOARD.parent
    env = _environment(grafana)
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == f"{dashboards_at}/{DASHBOARD.name}"
    assert "127.0.0.1:3000:3000" in grafana["ports"]


def test_prometheus_reaches_the_web_and_every_worker(compose: dict[str, Any]) -> None:  # noqa: F811
    web_port = _environment(compose["services"]["web"])["CHATQ_BIND"].rpartition(":")[2]
    worker_bind = _environment(compose["services"]["worker"])["CHATQ_WORKER_METRICS_BIND"]
    assert worker_bind == "0.0.0.0:9101"
    jobs = {j["job_name"]: j for j in _yaml(PROMETHEUS_YML)["scrape_configs"]}
    assert jobs["chatq-web"]["static_configs"][0]["targets"] == [f"web:{web_port}"]
    # `--scale worker=N`: every container behind the name is a target of its own.
    (discovery,) = jobs["chatq-worker"]["dns_sd_configs"]
    assert discovery["names"] == ["worker"]
    assert discovery["type"] == "A"
    assert discovery["port"] == int(worker_bind.rpartition(":")[2])


# --- KEDA and the worker Deployment -----------------------------------------------------------


def test_scaledobject_is_valid_against_kedas_crd_schema(keda_schemas: dict[str, Any]) -> None:
    scaled = _scaledobject()
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["kind"] == "ScaledObject"
    assert _schema_errors(keda_schemas["ScaledObject"], scaled) == []


def test_the_keda_schema_check_does_reject_a_broken_scaledobject(
    keda_schemas: dict[str, Any],
) -> None:
    broken = copy.deepcopy(_scaledobject())
    spec = broken["spec"]
    spec["minReplicas"] = 1  # not a KEDA field
    spec["triggers"][0]["metadata"]["threshold"] = 80  # metadata values are strings
    spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"
    ] = 7200  # over the CRD's 3600
    del spec["scaleTargetRef"]["name"]  # required
    errors = _schema_errors(keda_schemas["ScaledObject"], broken)
    joined = "\n".join(errors)
    assert "'minReplicas' was unexpected" in joined
    assert "spec/triggers/0/metadata/threshold" in joined
    assert "scaleDown/stabilizationWindowSeconds" in joined
    assert "'name' is a required property" in joined


def test_the_commented_metrics_api_variant_is_valid_too(keda_schemas: dict[str, Any]) -> None:
    trigger_doc, auth = yaml.safe_load_all(
        _commented_block(KEDA_DIR / "scaledobject.yaml", "metrics-api variant")
    )
    (trigger,) = trigger_doc
    variant = copy.deepcopy(_scaledobject())
    variant["spec"]["triggers"] = [trigger]
    assert _schema_errors(keda_schemas["ScaledObject"], variant) == []
    assert _schema_errors(keda_schemas["TriggerAuthentication"], auth) == []
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    assert trigger["metadata"]["url"].endswith("/v1/queue")
    assert trigger["metadata"]["valueLocation"] == "recommended_concurrency"


def test_scaledobject_scales_the_worker_deployment_on_chatq_queue_metrics() -> None:
    spec = _scaledobject()["spec"]
    deployment = _deployment()
    target = spec["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        deployment["apiVersion"],
        deployment["kind"],
        deployment["metadata"]["name"],
    )
    slots = int(_container_env(_worker_container())["CHATQ_WORKER_CONCURRENCY"])
    assert 1 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
    queries = []
    for trigger in spec["triggers"]:
        meta = trigger["metadata"]
        assert trigger["type"] == "prometheus"
        assert meta["serverAddress"].startswith("http")
        assert 0 < float(meta["threshold"]) <= slots  # a worker's share of its slots
        assert float(meta["activationThreshold"]) >= 0
        assert meta["ignoreNullValues"] == "false"  # a lost target falls back, not to 0
        queries.append(meta["query"])
    assert any("chatq_queue_depth" in q for q in queries)
    assert spec["fallback"]["replicas"] >= spec["minReplicaCount"]


def test_scale_down_is_slow_and_stabilised() -> None:
    behavior = _scaledobject()["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    down = behavior["scaleDown"]
    assert down["stabilizationWindowSeconds"] >= 300
    assert down["policies"]
    for policy in down["policies"]:
        assert (policy["type"], policy["value"]) == ("Pods", 1)
        assert policy["periodSeconds"] >= 60


def test_worker_deployment_is_a_valid_kubernetes_deployment(
    deployment_validator: jsonschema.protocols.Validator,
) -> None:
    errors = [e.message for e in deployment_validator.iter_errors(_deployment())]
    assert errors == []
    broken = copy.deepcopy(_deployment())
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 660
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9101"
    assert len(list(deployment_validator.iter_errors(broken))) >= 2


def test_worker_pods_get_time_to_finish_their_running_jobs() -> None:
    pod = _deployment()["spec"]["template"]["spec"]
    env = _container_env(_worker_container())
    job_timeout_s = float(env.get("CHATQ_JOB_TIMEOUT", Settings().job_timeout_s))
    assert pod["terminationGracePeriodSeconds"] >= job_timeout_s + 30
    # A restart by a liveness probe would cut running jobs short.
    assert "livenessProbe" not in _worker_container()
    # The HPA owns the count.
    assert "replicas" not in _deployment()["spec"]


def test_worker_pods_serve_their_metrics_where_prometheus_looks() -> None:
    container = _worker_container()
    annotations = _deployment()["spec"]["template"]["metadata"]["annotations"]
    bind = _container_env(container)["CHATQ_WORKER_METRICS_BIND"]
    assert argv_of(container) == ["python", "-m", "worker"]
    assert bind == "0.0.0.0:9101"
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == bind.rpartition(":")[2]
    assert {p["containerPort"] for p in container["ports"]} == {9101}
    block = _commented_block(PROMETHEUS_YML, "kubernetes example")
    for key in ("scrape", "port", "path"):
        assert f"__meta_kubernetes_pod_annotation_prometheus_io_{key}" in block
        assert f"prometheus.io/{key}" in annotations


def argv_of(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


# --- Prometheus ------------------------------------------------------------------------------


def _promtool(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)


# Where Compose mounts CHATQ_METRICS_TOKEN in the Prometheus container (`secrets:`).
TOKEN_FILE = "/run/secrets/chatq-metrics-token"


def _with_token_file(config: dict[str, Any], tmp_path: Path) -> Path:
    """`config` written to tmp_path, each job's token file one that exists here (promtool
    checks that it does)."""
    token = tmp_path / "chatq-metrics-token"
    token.write_text("a-token")
    for job in config["scrape_configs"]:
        if "authorization" in job:
            assert job["authorization"]["credentials_file"] == TOKEN_FILE
            job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_prometheus_config_passes_promtool(promtool: str, tmp_path: Path) -> None:
    path = _with_token_file(_yaml(PROMETHEUS_YML), tmp_path)
    done = _promtool(promtool, "check", "config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def _chatq_jobs() -> list[dict[str, Any]]:
    jobs = [j for j in _yaml(PROMETHEUS_YML)["scrape_configs"] if j["job_name"] != "prometheus"]
    return [*jobs, *yaml.safe_load(_commented_block(PROMETHEUS_YML, "kubernetes example"))]


def test_every_chatq_scrape_sends_the_metrics_token(compose: dict[str, Any]) -> None:  # noqa: F811
    # Without it chatq serves only the series that name no key (docs/operating.md, "Metrics").
    for job in _chatq_jobs():
        assert job["authorization"] == {"type": "Bearer", "credentials_file": TOKEN_FILE}, job
    prometheus = compose["services"]["prometheus"]
    (secret,) = prometheus["secrets"]
    assert f"/run/secrets/{secret}" == TOKEN_FILE
    assert compose["secrets"][secret] == {"environment": "CHATQ_METRICS_TOKEN"}
    for name in ("web", "worker"):
        token = _environment(compose["services"][name])["CHATQ_METRICS_TOKEN"]
        assert token == "${CHATQ_METRICS_TOKEN:?set CHATQ_METRICS_TOKEN}"


def test_kubernetes_example_passes_promtool(promtool: str, tmp_path: Path) -> None:
    (job,) = yaml.safe_load(_commented_block(PROMETHEUS_YML, "kubernetes example"))
    assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    # Debian builds promtool without Kubernetes discovery: check the rest of the job with a
    # static target in its place.
    del job["kubernetes_sd_configs"]
    job["static_configs"] = [{"targets": ["10.0.0.1"]}]
    config = _yaml(PROMETHEUS_YML)
    config["scrape_configs"].append(job)
    path = _with_token_file(config, tmp_path)
    done = _promtool(promtool, "check", "config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_query_is_valid_promql(promtool: str, tmp_path: Path) -> None:
    rules = [
        {"record": f"chatq:query_{i}", "expr": q.replace("$__rate_interval", "1m")}
        for i, q in enumerate(_queries())
    ]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}))
    done = _promtool(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


# --- PromQL: names and labels ------------------------------------------------------------------


def _without_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def _metric_names(expr: str) -> set[str]:
    """The metric names in a PromQL expression: identifiers that are not calls, labels, words."""
    e = _without_strings(expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    words = re.findall(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", e)
    return {w for w in words if w.lower() not in PROMQL_WORDS}


def _labels_used(expr: str) -> set[str]:
    """Label names in matchers and in by/without/on/ignoring clauses."""
    e = _without_strings(expr)
    names = set()
    for matcher in re.findall(r"\{([^}]*)\}", e):
        names |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", matcher))
    for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", e):
        names |= {n.strip() for n in clause.split(",") if n.strip()}
    return names


def _call_arguments(expr: str, function: str) -> list[str]:
    """The argument text of every call of `function` in `expr`."""
    out = []
    for match in re.finditer(rf"\b{function}\s*\(", expr):
        depth, start = 1, match.end()
        for i in range(start, len(expr)):
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            if depth == 0:
                out.append(expr[start:i])
                break
    return out


@pytest.mark.parametrize("expr", _queries())
def test_query_names_only_metrics_and_labels_chatq_exposes(expr: str) -> None:
    names = _metric_names(expr)
    assert names, "no metric in the query"
    assert names <= set(SERIES), f"unknown: {names - set(SERIES)}"
    allowed = set().union(*(SERIES[n] for n in names)) | TARGET_LABELS
    assert _labels_used(expr) <= allowed, f"unknown labels: {_labels_used(expr) - allowed}"
    plain = _without_strings(expr)
    for name in names:
        uses = len(re.findall(rf"\b{name}\b", plain))
        ranged = len(re.findall(rf"\b{name}\s*(?:\{{[^}}]*\}})?\s*\[", plain))
        # A counter or a histogram part only through rate()/increase(); a gauge never so.
        assert ranged == (uses if name in RATE_ONLY else 0), name


@pytest.mark.parametrize("expr", [q for q in _queries() if "histogram_quantile" in q])
def test_quantiles_aggregate_buckets_by_le(expr: str) -> None:
    for args in _call_arguments(expr, "histogram_quantile"):
        clause = re.search(r"\bby\s*\(([^)]*)\)", args)
        assert clause and "le" in {n.strip() for n in clause.group(1).split(",")}, args
        assert re.search(r"\brate\s*\(\s*\w+_bucket\[", args), args


# --- Grafana ---------------------------------------------------------------------------------


def _panels() -> list[dict[str, Any]]:
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def test_dashboard_is_structurally_valid() -> None:
    dashboard = _dashboard()
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels():
        assert panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target.get("datasource", panel["datasource"]) == panel["datasource"]


def test_dashboard_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in _dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


def test_dashboard_datasource_is_the_provisioned_prometheus() -> None:
    (variable,) = [v for v in _dashboard()["templating"]["list"] if v["name"] == "datasource"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    (source,) = _yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"
    ]
    assert source["type"] == "prometheus"
    assert variable["current"]["value"] == source["uid"]
    assert source["url"] == "http://prometheus:9090"
    scrape_interval = _yaml(PROMETHEUS_YML)["global"]["scrape_interval"]
    assert source["jsonData"]["timeInterval"] == scrape_interval


def _has_query(pattern: str) -> bool:
    return any(re.search(pattern, t["expr"]) for p in _panels() for t in p["targets"])


@pytest.mark.parametrize(
    "what, pattern",
    [
        ("request rate", r"rate\(chatq_http_request_duration_seconds_count\["),
        (
            "p50 by endpoint",
            r"histogram_quantile\(0\.5, sum by \(le, endpoint\) "
            r"\(rate\(chatq_http_request_duration_seconds_bucket",
        ),
        (
            "p99 by endpoint",
            r"histogram_quantile\(0\.99, sum by \(le, endpoint\) "
            r"\(rate\(chatq_http_request_duration_seconds_bucket",
        ),
        ("queue depth per queue", r"by \(queue\) \(chatq_queue_depth\)"),
        ("long-poll waiters", r"chatq_longpoll_waiters"),
        (
            "upstream p50 by endpoint",
            r"histogram_quantile\(0\.5, sum by \(le, endpoint\) "
            r"\(rate\(chatq_upstream_request_duration_seconds_bucket",
        ),
        (
            "upstream p99 by endpoint",
            r"histogram_quantile\(0\.99, sum by \(le, endpoint\) "
            r"\(rate\(chatq_upstream_request_duration_seconds_bucket",
        ),
        (
            "cache hit ratio",
            r'chatq_cache_lookups_total\{result="hit"\}.*/.*chatq_cache_lookups_total',
        ),
        ("jobs finished by status", r"by \(status\) \(rate\(chatq_jobs_finished_total"),
        ("retries", r"chatq_upstream_retries_total"),
        ("cooldowns", r"chatq_upstream_cooldowns_total"),
        ("time to first token", r"chatq_job_time_to_first_token_seconds_bucket"),
    ],
)
def test_dashboard_shows(what: str, pattern: str) -> None:
    assert _has_query(pattern), what
