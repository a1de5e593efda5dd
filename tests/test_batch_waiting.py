"""The batch loop's memory of waiting lines holds at most so many lines and so many bytes, and
a line that does not fit pushes out none that are kept (their retries come round-robin)."""

from __future__ import annotations

import json

from chatq.batches.lines import Line
from worker.batches.waiting import LineJob, WaitingLine, WaitingLines

MIB = 1024 * 1024


def _waiting(number: int, content: str) -> WaitingLine:
    request = {"model": "fake", "messages": [{"role": "user", "content": content}]}
    line = LineJob.of(Line(number, f"l{number}", request))
    return WaitingLine((number, 100 * number), line, (number + 1, 100 * (number + 1)), 10, 5)


def test_a_line_over_the_count_is_not_kept_and_pushes_none_out() -> None:
    memory = WaitingLines(max_lines=2)
    assert memory.keep("a", _waiting(1, "x")) and memory.keep("b", _waiting(1, "y"))
    assert not memory.keep("c", _waiting(1, "z"))
    assert len(memory) == 2
    assert memory.recall("a", (1, 100)) is not None and memory.recall("b", (1, 100)) is not None
    assert memory.recall("c", (1, 100)) is None
    memory.forget("a")  # fed
    assert memory.keep("c", _waiting(1, "z"))


def test_lines_over_the_bytes_are_not_kept_and_the_bytes_stay_under_the_bound() -> None:
    memory = WaitingLines(max_bytes=3 * MIB)
    kept = [memory.keep(f"batch{i}", _waiting(1, "a" * MIB)) for i in range(4)]
    assert kept == [True, True, False, False]
    assert 2 * MIB < memory.bytes <= 3 * MIB
    memory.keep_only({"batch1"})  # batch0's lease moved, or it stopped feeding
    assert len(memory) == 1 and MIB < memory.bytes < 2 * MIB
    assert memory.keep("batch2", _waiting(1, "a" * MIB))


def test_a_line_kept_at_another_cursor_is_forgotten() -> None:
    memory = WaitingLines()
    memory.keep("a", _waiting(2, "x"))
    assert memory.recall("a", (2, 200)) is not None
    assert memory.recall("a", (3, 300)) is None  # the batch moved on without this worker
    assert len(memory) == 0 and memory.bytes == 0


def test_a_line_is_kept_at_about_its_size_as_json_whatever_its_shape() -> None:
    # 30,000 one-word messages: about 1 MB of JSON, several times that as Python objects.
    messages = [{"role": "user", "content": f"m{i}"} for i in range(30_000)]
    request = {"model": "fake", "messages": messages}
    line = LineJob.of(Line(1, "l1", request, {"api": "responses"}))
    assert json.loads(line.request_json) == request
    assert len(line.request_json) < line.size_bytes < len(line.request_json) + 2048
