"""How big each benchmark is: the full set (`make bench`) or tiny (`--quick`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """Counts, rates and durations of every section."""

    quick: bool
    compare_levels: tuple[int, ...]
    compare_duration_s: float
    long_job_s: float
    long_job_clients: int
    waiter_levels: tuple[int, ...]
    waiter_rate_per_s: float
    waiter_probes: int
    burst_waiters: int
    gthread_levels: tuple[int, ...]
    throughput_clients: int
    throughput_duration_s: float
    stream_clients: int
    stream_duration_s: float
    baseline_tasks: int
    baseline_variants: tuple[tuple[str, str, int], ...]
    slow_task_variants: tuple[tuple[int, int, bool], ...]
    gateway_rates: tuple[float, ...]
    gateway_named_rates: tuple[float, ...]
    gateway_duration_s: float
    gateway_sequential: int
    litellm_build: bool
    memory_jobs: int
    token_streams: int
    token_count: int
    pool_calls: int
    pool_concurrency: int
    transport_calls: int
    transport_rounds: int
    cache_hits: int
    conn_calls: int
    conn_top_up_cap_s: float
    redis_idle_s: float
    redis_jobs: int
    waitermem_waiters: int
    pacing_jobs: int
    pacing_window_s: float
    bodies_upload_bytes: int
    bodies_refused_bytes: int
    bodies_refused_window_s: float
    http_metrics_requests: int
    http_metrics_rounds: int
    http_metrics_gunicorn_requests: int
    http_metrics_gunicorn_rounds: int
    e2e_levels: tuple[tuple[int, int], ...]  # (parked waiters, runs)
    e2e_window_s: tuple[float, float]  # jobs end this long after their start, spread evenly


FULL = Sizes(
    quick=False,
    compare_levels=(4, 64, 128, 256),
    compare_duration_s=3.0,
    long_job_s=10.0,
    long_job_clients=10,
    waiter_levels=(100, 1000, 10000),
    waiter_rate_per_s=500.0,
    waiter_probes=20,
    burst_waiters=4000,
    gthread_levels=(63, 64, 128),
    throughput_clients=128,
    throughput_duration_s=10.0,
    stream_clients=300,
    stream_duration_s=12.0,
    baseline_tasks=2000,
    baseline_variants=(
        ("plain", "threads", 100),
        ("plain", "gevent", 300),
        ("chatq", "gevent", 300),
    ),
    # (prefetch multiplier, 1 s tasks, with chatq's 0.1 s broker-poll cap)
    slow_task_variants=((1, 1200, True), (2, 1200, True), (4, 1200, True), (1, 1200, False)),
    gateway_rates=(5, 25, 50, 100, 150, 200, 300, 400),
    gateway_named_rates=(50, 200),
    gateway_duration_s=4.0,
    gateway_sequential=300,
    litellm_build=True,
    memory_jobs=1000,
    token_streams=100,
    token_count=30,
    pool_calls=1000,
    pool_concurrency=50,
    transport_calls=1000,
    transport_rounds=6,
    cache_hits=300,
    conn_calls=10000,
    conn_top_up_cap_s=60.0,
    redis_idle_s=5.0,
    redis_jobs=300,
    waitermem_waiters=1000,
    pacing_jobs=2000,
    pacing_window_s=60.0,
    bodies_upload_bytes=200_000_000,
    bodies_refused_bytes=100_000_000,
    bodies_refused_window_s=5.0,
    http_metrics_requests=10_000,
    http_metrics_rounds=7,
    http_metrics_gunicorn_requests=3000,
    http_metrics_gunicorn_rounds=15,
    e2e_levels=((1000, 7), (10000, 3)),
    e2e_window_s=(2.0, 5.0),
)

QUICK = Sizes(
    quick=True,
    compare_levels=(4,),
    compare_duration_s=1.0,
    long_job_s=1.5,
    long_job_clients=2,
    waiter_levels=(20, 50),
    waiter_rate_per_s=200.0,
    waiter_probes=3,
    burst_waiters=50,
    gthread_levels=(4,),
    throughput_clients=8,
    throughput_duration_s=1.5,
    stream_clients=8,
    stream_duration_s=2.0,
    baseline_tasks=50,
    baseline_variants=(("plain", "gevent", 300),),
    slow_task_variants=((1, 40, True),),
    gateway_rates=(5, 20),
    gateway_named_rates=(20,),
    gateway_duration_s=1.0,
    gateway_sequential=10,
    litellm_build=False,  # a quick run uses the proxy's venv only if a full run built it
    memory_jobs=20,
    token_streams=4,
    token_count=6,
    pool_calls=30,
    pool_concurrency=4,
    transport_calls=30,
    transport_rounds=2,
    cache_hits=10,
    conn_calls=100,
    conn_top_up_cap_s=10.0,
    redis_idle_s=1.0,
    redis_jobs=20,
    waitermem_waiters=50,
    pacing_jobs=120,
    pacing_window_s=1.0,
    bodies_upload_bytes=4_000_000,
    bodies_refused_bytes=2_000_000,
    bodies_refused_window_s=0.5,
    http_metrics_requests=300,
    http_metrics_rounds=2,
    http_metrics_gunicorn_requests=50,
    http_metrics_gunicorn_rounds=2,
    e2e_levels=((40, 2),),
    e2e_window_s=(0.5, 1.0),
)
