"""What chatq adds to a call, judged against the alternatives measured in the same run: the
naive Flask + Celery app, short polling, LiteLLM's proxy, the direct call."""

from __future__ import annotations

from bench.rows import JSON, Row, all_met, dig, fmt, level, missing

NAIVE = "flask_celery_gthread64"  # the naive Flask view blocking on AsyncResult.get()


def _row(measure: str, target: str, reached: str, met: bool | None) -> Row:
    return Row(measure, target, reached, met, 12)


def added_latency(s: JSON) -> list[Row]:
    """Added latency to a 1 s job at the lowest load: the naive app and short polling, each
    less the direct call's time in the same run (a run without it: less the nominal 1 s)."""
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
    direct = dig(s, "compare", "direct", "latency", "p50_ms")
    past = 0.0 if direct is None else float(direct)
    added = {name: max(v - past, 0.001) for name, v in (("cq", cq), ("naive", naive), ("sp", sp))}
    below = added["sp"] / added["cq"]
    reached = (
        f"chatq {fmt(added['cq'])} ms; naive app {fmt(added['naive'])} ms "
        f"(chatq = {added['cq'] / added['naive']:.2f}x); short polling {fmt(added['sp'])} ms "
        f"({below:.0f}x chatq's)"
    )
    if direct is not None:
        reached += (
            f"; past the direct call's {fmt(past)} ms (past 1 s: chatq {fmt(cq)}, "
            f"naive app {fmt(naive)})"
        )
    return [
        _row(
            measure + ("" if clients == 4 else f" (run with {clients})"),
            target,
            reached,
            added["cq"] <= added["naive"] / 2 and below >= 100,
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


def long_job(s: JSON) -> list[Row]:
    """Requests per long job, chatq against 1 s short polling."""
    target = "≥ 10x fewer requests for a 10 s job"
    lj = dig(s, "compare", "long_job")
    if not lj or not dig(lj, "chatq", "requests_per_job"):
        return [missing("requests per long job", target)]
    a, b = lj["short_poll"]["requests_per_job"] or 0, lj["chatq"]["requests_per_job"]
    return [
        Row(
            f"requests per {lj['job_s']:g} s job",
            target,
            f"{a / b:.1f}x ({b:g} vs {a:g})",
            a / b >= 10 and lj["job_s"] >= 10,
        )
    ]


def cache_hit(s: JSON) -> list[Row]:
    """Cache hit latency at submit."""
    c = dig(s, "cache")
    target = "p50 ≤ 2 ms server time"
    if not c or c.get("status") != "measured":
        return [
            Row("cache hit at submit", target, "TODO: " + (dig(c, "note") or "not run"), None, 4)
        ]
    server = c.get("server_p50_ms")
    return [
        Row(
            "cache hit at submit",
            target,
            f"server p50 ≈ {fmt(server)} ms (chatq's histogram, interpolated); client-seen "
            f"p50 {fmt(c['client_latency']['p50_ms'])} ms; {c['hits']}/{c['submits']} hits",
            server is not None and server <= 2,
            4,
        )
    ]


def background(s: JSON) -> list[Row]:
    """What a background response adds over a plain job (issue 15): measured, no target."""
    a = dig(s, "background", "added_background")
    measure = "background response over a job (submit + long-poll, one client)"
    if not a:
        return [missing(measure, "measured, no target", 15)]
    return [
        Row(
            measure,
            "measured, no target",
            f"p50 {a['latency_p50_ms']:+} ms, submit {a.get('submit_server_ms', 0):+} ms "
            f"server time, web CPU {a['web_cpu_ms_per_job']:+} ms/job, "
            f"{a['requests_per_job']:+g} round trips",
            None,
            15,
        )
    ]
