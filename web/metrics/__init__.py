"""The web's /metrics: its series, per-request hooks, figures read at scrape."""
