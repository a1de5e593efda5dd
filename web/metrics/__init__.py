"""The web's metrics: its series, its per-request hooks, figures read at scrape time."""
