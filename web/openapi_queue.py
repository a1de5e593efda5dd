"""The schema of GET /v1/queue for a key that is not an admin's: its own share (`QueueShare`),
built from the parts of the whole picture (`Queue`, an admin key's answer)."""

from __future__ import annotations

from web.openapi_schemas import Schema, _object, _queue_schema


def _share(queue: Schema) -> Schema:
    """A key's own figures, and the totals that name no tenant."""
    whole = queue["properties"]
    count = whole["in_progress"]
    lane = whole["queues"]["properties"]["interactive"]["properties"]
    own_lane = _object(
        ["depth", "oldest_age_s"],
        depth={
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "The key's jobs waiting in the lane; null where they wait in a "
            "queue shared with other keys (RabbitMQ, or CHATQ_FAIR_DISPATCH=0).",
        },
        oldest_age_s=lane["oldest_age_s"],
    )
    total_lane = _object(["depth"], depth=count)
    totals = _object(
        ["queues", "in_progress", "workers"],
        queues=_object(["interactive", "batch"], interactive=total_lane, batch=total_lane),
        in_progress=count,
        workers=whole["workers"],
    )
    return _object(
        ["key", "queues", "arrival_rate_per_s", "mean_job_seconds", "batches", "totals"],
        key={"type": "string", "description": "The calling key's name."},
        queues=_object(["interactive", "batch"], interactive=own_lane, batch=own_lane),
        arrival_rate_per_s=whole["arrival_rate_per_s"],
        mean_job_seconds=whole["mean_job_seconds"],
        batches=whole["batches"],
        totals=totals,
    )


def schemas() -> dict[str, Schema]:
    """`QueueShare`."""
    return {"QueueShare": _share(_queue_schema())}
