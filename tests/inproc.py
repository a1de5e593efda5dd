"""The app in process for the tests that need no server: create_app(...).test_client()."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask

from chatq.config.settings import Settings
from tests.procs import LOG_DIR
from web.app import create_app


@contextmanager
def in_process(settings: Settings) -> Iterator[Flask]:
    """create_app(settings) with pytest's log level kept (create_app sets up logging for a
    server process); its notification listener stopped at the end, before the test's Redis
    goes (else it would report the lost Redis). Files go to the session's folder unless
    `settings` name one: never to the user's own data folder, the default."""
    if settings.files_dir == Settings().files_dir:
        settings = dataclasses.replace(settings, files_dir=str(LOG_DIR / "files-inprocess"))
    root = logging.getLogger()
    level = root.level
    app = create_app(settings)
    root.setLevel(level)
    try:
        yield app
    finally:
        app.extensions["chatq"].listener.stop()
