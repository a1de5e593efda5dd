"""The reader of a batch's input file and the check of each line, in process: a BOM, a line
over CHATQ_MAX_BODY_BYTES, a line that is only a NUL byte, a line its struct refuses."""

from __future__ import annotations

import io
import json

import pytest

from chatq.batches.lines import Line, LineError, parse_line
from chatq.config.settings import Settings
from tests.batchkit import CHAT, request_line
from worker.batches.turn import lines_from

MAX_BYTES = 256


def _read(data: bytes, offset: int = 0, number: int = 1) -> list[tuple[int, bytes, int]]:
    return list(lines_from(io.BytesIO(data), offset, number, MAX_BYTES))


def _parsed(data: bytes) -> list[Line | LineError]:
    settings = Settings(max_body_bytes=MAX_BYTES)
    return [parse_line(raw, n, CHAT, settings) for n, raw, _ in _read(data)]


def _codes(data: bytes) -> list[str]:
    return [p.code if isinstance(p, LineError) else "ok" for p in _parsed(data)]


def _short_line(custom_id: str) -> bytes:
    line = json.dumps(request_line(custom_id, "hi"), separators=(",", ":")).encode()
    assert len(line) <= MAX_BYTES
    return line


def test_a_utf8_bom_at_the_start_of_the_file_is_no_part_of_line_1() -> None:
    data = b"\xef\xbb\xbf" + _short_line("a") + b"\n" + _short_line("b") + b"\n"
    found = _read(data)
    assert [(n, raw) for n, raw, _ in found] == [
        (1, _short_line("a") + b"\n"),
        (2, _short_line("b") + b"\n"),
    ]
    assert found[-1][2] == len(data)
    assert _codes(data) == ["ok", "ok"]
    # Read on from the cursor after line 1: the BOM is behind it.
    assert _read(data, found[0][2], 2) == found[1:]


def test_a_bom_that_does_not_start_the_file_is_the_line_s() -> None:
    data = _short_line("a") + b"\n\xef\xbb\xbf" + _short_line("b") + b"\n"
    assert _codes(data) == ["ok", "invalid_json_line"]


def test_a_last_line_that_is_a_nul_byte_is_invalid_json_not_too_long() -> None:
    data = _short_line("a") + b"\n\x00"
    assert _codes(data) == ["ok", "invalid_json_line"]
    assert _codes(b"\x00\n" + _short_line("a")) == ["invalid_json_line", "ok"]


def test_a_line_over_the_body_limit_is_read_past_as_request_too_large() -> None:
    long_line = b'{"custom_id": "' + b"x" * (3 * MAX_BYTES) + b'"}\n'
    data = _short_line("a") + b"\n" + long_line + b"\n" + _short_line("b")
    found = _read(data)
    assert [n for n, _, _ in found] == [1, 2, 4]
    assert found[1][2] == len(_short_line("a")) + 1 + len(long_line)
    assert found[2][2] == len(data)
    parsed = _parsed(data)
    assert isinstance(parsed[1], LineError) and parsed[1].code == "request_too_large"
    assert str(MAX_BYTES) in parsed[1].message and "CHATQ_MAX_BODY_BYTES" in parsed[1].message
    assert isinstance(parsed[0], Line) and isinstance(parsed[2], Line)


def test_the_body_limit_counts_a_line_without_its_end_of_line() -> None:
    padded = b" " * (MAX_BYTES - 2)
    at_limit = b"{}" + padded  # MAX_BYTES bytes: allowed, whatever ends it
    over = b"{}" + padded + b" "
    for end in (b"\n", b"\r\n", b""):
        assert [raw for _, raw, _ in _read(at_limit + end)] == [at_limit + end], end
        assert _codes(over + end) == ["request_too_large"], end
    assert _codes(over + b"\r\n" + _short_line("a")) == ["request_too_large", "ok"]


def test_a_line_nested_too_deeply_says_so() -> None:
    depth = 1200
    line = b'{"custom_id": "a", "body": ' + b"[" * depth + b"]" * depth + b"}"
    error = parse_line(line, 1, CHAT, Settings(max_body_bytes=len(line)))
    assert isinstance(error, LineError) and error.code == "invalid_json_line"
    assert "too deeply" in error.message


def _error(line: dict[str, object], endpoint: str = CHAT) -> LineError:
    parsed = parse_line(json.dumps(line).encode(), 5, endpoint, Settings())
    assert isinstance(parsed, LineError), parsed
    return parsed


@pytest.mark.parametrize(
    ("fields", "code", "param", "custom_id"),
    [
        ({"custom_id": 5}, "invalid_custom_id", "custom_id", None),
        ({"custom_id": "x" * 513}, "invalid_custom_id", "custom_id", None),
        ({"custom_id": None}, "missing_required_parameter", "custom_id", None),
        ({"method": "GET"}, "invalid_method", "method", "c1"),
        ({"method": None}, "missing_required_parameter", "method", "c1"),
        ({"url": "/v1/embeddings"}, "url_mismatch", "url", "c1"),
        ({"url": "/v1/responses"}, "url_mismatch", "url", "c1"),
        ({"body": "hi"}, "invalid_request", "body", "c1"),
        ({"body": {"model": "fake"}}, "missing_field", "body.messages", "c1"),
    ],
)
def test_a_line_its_struct_refuses_names_the_field_and_keeps_a_valid_custom_id(
    fields: dict[str, object], code: str, param: str, custom_id: str | None
) -> None:
    error = _error({**request_line("c1", "hi"), **fields})
    assert (error.code, error.param, error.custom_id) == (code, param, custom_id)
    assert error.number == 5
    assert error.message.startswith(f"`{param.removeprefix('body.')}` ")


def test_a_bad_custom_id_is_the_error_wherever_the_line_has_it() -> None:
    line = {"method": "GET", "body": "hi", "url": CHAT, "custom_id": 7}
    error = _error(line)
    assert (error.code, error.custom_id) == ("invalid_custom_id", None)
    error = _error({**line, "custom_id": "late"})
    assert (error.code, error.param, error.custom_id) == ("invalid_method", "method", "late")
    assert error.message == '`method` must be "POST" (got "GET").'


def test_a_line_s_url_must_be_its_batch_s_endpoint() -> None:
    error = _error(request_line("c1", "hi"), "/v1/responses")
    assert error.message == "`url` must be this batch's endpoint, /v1/responses."
