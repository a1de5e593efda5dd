"""The web's line per request, and CHATQ_ACCESS_LOG=0 turning it off alone (in process)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from chatq.config import settings as config
from scripts.localredis import free_port
from tests.inproc import in_process

REQUESTS_LOGGER = "chatq.web.requests"


@pytest.fixture(autouse=True)
def _logger_level_restored() -> Iterator[None]:
    """The request logger's level is process-wide: leave it as the next test expects."""
    yield
    logging.getLogger(REQUESTS_LOGGER).setLevel(logging.NOTSET)


def _request_lines(caplog: pytest.LogCaptureFixture, access_log: str) -> list[logging.LogRecord]:
    # An app whose Redis cannot be reached: an unknown path needs none.
    env = {"CHATQ_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0", "CHATQ_ACCESS_LOG": access_log}
    with in_process(config.load(env)) as app, caplog.at_level(logging.INFO):
        assert app.test_client().get("/no/such/path").status_code == 404
        logging.getLogger("chatq.web.other").info("another line")
    assert [r.getMessage() for r in caplog.records if r.name == "chatq.web.other"] == [
        "another line"
    ]
    return [r for r in caplog.records if r.name == REQUESTS_LOGGER]


def test_each_request_is_one_line_by_default(caplog: pytest.LogCaptureFixture) -> None:
    (line,) = _request_lines(caplog, "1")
    assert (line.getMessage(), line.status, line.path) == ("request", 404, "unmatched")  # type: ignore[attr-defined]


def test_access_log_0_drops_the_request_lines_only(caplog: pytest.LogCaptureFixture) -> None:
    assert _request_lines(caplog, "0") == []
