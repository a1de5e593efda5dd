"""deploy/k8s/: many web replicas behind a Service, disruption budgets for the webs and the
workers, and the settings both read (Redis behind Sentinel), each manifest checked against
Kubernetes' own schema from the pinned `kubernetes-validate` wheel (as tests/test_deploy.py)."""

from __future__ import annotations

import copy
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import yaml

from chatq.config import settings as config
from tests.test_deploy import CACHE_DIR, K8S_WHEEL, _wheel
from web.__main__ import ANSWER_MARGIN_S

ROOT = Path(__file__).resolve().parents[1]
K8S_DIR = ROOT / "deploy" / "k8s"
WORKER = ROOT / "deploy" / "keda" / "worker-deployment.yaml"
SCHEMA_FILES = {
    "Deployment": "deployment-apps-v1.json",
    "Service": "service-v1.json",
    "PodDisruptionBudget": "poddisruptionbudget-policy-v1.json",
    "ConfigMap": "configmap-v1.json",
}


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.protocols.Validator]:
    """A strict validator per kind, from the newest Kubernetes the wheel describes."""
    cached = CACHE_DIR / "k8s-scaleout"
    if not (cached / "_definitions.json").exists():
        with zipfile.ZipFile(_wheel(*K8S_WHEEL)) as archive:
            found = re.compile(
                r"kubernetes_validate/kubernetes-json-schema/(v1\.(\d+)\.0-local-strict)/"
            )
            newest = max(
                (int(m.group(2)), m.group(1)) for n in archive.namelist() if (m := found.match(n))
            )
            base = f"kubernetes_validate/kubernetes-json-schema/{newest[1]}"
            cached.mkdir(parents=True, exist_ok=True)
            for name in ("_definitions.json", *SCHEMA_FILES.values()):
                (cached / name).write_bytes(archive.read(f"{base}/{name}"))
    definitions = json.loads((cached / "_definitions.json").read_text())
    registry = referencing.Registry().with_resource(
        definitions["$id"], referencing.Resource.from_contents(definitions)
    )
    return {
        kind: jsonschema.Draft202012Validator(
            json.loads((cached / name).read_text()), registry=registry
        )
        for kind, name in SCHEMA_FILES.items()
    }


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


WEB = K8S_DIR / "web-deployment.yaml"


@pytest.mark.parametrize("path", sorted(K8S_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_each_manifest_is_valid_against_kubernetes_schema(
    validators: dict[str, jsonschema.protocols.Validator], path: Path
) -> None:
    document = _load(path)
    errors = [e.message for e in validators[document["kind"]].iter_errors(document)]
    assert errors == []


def test_the_schema_check_does_reject_a_broken_budget(
    validators: dict[str, jsonschema.protocols.Validator],
) -> None:
    broken = copy.deepcopy(_load(K8S_DIR / "web-pdb.yaml"))
    broken["spec"]["maxUnavailable"] = [1]
    broken["spec"]["selector"]["matchLabel"] = {}
    assert len(list(validators["PodDisruptionBudget"].iter_errors(broken))) >= 2


def test_web_pods_are_ready_while_redis_answers_and_alive_while_the_process_does() -> None:
    container = _container(_load(WEB))
    (port,) = container["ports"]
    assert _env(container)["CHATQ_BIND"] == f"0.0.0.0:{port['containerPort']}"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # A Redis outage must not restart the webs: only readiness depends on it.
    live, ready = container["livenessProbe"], container["readinessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > 30
    assert ready["periodSeconds"] * ready["failureThreshold"] <= 10


def test_web_pods_get_time_to_answer_what_they_hold() -> None:
    deployment = _load(WEB)
    container = _container(deployment)
    pause_s = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    graceful_s = int(_env(container)["CHATQ_GRACEFUL_TIMEOUT"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > (
        pause_s + graceful_s + ANSWER_MARGIN_S
    )


def test_each_budget_covers_its_deployments_pods_and_leaves_some_running() -> None:
    web, worker = _load(WEB), _load(WORKER)
    web_pdb, worker_pdb = _load(K8S_DIR / "web-pdb.yaml"), _load(K8S_DIR / "worker-pdb.yaml")
    for deployment, budget in ((web, web_pdb), (worker, worker_pdb)):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert budget["spec"]["selector"]["matchLabels"] == labels
    assert web["spec"]["replicas"] - web_pdb["spec"]["maxUnavailable"] >= 2
    assert worker_pdb["spec"]["minAvailable"] >= 1  # the sweeper keeps running


def test_the_service_sends_to_the_web_pods_where_the_autoscaler_variant_looks() -> None:
    service, web = _load(K8S_DIR / "web-service.yaml"), _load(WEB)
    assert service["spec"]["selector"] == web["spec"]["template"]["metadata"]["labels"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == _container(web)["ports"][0]["name"]
    scaled = (ROOT / "deploy" / "keda" / "scaledobject.yaml").read_text()
    assert f"http://{service['metadata']['name']}:{port['port']}/v1/queue" in scaled


def test_webs_and_workers_read_the_same_redis_settings_from_the_configmap() -> None:
    def redis_refs(path: Path) -> dict[str, Any]:
        env = _env(_container(_load(path)))
        return {k: v for k, v in env.items() if k.startswith("CHATQ_REDIS_")}

    web, worker = redis_refs(WEB), redis_refs(WORKER)
    assert web == worker
    shared = _load(K8S_DIR / "chatq-config.yaml")
    env = {}
    for name, ref in web.items():
        if "configMapKeyRef" in ref:
            assert ref["configMapKeyRef"]["name"] == shared["metadata"]["name"]
            env[name] = shared["data"][ref["configMapKeyRef"]["key"]]
    settings = config.load(env)
    assert settings.redis_sentinels == (("redis-sentinel", 26379),)
    assert settings.redis_min_replicas == 1
