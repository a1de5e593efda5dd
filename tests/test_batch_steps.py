"""The batch loop's steps done twice, as after a crash: a feeder that died before moving its
cursor, a line's end reported by the relay and by the loop. In process, on a Redis of its own,
with the real store and broker (no worker runs the jobs)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
import redis

from chatq import keys
from chatq.batches import lines as batch_lines
from chatq.batches import record as batches
from chatq.batches.file_records import FileIndex, new_meta
from chatq.batches.file_storage import DirectoryStorage, new_file_id
from chatq.batches.record import BatchStore
from chatq.broker.celery_app import make_celery
from chatq.config.settings import Settings
from chatq.jobs import record as jobs
from chatq.metrics import queue_stats
from scripts.localredis import LocalRedis
from tests.batchkit import request_line, stored_batch
from worker.batches.feed import feed, feed_line
from worker.batches.loop import BatchLoop
from worker.batches.settle import settle
from worker.batches.turn import Turn, account_job, lines_from
from worker.batches.validate import validate
from worker.context import WorkerContext, _build

N = 8


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[WorkerContext]:
    server = LocalRedis().start()
    settings = Settings(
        redis_url=server.url, files_dir=str(tmp_path), batch_max_queued=100, lease_s=10.0
    )
    context = _build(settings, make_celery(settings))
    yield context
    context.store.redis.close()
    server.stop()


def _new_batch(ctx: WorkerContext, after: list[str] | None = None) -> str:
    """A batch of alice's of N lines and then `after`, as POST /v1/batches makes it; its id."""
    lines: list[dict[str, Any] | str] = [request_line(f"x{i}", f"line {i}") for i in range(N)]
    return stored_batch(ctx.store.redis, ctx.settings.files_dir, lines + (after or []))


def _batch(ctx: WorkerContext, token: str) -> Turn:
    """A batch of N lines, validated by the worker holding `token`."""
    store = BatchStore(ctx.store.redis, 3600)
    batch_id = _new_batch(ctx)
    assert store.lease(batch_id, token, 10.0)
    storage = DirectoryStorage(ctx.settings.files_dir)
    turn = Turn(ctx, store, storage, token, store.get(batch_id) or {})
    validate(turn)
    turn.reload()
    assert turn.record["status"] == batches.IN_PROGRESS
    return turn


def _take_over(turn: Turn, token: str) -> Turn:
    """Another worker takes the batch once the first one's lease has run out."""
    turn.redis.delete(keys.batch_lease(turn.batch_id))
    assert turn.batches.lease(turn.batch_id, token, 10.0)
    return Turn(turn.ctx, turn.batches, turn.storage, token, turn.reload())


def test_a_feeder_that_died_before_moving_its_cursor_makes_no_job_twice(ctx: WorkerContext) -> None:
    first = _batch(ctx, "dies")
    with first.storage.open(first.record["input_file_id"]) as handle:
        for number, raw, _ in islice(lines_from(handle, 0, 1, 1024 * 1024), 3):
            feed_line(first, number, raw)  # jobs made and sent; then the process dies
    successor = _take_over(first, "survives")
    assert feed(successor, 100) == N
    record = successor.reload()
    assert record["fed"] == str(N) and record["feed_done"] == "1"
    assert queue_stats.depths(ctx.store.redis)["batch"] == N  # one message per line
    made = [ctx.store.get(batch_lines.line_job_id(first.batch_id, i)) for i in range(1, N + 1)]
    assert all(job is not None and job["status"] == jobs.QUEUED for job in made)


def _end(ctx: WorkerContext, job_id: str) -> None:
    assert ctx.store.claim(job_id=job_id, run_id="r", lease_s=10.0).claimed
    result = '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}'
    assert ctx.store.finish(
        job_id=job_id, run_id="r", status=jobs.COMPLETED, fields={"result": result}
    )


def test_a_line_s_end_reported_again_and_again_is_accounted_once(ctx: WorkerContext) -> None:
    turn = _batch(ctx, "w")
    feed(turn, 100)
    job_id = batch_lines.line_job_id(turn.batch_id, 1)
    _end(ctx, job_id)
    client: redis.Redis = ctx.store.redis
    assert account_job(client, turn.batches, job_id, 3600)  # the relay
    assert not account_job(client, turn.batches, job_id, 3600)  # the relay again
    # The loop's net, as after a cancel: it cancels the queued lines, then accounts them.
    assert settle(turn, "queued") == 0
    assert settle(turn, "queued") == N - 1
    assert settle(turn, "queued") == 0
    record: dict[str, Any] = turn.reload()
    assert (record["completed"], record["failed"]) == ("1", str(N - 1))
    assert (record["input_tokens"], record["output_tokens"]) == ("3", "5")
    assert client.llen(keys.batch_order(turn.batch_id)) == N
    assert client.hlen(keys.batch_results(turn.batch_id)) == N


def test_the_janitor_deletes_expired_files_but_not_one_a_batch_reads(ctx: WorkerContext) -> None:
    turn = _batch(ctx, "w")  # its input file is read by an unfinished batch
    files = FileIndex(ctx.store.redis)
    storage = DirectoryStorage(ctx.settings.files_dir)
    spare = new_file_id()
    upload = storage.create(spare)
    upload.write(b"{}\n")
    upload.commit()
    past = time.time() - 10
    files.add(
        new_meta(
            file_id=spare,
            owner="alice",
            size_bytes=3,
            lines=1,
            filename="x",
            purpose="batch",
            created_at=past - 60,
            expires_at=past,
        )
    )
    in_use = turn.record["input_file_id"]
    ctx.store.redis.hset(keys.file_meta(in_use), "expires_at", repr(past))
    ctx.store.redis.zadd(keys.files_expiry(), {in_use: past})
    BatchLoop(ctx).sweep_files()
    assert (
        files.get(spare, "alice", 0) is None and not (Path(ctx.settings.files_dir) / spare).exists()
    )
    assert ctx.store.redis.exists(keys.file_meta(in_use))
    assert (Path(ctx.settings.files_dir) / in_use).exists()
    assert ctx.store.redis.zscore(keys.files_expiry(), in_use) > time.time()


def test_a_fed_line_whose_job_is_gone_is_an_error_so_the_batch_still_ends(
    ctx: WorkerContext,
) -> None:
    turn = _batch(ctx, "w")
    feed(turn, 100)
    ctx.store.redis.delete(keys.job(batch_lines.line_job_id(turn.batch_id, 3)))
    assert settle(turn) == 1
    record = turn.reload()
    assert record["failed"] == "1"
    stored = ctx.store.redis.hget(keys.batch_results(turn.batch_id), 3)
    assert stored and '"code":"request_lost"' in stored


def _tick_commands(loop: BatchLoop) -> int:
    """The commands Redis runs for one tick of a batch loop in a steady state: every batch
    validated, and as many lines fed as CHATQ_BATCH_MAX_QUEUED allows (no worker runs them)."""
    loop.tick()  # validates the new batches
    loop.tick()  # feeds up to the bound
    client: redis.Redis = loop.ctx.store.redis
    client.config_resetstat()
    loop.tick()
    stats = client.info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())


def test_a_tick_s_redis_work_grows_with_the_batches_not_their_square(
    ctx: WorkerContext,
) -> None:
    full = _build(replace(ctx.settings, batch_max_queued=2), make_celery(ctx.settings))
    loop = BatchLoop(full)
    for _ in range(10):
        _new_batch(full)
    ten = _tick_commands(loop)
    for _ in range(30):
        _new_batch(full)
    forty = _tick_commands(loop)
    assert queue_stats.batch_lines(full.store.redis).fed == 2
    # Linear: a + 40 b <= 4 (a + 10 b). Each batch reading every batch's record costs 11x.
    assert forty <= 4 * ten, (ten, forty)
    full.store.redis.close()


def test_a_batch_whose_last_lines_are_not_to_run_is_read_to_its_end_without_room(
    ctx: WorkerContext,
) -> None:
    full = _build(replace(ctx.settings, batch_max_queued=N), make_celery(ctx.settings))
    batch_id = _new_batch(full, ["not json", "{}"])
    loop = BatchLoop(full)
    loop.tick()  # validates it
    loop.tick()  # feeds its N valid lines: the whole bound, read as one chunk
    loop.tick()  # no room, and no valid line left: it reads on past the invalid ones
    record = BatchStore(full.store.redis, 3600).get(batch_id) or {}
    assert (record["fed"], record["feed_done"]) == (str(N), "1")
    full.store.redis.close()
