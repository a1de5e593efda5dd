"""The W3C trace context chatq accepts and makes (chatq/tracing/context.py), in process."""

from __future__ import annotations

import pytest

from chatq.tracing import context as tracing

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"


@pytest.mark.parametrize(
    "header",
    [
        VALID,
        f" {VALID} ",
        f"00-{TRACE}-{SPAN}-00",
    ],
)
def test_a_valid_traceparent_is_kept(header: str) -> None:
    assert tracing.parse(header) == header.strip()


def test_a_later_version_is_read_as_version_00_without_its_extra_fields() -> None:
    assert tracing.parse(f"01-{TRACE}-{SPAN}-01-more") == VALID


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        VALID.upper(),  # hex is lower-case
        f"00-{'0' * 32}-{SPAN}-01",  # the all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # the all-zero span id
        f"ff-{TRACE}-{SPAN}-01",  # the forbidden version
        f"00-{TRACE}-{SPAN}-01-more",  # version 00 has no more fields
        f"00-{TRACE[:-1]}-{SPAN}-01",
        "not a traceparent",
    ],
)
def test_an_invalid_traceparent_is_ignored(header: str | None) -> None:
    assert tracing.parse(header) == ""


def test_a_fresh_trace_is_sampled_and_a_child_keeps_its_trace_and_flags() -> None:
    fresh = tracing.fresh()
    assert tracing.parse(fresh) == fresh and fresh.endswith("-01")
    child = tracing.child(VALID)
    assert tracing.parse(child) == child
    assert (tracing.trace_id(child), child[-2:]) == (TRACE, "01")
    assert child[36:52] != SPAN


def test_a_tracestate_past_the_w3c_limit_is_dropped() -> None:
    assert tracing.tracestate("vendor=1") == "vendor=1"
    assert tracing.tracestate("v=" + "x" * tracing.TRACESTATE_MAX_CHARS) == ""
    assert tracing.tracestate(None) == ""


def test_spans_are_off_without_an_otlp_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*tracing.ENDPOINT_VARIABLES, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.enabled()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    assert tracing.enabled()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.enabled()
