"""A job's stream entries as the events a client reads."""

from __future__ import annotations

from chatq.jobs.events import Event, parse_events


def test_an_end_entry_with_its_status_reads_as_the_status_then_the_end() -> None:
    rows = [
        ("1-0", {"t": "status", "v": "in_progress"}),
        ("2-0", {"t": "delta", "v": "Hi"}),
        ("3-0", {"t": "end", "v": "completed", "f": "stop", "with_status": "1"}),
    ]
    events = parse_events(rows)
    assert [e.public() for e in events] == [
        {"type": "status", "status": "in_progress"},
        {"type": "delta", "delta": "Hi"},
        {"type": "status", "status": "completed"},
        {"type": "end", "status": "completed", "finish_reason": "stop"},
    ]
    # The status has no cursor of its own; the end's is the page's.
    assert [e.id for e in events] == ["1-0", "2-0", "", "3-0"]


def test_an_end_entry_written_before_its_status_moved_into_it_reads_as_the_end_only() -> None:
    rows = [("1-0", {"t": "status", "v": "cancelled"}), ("2-0", {"t": "end", "v": "cancelled"})]
    assert parse_events(rows) == [
        Event("1-0", "status", "cancelled", ""),
        Event("2-0", "end", "cancelled", ""),
    ]
