"""The Markdown tables of what chatq adds to a call: long-poll against the alternatives, the
gateway against LiteLLM and the direct call, token latency, background responses, pooled
upstream calls."""

from __future__ import annotations

from bench.rows import JSON, cpu_line, dig, table


def compare_table(s: JSON) -> str:
    """Measure 1: each alternative at its lowest and highest concurrency held."""
    rows = []
    for name, sys_ in (dig(s, "compare", "systems") or {}).items():
        first = sys_["levels"][0]
        rows.append(
            [
                name,
                first["clients"],
                first["latency"]["p50_ms"],
                first["latency"]["p99_ms"],
                first["requests_per_job"],
                sys_["max_held"],
                sys_["breaks_at"] or "not within the levels run",
            ]
        )
    return table(
        [
            "client",
            "clients",
            "added p50 ms",
            "added p99 ms",
            "requests/job",
            "held up to",
            "breaks at",
        ],
        rows,
    )


def gateway_table(s: JSON) -> str:
    """Each system at each rate: latency, what it adds over the direct call, CPU."""
    gw = dig(s, "gateway") or {}
    rows = []
    stages = [("sequential", gw.get("sequential"))] + [
        (f"{p['rate_per_s']:g}/s", p) for p in gw.get("points", [])
    ]
    for label, stage in stages:
        for name in gw.get("systems", []):
            run = (stage or {}).get(name)
            if not run:
                continue
            added = dig(stage, "overhead", name) or {}
            rows.append(
                [
                    label,
                    name,
                    run["latency"]["p50_ms"],
                    run["latency"]["p99_ms"],
                    added.get("p50_ms"),
                    added.get("p99_ms"),
                    run.get("jobs_per_s"),
                    run["errors"],
                    "yes" if run.get("saturated") else "",
                    cpu_line(run.get("cpu")),
                ]
            )
    note = ""
    if gw and dig(gw, "litellm", "status") != "measured":
        note = f"\n\nLiteLLM {dig(gw, 'litellm', 'status')}: {dig(gw, 'litellm', 'note')}."
    sat = "; ".join(
        f"{n} saturated at {v['saturated_at_per_s'] or '—'}/s (held "
        f"{v['max_rate_held_per_s'] or '—'}/s)"
        for n, v in (gw.get("saturation") or {}).items()
        if n != "direct"
    )
    return (
        table(
            [
                "load",
                "system",
                "p50 ms",
                "p99 ms",
                "added p50",
                "added p99",
                "done/s",
                "errors",
                "saturated",
                "CPU (% of a core)",
            ],
            rows,
        )
        + (f"\n\nSaturation: {sat}." if sat else "")
        + note
    )


def _steady(via: JSON) -> str:
    steady = via.get("steady_latency")
    return f"{steady['p50_ms']} / {steady['p99_ms']}" if steady else "—"


def _cpu_per_token(via: JSON) -> str:
    cpu = via.get("cpu_ms_per_token")
    roles = ("web", "worker", "redis")
    return " / ".join(str(cpu.get(role, "—")) for role in roles) if cpu else "—"


def tokens_table(s: JSON) -> str:
    """Token latency through the events long-poll and through SSE."""
    tok = dig(s, "tokens") or {}
    rows = [
        [
            via,
            tok["streams"],
            tok["tps"],
            tok[via]["latency"]["p50_ms"],
            tok[via]["latency"]["p99_ms"],
            tok[via]["latency"]["max_ms"],
            _steady(tok[via]),
            f"{tok[via]['tokens_seen']}/{tok[via]['tokens_expected']}",
            tok[via]["requests"],
            _cpu_per_token(tok[via]),
        ]
        for via in ("events", "sse")
        if via in tok
    ]
    return table(
        [
            "followed by",
            "streams",
            "tokens/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "after 0.5 s: p50 / p99 ms",
            "tokens seen",
            "requests",
            "CPU ms/token: web / worker / Redis",
        ],
        rows,
    )


def background_table(s: JSON) -> str:
    """Issue 15: a background response against a plain job, one client, instant upstream."""
    flows = dig(s, "background", "flows") or {}
    rows = [
        [
            name,
            f["requests_per_job"],
            f["latency"]["p50_ms"],
            f["latency"]["p99_ms"],
            f.get("submit_server_ms"),
            f["web_cpu_ms_per_job"],
            f["worker_cpu_ms_per_job"],
        ]
        for name, f in flows.items()
    ]
    return table(
        [
            "flow",
            "requests/job",
            "p50 ms",
            "p99 ms",
            "submit server ms",
            "web CPU ms/job",
            "worker CPU ms/job",
        ],
        rows,
    )


def pooling_table(s: JSON) -> str:
    """Issue 4: pooled against fresh connections."""
    rows = [
        [
            v["kind"],
            "https" if v["tls"] else "http",
            v["threads"],
            v["calls"],
            v["latency"]["p50_ms"],
            v["latency"]["p99_ms"],
            v["cpu_ms_per_call"],
            v["connections_opened"],
        ]
        for v in dig(s, "pooling", "variants") or []
    ]
    return table(
        [
            "session",
            "scheme",
            "threads",
            "calls",
            "p50 ms",
            "p99 ms",
            "CPU ms/call",
            "connections opened",
        ],
        rows,
    )


def http_metrics_table(s: JSON) -> str:
    """Issue 35: CPU per request of the HTTP metrics, the exporter against hand-written hooks."""
    h = dig(s, "httpmetrics") or {}
    us, added = h.get("cpu_us_per_request", {}), h.get("metrics_cpu_us_per_request", {})
    rows = [["WSGI", name, value, added.get(name, "—")] for name, value in us.items()]
    real = h.get("gunicorn", {})
    for name, value in real.get("cpu_us_per_request", {}).items():
        rows.append(["gunicorn, GET /healthz", name, value, "—"])
    if real:
        paired = real["exporter_minus_hand_written_us"]
        rows.append(
            ["gunicorn, GET /healthz", "exporter minus hand_written, per round", paired, "—"]
        )
    return table(["through", "app", "CPU µs/request", "metrics' µs/request"], rows)
