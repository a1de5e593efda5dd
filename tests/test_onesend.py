"""web/server/onesend.py: gunicorn's response with its header block sent with the first body bytes,
on a real socket pair, the request parsed by gunicorn itself; the sends are counted."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from gunicorn.config import Config
from gunicorn.http.parser import RequestParser

from web.server.onesend import OneSendResponse


class CountedSocket:
    """The server's end of the pair, each `sendall` recorded."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sends: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sends.append(data)
        self.sock.sendall(data)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, CountedSocket]]:
    client, server = socket.socketpair()
    with client, server:
        yield client, CountedSocket(server)


def _response(client: socket.socket, server: CountedSocket, method: str) -> OneSendResponse:
    client.sendall(f"{method} /v1/jobs/x HTTP/1.1\r\nHost: chatq\r\n\r\n".encode())
    cfg = Config()
    request = next(iter(RequestParser(cfg, server.sock, ("127.0.0.1", 1))))
    return OneSendResponse(request, server, cfg)


def test_headers_and_a_small_body_leave_in_one_send(
    pair: tuple[socket.socket, CountedSocket],
) -> None:
    client, server = pair
    response = _response(client, server, "GET")
    response.start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")]
    )
    response.write(b"{}")
    response.close()
    assert len(server.sends) == 1
    head, _, body = server.sends[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 2" in head
    assert body == b"{}"


def test_a_response_without_body_sends_its_headers_when_it_closes(
    pair: tuple[socket.socket, CountedSocket],
) -> None:
    client, server = pair
    response = _response(client, server, "HEAD")
    response.start_response("200 OK", [("Content-Length", "15")])
    response.write(b'{"status":"ok"}')  # dropped: a HEAD answer has no body
    assert server.sends == []
    response.close()
    assert len(server.sends) == 1 and server.sends[0].endswith(b"\r\n\r\n")


def test_a_stream_sends_its_headers_with_its_first_event_not_at_its_end(
    pair: tuple[socket.socket, CountedSocket],
) -> None:
    client, server = pair
    response = _response(client, server, "GET")
    response.start_response("200 OK", [("Content-Type", "text/event-stream")])
    response.write(b"data: 1\n\n")
    # The first event reaches the client at once, its headers with it, chunked.
    assert len(server.sends) == 1
    assert server.sends[0].endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n")
    assert b"Transfer-Encoding: chunked" in server.sends[0]
    response.write(b"data: 2\n\n")
    response.close()
    assert server.sends[1:] == [b"9\r\ndata: 2\n\n\r\n", b"0\r\n\r\n"]
