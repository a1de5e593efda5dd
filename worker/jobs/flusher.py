"""Streamed text on its way to the store: one writer per attempt, one flusher per process.

Each running attempt buffers its text in a DeltaWriter. Every flush interval the process's
one Flusher sends the buffered text of all of them as one pipeline (one round trip, one
notification), instead of one round trip per job. A writer whose buffer outgrows
`max_chars` writes at once. A piece whose answer was lost is sent again exactly as it was,
before any newer text, so that the store recognises it and never appends it twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from chatq.jobs import Piece, Store
from chatq.topology import is_backend_error
from worker.jobs.persisting import persist
from worker.jobs.running import LOST, Handle

log = logging.getLogger(__name__)


class DeltaWriter:
    """Buffers one attempt's generated text until the flusher (or the attempt's end) writes it."""

    def __init__(self, store: Store, handle: Handle, max_chars: int) -> None:
        self.store = store
        self.handle = handle
        self.max_chars = max_chars
        self.lock = threading.Lock()
        self.written_bytes = 0
        self.lost = False
        self._pending: list[str] = []
        self._pending_chars = 0
        self._unconfirmed: Piece | None = None  # sent, but its answer never came

    def add(self, text: str) -> bool:
        """Take new text; False once the job is known to be no longer ours."""
        if text:
            with self.lock:
                self._pending.append(text)
                self._pending_chars += len(text)
                full = self._pending_chars >= self.max_chars
            if full:
                self.flush()
        return not self.lost

    def has_text(self) -> bool:
        """Whether there is text to send; read without the lock, so text added meanwhile
        waits for the next flush."""
        return bool(self._pending) or self._unconfirmed is not None

    def next_piece(self) -> Piece | None:
        """What to send now (the lock held): the unconfirmed piece, else all pending text."""
        if self._unconfirmed is None and self._pending:
            h, text = self.handle, "".join(self._pending)
            self._unconfirmed = Piece(h.job_id, h.run_id, self.written_bytes, text)
            self._pending.clear()
            self._pending_chars = 0
        return self._unconfirmed

    def confirmed(self, ours: bool) -> None:
        """The store answered for the unconfirmed piece (the lock held)."""
        piece, self._unconfirmed = self._unconfirmed, None
        if piece is None:
            return
        if ours:
            self.written_bytes += len(piece.text.encode())
        else:
            self.lost = True
            self.handle.abort(LOST)

    def flush(self) -> bool:
        """Write everything now, through Redis outages until the job's deadline."""
        with self.lock:
            while not self.lost and (piece := self.next_piece()) is not None:
                self._send(piece)
        return not self.lost

    def close(self) -> str:
        """The attempt is over: what was sent is confirmed; answers the text still buffered,
        which goes with the job's end."""
        with self.lock:
            if self._unconfirmed is not None and not self.lost:
                self._send(self._unconfirmed)
            text = "".join(self._pending)
            self._pending.clear()
            self._pending_chars = 0
            return text

    def _send(self, piece: Piece) -> None:
        ours = persist(
            lambda: self.store.append_many([piece])[0],
            until=self.handle.deadline,
            what=f"text of {piece.job_id}",
        )
        self.confirmed(ours)


class Flusher:
    """One per worker process: writes every writer's buffered text each `interval_s`."""

    def __init__(self, store: Store, interval_s: float) -> None:
        self.store = store
        self.interval_s = interval_s
        self._writers: set[DeltaWriter] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = False

    def writer(self, handle: Handle, max_chars: int) -> DeltaWriter:
        """A writer for one attempt, flushed by this flusher until `done` is called with it."""
        writer = DeltaWriter(self.store, handle, max_chars)
        with self._lock:
            self._writers.add(writer)
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="chatq-flusher", daemon=True).start()
        return writer

    def done(self, writer: DeltaWriter) -> str:
        """Stop flushing `writer`; answers its text not yet written (see DeltaWriter.close)."""
        with self._lock:
            self._writers.discard(writer)
        return writer.close()

    def stop(self) -> None:
        """Stop after the current flush."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.flush_all()
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("flush failed")

    def flush_all(self) -> None:
        """One pipeline with the buffered text of every writer that has some."""
        # Most writers have none (a job waiting for its first token, or between tokens):
        # they are passed over without taking their lock, 40 times a second each.
        with self._lock:
            writers = [writer for writer in self._writers if writer.has_text()]
        with contextlib.ExitStack() as held:
            batch = []
            for writer in writers:
                held.enter_context(writer.lock)
                piece = None if writer.lost else writer.next_piece()
                if piece is not None:
                    batch.append((writer, piece))
            if batch:
                # A backend error leaves every piece unconfirmed: the next flush resends it.
                answers = self.store.append_many([piece for _, piece in batch])
                for (writer, _), ours in zip(batch, answers, strict=True):
                    writer.confirmed(ours)
