"""The service's own objects, each declared once: the load figures of GET /v1/queue (an
admin key's whole picture and any other key's share, chatq/metrics/queue_stats.py and
chatq/metrics/queue_share.py), a key's limits and use (GET /v1/usage) and the health probes. The
OpenAPI components are generated from these structs."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

Count = Annotated[int, Meta(ge=0)]
Rate = Annotated[float, Meta(ge=0)]
Age = Annotated[
    Rate | None, Meta(description="Seconds; null when the broker cannot tell (RabbitMQ).")
]


class _Closed(Struct, forbid_unknown_fields=True):
    """A closed object: a field not declared is refused."""


class Lane(_Closed):
    depth: Count
    oldest_age_s: Age


class Lanes(_Closed):
    interactive: Lane
    batch: Lane


class Workers(_Closed):
    count: Count
    slots: Count
    busy: Count


class BatchLines(_Closed):
    total: Count
    waiting_in_file: Count
    fed: Annotated[Count, Meta(description="Queued or running.")]
    done: Count


class Batches(_Closed):
    active: Count
    lines: BatchLines


class WebhookWork(_Closed):
    in_flight: Annotated[Count, Meta(description="Webhook delivery attempts running.")]
    due: Annotated[Count, Meta(description="Deliveries due, waiting for a delivery slot.")]
    scheduled: Annotated[Count, Meta(description="Deliveries waiting for a later attempt.")]


class Queue(_Closed):
    """GET /v1/queue to an admin key: the whole picture."""

    queues: Lanes
    in_progress: Count
    workers: Workers
    arrival_rate_per_s: Rate
    mean_job_seconds: Rate
    recommended_concurrency: Annotated[
        Count, Meta(description="ceil(arrival_rate_per_s * mean_job_seconds * 1.2)")
    ]
    batches: Batches
    webhooks: WebhookWork


class OwnLane(_Closed):
    depth: Annotated[
        Count | None,
        Meta(
            description="The key's jobs waiting in the lane; null where they wait in a queue "
            "shared with other keys (RabbitMQ, or CHATQ_FAIR_DISPATCH=0).",
        ),
    ]
    oldest_age_s: Age


class OwnLanes(_Closed):
    interactive: OwnLane
    batch: OwnLane


class TotalLane(_Closed):
    depth: Count


class TotalLanes(_Closed):
    interactive: TotalLane
    batch: TotalLane


class Totals(_Closed):
    """The totals that name no key."""

    queues: TotalLanes
    in_progress: Count
    workers: Workers


class QueueShare(_Closed):
    """GET /v1/queue to any other key: its own figures, and totals that name no key."""

    key: Annotated[str, Meta(description="The calling key's name.")]
    queues: OwnLanes
    arrival_rate_per_s: Rate
    mean_job_seconds: Rate
    batches: Batches
    totals: Totals


class RateLimits(_Closed):
    """The minute's limits, named as OpenAI's x-ratelimit-* headers; null where none."""

    limit_requests: Annotated[int | None, Meta(description="The key's requests per minute.")]
    limit_tokens: Annotated[int | None, Meta(description="The key's tokens per minute.")]
    remaining_requests: Annotated[int | None, Meta(description="What is left now.")]
    remaining_tokens: Annotated[int | None, Meta(description="What is left now.")]
    reset_requests: Annotated[str | None, Meta(description="How long until it is whole again.")]
    reset_tokens: Annotated[str | None, Meta(description="How long until it is whole again.")]


class Bucket(_Closed):
    """One UTC day or month: unix seconds it starts and ends at."""

    object: Literal["bucket"]
    start_time: Count
    end_time: Count
    num_model_requests: Count
    tokens: Annotated[Count, Meta(description="Used by ended jobs and held by the others.")]
    limit_tokens: Annotated[
        int | None, Meta(description="The key's token budget of the period; null: none.")
    ]
    remaining_tokens: Annotated[
        int | None, Meta(description="What is left of the budget; null: no budget.")
    ]


class Usage(_Closed):
    """GET /v1/usage: the calling key's limits and use."""

    object: Literal["usage"]
    key: Annotated[str, Meta(description="The key's name.")]
    rate_limits: RateLimits
    day: Bucket
    month: Bucket
    reserved_tokens: Annotated[
        Count,
        Meta(
            description="Tokens held by the key's jobs that have not ended (each job's end "
            "replaces them by what it used)."
        ),
    ]


class Health(Struct):
    """GET /healthz."""

    status: str
    redis: bool | UnsetType = UNSET


class Readiness(Struct, kw_only=True):
    """GET /readyz."""

    status: str
    redis: bool
    redis_noeviction: Annotated[
        bool | None,
        Meta(
            description="Redis's maxmemory-policy is noeviction, so a full Redis refuses "
            "writes instead of deleting jobs; null when Redis would not say."
        ),
    ]
    redis_persistent: Annotated[
        bool | None,
        Meta(
            description="Redis has AOF or RDB persistence on, so a restart keeps the jobs; "
            "null when Redis would not say."
        ),
    ]
    redis_primary: (
        Annotated[
            str, Meta(description="Behind Sentinel: host:port of the primary this process uses.")
        ]
        | UnsetType
    ) = UNSET
