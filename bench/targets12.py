"""Issue 12's targets, one row per line of its table, each judged against its peer of the
same run (the soak rows against the soak results given with `--soak`)."""

from __future__ import annotations

from collections.abc import Callable

from bench.rows import JSON, Row, all_met, dig, fmt, level, missing

NAIVE = "flask_celery_gthread64"  # the naive Flask view blocking on AsyncResult.get()
GC_LIMIT_S = 0.05


def _row(measure: str, target: str, reached: str, met: bool | None) -> Row:
    return Row(measure, target, reached, met, 12)


def added_latency(s: JSON) -> list[Row]:
    """Added latency to a 1 s job at the lowest load: the naive app and short polling."""
    measure = "added latency to a 1 s job, 4 clients, p50"
    target = "≤ half of the naive Flask+Celery app's, and ≥ 100x below 1 s short polling"
    systems = dig(s, "compare", "systems") or {}
    p50 = {
        n: dig(systems, n, "levels", 0, "latency", "p50_ms")
        for n in ("chatq_longpoll", NAIVE, "short_poll_1s")
    }
    cq, naive, sp = p50["chatq_longpoll"], p50[NAIVE], p50["short_poll_1s"]
    if cq is None or naive is None or sp is None:
        return [missing(measure, target, 12)]
    clients = dig(systems, "chatq_longpoll", "levels", 0, "clients")
    below = sp / max(cq, 0.001)
    return [
        _row(
            measure + ("" if clients == 4 else f" (run with {clients})"),
            target,
            f"chatq {fmt(cq)} ms; naive app {fmt(naive)} ms (chatq = {cq / naive:.2f}x); "
            f"short polling {fmt(sp)} ms ({below:.0f}x chatq's)",
            cq <= naive / 2 and below >= 100,
        )
    ]


def _overhead(gw: JSON, rate: float | str, name: str, q: str) -> float | None:
    if rate == "sequential":
        found = dig(gw, "sequential", "overhead", name, f"{q}_ms")
    else:
        found = dig(level(gw.get("points"), "rate_per_s", rate), "overhead", name, f"{q}_ms")
    return None if found is None else float(found)


def _versus_litellm(gw: JSON, peer: bool) -> tuple[list[str], list[bool | None]]:
    """chatq's p50 overhead against half of LiteLLM's, sequential and at each named rate."""
    texts, parts = [], []
    for rate in ["sequential", *gw.get("named_rates", [])]:
        cq, ll = _overhead(gw, rate, "chatq", "p50"), _overhead(gw, rate, "litellm", "p50")
        label = rate if rate == "sequential" else f"{rate:g}/s"
        texts.append(f"{label} +{fmt(cq)} ms" + (f" vs LiteLLM +{fmt(ll)}" if peer else ""))
        parts.append(None if cq is None or ll is None else cq <= ll / 2)
    return texts, parts


def _saturation(gw: JSON) -> tuple[str, bool | None]:
    """Where chatq and LiteLLM saturate; chatq's must be the higher."""
    cq, ll = (dig(gw, "saturation", n, "saturated_at_per_s") for n in ("chatq", "litellm"))
    text = (
        f"saturates at {fmt(cq) if cq else 'none of the rates run'} vs LiteLLM "
        f"{fmt(ll) if ll else 'none of the rates run'}"
    )
    if ll is None:
        return text, None if cq is None else False
    return text, cq is None or cq > ll


def gateway(s: JSON) -> list[Row]:
    """chatq's front door and LiteLLM's proxy over the direct call, at each rate."""
    measure = "gateway overhead vs direct, sequential, 50/s and 200/s, p50 / p99"
    target = (
        "p50 ≤ half of LiteLLM's at every rate in the same run; p99 ≤ 25 ms at 50/s; "
        "saturation rate above LiteLLM's"
    )
    gw = dig(s, "gateway")
    if not gw or not gw.get("points"):
        return [missing(measure, target, 12)]
    peer = dig(gw, "litellm", "status") == "measured"
    texts, parts = _versus_litellm(gw, peer)
    p99 = _overhead(gw, 50, "chatq", "p99")
    texts.append(f"p99 at 50/s +{fmt(p99)} ms")
    parts.append(None if p99 is None else p99 <= 25)
    sat_text, sat_ok = _saturation(gw)
    texts.append(sat_text)
    parts.append(sat_ok)
    if not peer:
        texts.append(f"LiteLLM {dig(gw, 'litellm', 'status')}: {dig(gw, 'litellm', 'note')}")
    return [_row(measure, target, "; ".join(texts), all_met(parts))]


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


def tokens(s: JSON) -> list[Row]:
    """Token latency p99 through the events long-poll and through SSE."""
    tok = dig(s, "tokens")
    measure = "token latency, 100 streams x 10 tokens/s, p99 (events long-poll; SSE)"
    target = "≤ 50 ms both"
    if not tok or "sse" not in tok:
        return [missing(measure, target, 12)]
    p99 = {via: dig(tok, via, "latency", "p99_ms") for via in ("events", "sse")}
    seen = all(tok[v]["tokens_seen"] == tok[v]["tokens_expected"] for v in ("events", "sse"))
    if tok["streams"] != 100:
        measure += f" (run with {tok['streams']} streams)"
    return [
        _row(
            measure,
            target,
            f"events {fmt(p99['events'])} ms; SSE {fmt(p99['sse'])} ms"
            + _steady_p99(tok)
            + ("" if seen else " (tokens missing)"),
            None if None in p99.values() else all(v <= 50 for v in p99.values()) and seen,
        )
    ]


def _steady_p99(tok: JSON) -> str:
    """The p99 after each stream's first half second, when measured."""
    steady = {via: dig(tok, via, "steady_latency", "p99_ms") for via in ("events", "sse")}
    if None in steady.values():
        return ""
    return (
        f" (after each stream's first 0.5 s: events {fmt(steady['events'])} ms, "
        f"SSE {fmt(steady['sse'])} ms)"
    )


def wake_throughput(s: JSON) -> list[Row]:
    """Wakes per second of one web process, all jobs ended at once."""
    burst = dig(s, "waiters", "burst")
    measure, target = "wake throughput per web process", "≥ 2,500/s"
    if not burst:
        return [missing(measure, target, 12)]
    return [
        _row(
            measure,
            target,
            f"{burst['wakes_per_s']:,}/s over {burst['waiters']:,} waiters "
            f"(finishes issued at {burst['finishes_per_s']:,}/s)",
            burst["wakes_per_s"] >= 2500,
        )
    ]


def waiters_rss(s: JSON) -> list[Row]:
    """10,000 parked waiters in one web process: RSS; the per-waiter KiB beside it."""
    measure, target = "10,000 parked waiters, web RSS", "≤ 300 MiB"
    lv = level(dig(s, "waiters", "levels"), "waiters", 10000)
    kib = dig(s, "waitermem", "kib_per_waiter")
    traced = (
        f"; tracemalloc {kib} KiB per waiter over {s['waitermem']['waiters']:,}"
        if kib is not None
        else ""
    )
    if lv is None:
        return [missing(measure, target, 12, "not measured in this run" + traced)]
    return [
        _row(
            measure,
            target,
            f"{lv['rss_parked_mib']} MiB (base {lv['rss_before_mib']}, "
            f"{lv['kib_per_waiter']} KiB/waiter by RSS), {lv['errors']} errors{traced}",
            lv["rss_parked_mib"] <= 300 and lv["errors"] == 0,
        )
    ]


JUDGES: list[Callable[[JSON], list[Row]]] = [
    added_latency,
    gateway,
    throughput,
    cpu_per_job,
    redis_per_job,
    tokens,
    wake_throughput,
    waiters_rss,
]
