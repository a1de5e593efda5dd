"""A TCP proxy in front of Redis that counts round trips, run in a thread of the harness.

Redis counts commands (`INFO commandstats`), not round trips: a pipeline of ten commands is
one. Here a round trip is one turn of a connection: client bytes that arrive after the
server last spoke (or first on a new connection) begin one; more client bytes before the
server answers belong to the same turn (a pipeline written in several pieces). Pushed
pub/sub messages end a turn without beginning one, so a listener costs nothing until it
writes again. The commands clients send are counted too (RESP arrays read off the client
side): `INFO commandstats` also counts the commands that scripts run inside Redis.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import asdict, dataclass

from scripts.localredis import free_port

CHUNK_BYTES = 65536


@dataclass
class Counts:
    """What has gone through the proxy so far."""

    round_trips: int = 0
    commands_sent: int = 0
    client_writes: int = 0
    connections: int = 0
    client_bytes: int = 0
    server_bytes: int = 0

    def minus(self, earlier: Counts) -> Counts:
        """The counts since `earlier`."""
        mine, theirs = asdict(self), asdict(earlier)
        return Counts(**{k: mine[k] - theirs[k] for k in mine})


class CommandCounter:
    """Counts the commands in a client's byte stream: RESP arrays of bulk strings."""

    def __init__(self) -> None:
        self._buf = b""
        self._elements = 0  # bulk strings still to read of the current command
        self._skip = 0  # bytes of the current bulk string (and its CRLF) still to pass

    def feed(self, data: bytes) -> int:
        """Take the next bytes; answer how many commands they completed."""
        self._buf += data
        done = 0
        while True:
            if self._skip:
                taken = min(self._skip, len(self._buf))
                self._buf, self._skip = self._buf[taken:], self._skip - taken
                if self._skip:
                    return done
                self._elements -= 1
                done += self._elements == 0
                continue
            end = self._buf.find(b"\r\n")
            if end < 0:
                return done
            line, self._buf = self._buf[:end], self._buf[end + 2 :]
            if line[:1] == b"*":
                self._elements = int(line[1:])
                done += self._elements <= 0
            elif line[:1] == b"$":
                self._skip = int(line[1:]) + 2
            else:  # an inline command (redis-cli style): one line, one command
                done += 1


class _Turns:
    """One connection's side of the conversation: is the client in the middle of a turn?"""

    def __init__(self) -> None:
        self.client_turn = False
        self.commands = CommandCounter()


class RoundTripProxy:
    """Listens on a free port of 127.0.0.1 and forwards to Redis on `target_port`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._counts = Counts()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping = asyncio.Event()  # bound to the proxy's loop at first use
        self._thread = threading.Thread(target=self._serve, name="redis-round-trips", daemon=True)

    @property
    def url(self) -> str:
        """The redis:// URL that goes through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RoundTripProxy:
        """Serve in a thread of its own; returns once it listens."""
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("round-trip proxy did not start")
        return self

    def counts(self) -> Counts:
        """A copy of the counts now."""
        with self._lock:
            return Counts(**asdict(self._counts))

    def stop(self) -> None:
        """Stop serving and drop the open connections."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=1024)
        self._ready.set()
        await self._stopping.wait()
        server.close()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            c_writer.close()
            return
        with self._lock:
            self._counts.connections += 1
        turns = _Turns()
        await asyncio.gather(
            self._pipe(c_reader, s_writer, turns, True),
            self._pipe(s_reader, c_writer, turns, False),
        )

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        turns: _Turns,
        from_client: bool,
    ) -> None:
        try:
            while data := await reader.read(CHUNK_BYTES):
                self._note(turns, from_client, data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def _note(self, turns: _Turns, from_client: bool, data: bytes) -> None:
        size = len(data)
        with self._lock:
            if from_client:
                self._counts.client_writes += 1
                self._counts.client_bytes += size
                self._counts.commands_sent += turns.commands.feed(data)
                if not turns.client_turn:
                    self._counts.round_trips += 1
                turns.client_turn = True
            else:
                self._counts.server_bytes += size
                turns.client_turn = False
