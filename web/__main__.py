"""`python -m web`: serve the API with gunicorn and gevent workers, set by CHATQ_*."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from chatq import config


class WebServer(BaseApplication):  # type: ignore[misc]
    """gunicorn, configured from Settings instead of its command line."""

    def __init__(self, settings: config.Settings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        """Apply chatq's settings to gunicorn."""
        s = self.settings
        options: dict[str, Any] = {
            "bind": s.bind,
            "workers": s.web_workers,
            "worker_class": "gevent",
            # Parked long-polls count as connections: this caps them per process.
            "worker_connections": s.web_worker_connections,
            "backlog": 4096,
            "keepalive": 75,
            "graceful_timeout": int(s.max_wait_s) + 5,
            "timeout": 60,
            "accesslog": None,
            "loglevel": s.log_level.lower(),
            "proc_name": "chatq-web",
            "control_socket_disable": True,
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """Import and build the app inside the (already monkey-patched) worker."""
        from web.app import create_app

        return create_app()


def main() -> None:
    """Run the web server until it is stopped."""
    WebServer(config.load()).run()


if __name__ == "__main__":
    main()
