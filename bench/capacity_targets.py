"""What a job costs: throughput and CPU against bare Celery on the same pool, Redis commands
and round trips per job."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, fmt, missing


def _row(measure: str, target: str, reached: str, met: bool | None) -> Row:
    return Row(measure, target, reached, met, 12)


def throughput(s: JSON) -> list[Row]:
    """Instant upstream against bare Celery on the same pool; the 1 s streaming upstream."""
    t = dig(s, "throughput")
    m1 = "throughput, instant upstream, 1 web + 1 worker process"
    m2 = "throughput, 1 s streaming upstream"
    t1, t2 = "≥ 60 % of bare Celery on the same pool", "≥ 150 jobs/s"
    if not t:
        return [missing(m1, t1, 12), missing(m2, t2, 12)]
    bare, pct = t.get("bare_celery_same_pool"), t.get("instant_vs_bare_pct")
    rows = [
        missing(m1, t1, 12, "no bare Celery run on chatq's pool")
        if not bare or pct is None
        else _row(
            m1,
            t1,
            f"{fmt(t['instant']['jobs_per_s'])} jobs/s = {pct} % of "
            f"{fmt(bare['jobs_per_s'])} (bare Celery, default settings, "
            f"{bare['pool']} x{bare['slots']})",
            pct >= 60,
        )
    ]
    stream = t["streaming_1s"]["jobs_per_s"]
    rows.append(
        _row(
            m2,
            t2,
            f"{fmt(stream)} jobs/s, {t['streaming_1s']['in_flight']['mean']} in flight (mean)",
            (stream or 0) >= 150,
        )
    )
    return rows


def cpu_per_job(s: JSON) -> list[Row]:
    """chatq's CPU per job (web + worker + Redis) over bare Celery's CPU per task."""
    measure = "CPU per job (web + worker + Redis) / bare Celery CPU per task"
    target = "≤ 3x"
    mine = dig(s, "throughput", "instant", "cpu_ms_per_job")
    bare = dig(s, "throughput", "bare_celery_same_pool")
    ratio = dig(s, "throughput", "cpu_per_job_vs_bare_task")
    if not mine or not bare or ratio is None:
        return [missing(measure, target, 12)]
    roles = bare["cpu_ms_per_task_by_role"]
    return [
        _row(
            measure,
            target,
            f"{ratio}x: {mine['chatq (web + worker + redis)']} ms (web {mine.get('web')}, "
            f"worker {mine.get('worker')}, Redis {mine.get('redis')}) / "
            f"{bare['cpu_ms_per_task']} ms (bare {bare['pool']} worker; its Redis "
            f"{roles.get('redis')}, producer {roles.get('producer (harness)')})",
            ratio <= 3,
        )
    ]


def redis_per_job(s: JSON) -> list[Row]:
    """Redis commands (INFO commandstats) and round trips (the counting proxy) per job."""
    measure = "Redis commands / round trips per job (no streaming)"
    target = "≤ 25 / ≤ 8"
    per = dig(s, "rediscalls", "per_job")
    if not per:
        return [missing(measure, target, 12)]
    return [
        _row(
            measure,
            target,
            f"{fmt(per['commands'])} commands ({fmt(per['commands_sent'])} sent, "
            f"{fmt(per['script_calls'])} script calls) / {fmt(per['round_trips'])} round "
            f"trips",
            per["commands"] <= 25 and per["round_trips"] <= 8,
        )
    ]
