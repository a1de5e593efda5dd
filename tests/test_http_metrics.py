"""The HTTP request metrics (prometheus-flask-exporter) of an app outside gunicorn, in
process: its /metrics counts requests by route template, never its own scrapes, with none of
the exporter's series that chatq leaves out; a second app in the process counts its own.
(Under gunicorn, tests/test_operations.py reads them from a real web.)"""

from __future__ import annotations

from flask import Flask
from prometheus_client.parser import text_string_to_metric_families

from chatq.config import settings as config
from scripts.localredis import free_port
from tests.inproc import in_process

JOB = {"method": "GET", "endpoint": "/v1/jobs/<job_id>", "status": "401"}


def _settings() -> config.Settings:
    # A Redis that cannot be reached: a request without a key and /metrics need none.
    return config.load({"CHATQ_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})


def _scrape(app: Flask) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = app.test_client().get("/metrics").get_data(as_text=True)
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def _value(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    return sum(v for found, v in samples.get(name, []) if labels.items() <= found.items())


def test_requests_are_counted_by_route_template_and_scrapes_are_not() -> None:
    with in_process(_settings()) as app:
        client = app.test_client()
        for i in range(3):
            assert client.get(f"/v1/jobs/job_{i:032d}").status_code == 401
        _scrape(app)
        samples = _scrape(app)
    assert _value(samples, "chatq_http_request_duration_seconds_count", **JOB) == 3
    assert _value(samples, "chatq_http_request_total", method="GET", status="401") == 3
    endpoints = {
        labels["endpoint"] for labels, _ in samples["chatq_http_request_duration_seconds_count"]
    }
    assert endpoints == {"/v1/jobs/<job_id>"}
    assert not {"chatq_exporter_info", "chatq_http_request_exceptions_total"} & set(samples)


def test_a_second_app_in_the_process_counts_its_own_requests() -> None:
    for _ in range(2):
        with in_process(_settings()) as app:
            assert app.test_client().get(f"/v1/jobs/job_{0:032d}").status_code == 401
            samples = _scrape(app)
        assert _value(samples, "chatq_http_request_duration_seconds_count", **JOB) == 1
