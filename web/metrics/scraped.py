"""The batch and webhook figures of the web's /metrics, read from Redis at scrape time with the
queue's."""

from __future__ import annotations

from collections.abc import Iterator

from msgspec import structs
from prometheus_client.core import GaugeMetricFamily

from chatq.metrics import BatchLines, WebhookWork


def gauges(lines: BatchLines) -> Iterator[GaugeMetricFamily]:
    """Unfinished batches, and their lines by where they are."""
    yield GaugeMetricFamily("chatq_batches_active", "Batches not yet ended", value=lines.active)
    by_state = GaugeMetricFamily(
        "chatq_batch_lines",
        "Lines of the unfinished batches: waiting in the input file, fed (queued or running), done",
        labels=["state"],
    )
    for state, count in (
        ("waiting_in_file", lines.waiting_in_file),
        ("fed", lines.fed),
        ("done", lines.done),
    ):
        by_state.add_metric([state], count)
    yield by_state


def webhook_gauges(work: WebhookWork) -> Iterator[GaugeMetricFamily]:
    """Webhook deliveries not yet ended, by where they are."""
    by_state = GaugeMetricFamily(
        "chatq_webhook_queue",
        "Webhook deliveries not yet ended: attempts running (in_flight), due, scheduled later",
        labels=["state"],
    )
    for state, count in structs.asdict(work).items():
        by_state.add_metric([state], count)
    yield by_state
