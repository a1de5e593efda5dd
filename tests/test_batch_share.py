"""How the batch loop shares CHATQ_BATCH_MAX_QUEUED among batches (worker/batches/share.py),
in process: by key name first, with their weights and running caps, then by batch."""

from __future__ import annotations

from typing import Any

from chatq.config.settings import Settings
from worker.batches.share import Claim, shares, water_fill

NOW_S = 1000.0


def _record(
    batch_id: str, owner: str, waiting: int, in_flight: int = 0, **fields: Any
) -> dict[str, str]:
    """A running batch of `owner`'s with `waiting` lines in its file and `in_flight` fed."""
    record = {
        "id": batch_id,
        "owner": owner,
        "status": "in_progress",
        "validated": "1",
        "total": str(waiting + in_flight),
        "fed": str(in_flight),
        "feed_done": "0",
    }
    return record | {k: str(v) for k, v in fields.items()}


def _settings(max_queued: int, **fields: Any) -> Settings:
    return Settings(batch_max_queued=max_queued, api_keys=(("alice", "a"), ("bob", "b")), **fields)


def test_water_fill_gives_in_turn_from_the_fewest_in_flight() -> None:
    assert water_fill([Claim(0, 10), Claim(0, 10)], 5) == [3, 2]
    assert water_fill([Claim(6, 10), Claim(0, 10)], 8) == [1, 7]
    assert water_fill([Claim(0, 1), Claim(0, 10)], 8) == [1, 7]  # what one cannot take
    assert water_fill([Claim(0, 10, weight=3), Claim(0, 10)], 8) == [6, 2]
    assert water_fill([Claim(0, 10)], 0) == [0]
    assert water_fill([Claim(0, 10)], -3) == [0]


def test_a_late_small_batch_gets_the_room_freed_until_it_has_its_share() -> None:
    records = [_record("a1", "alice", 900, in_flight=70), _record("b1", "bob", 100)]
    assert shares(records, _settings(80), NOW_S) == {"b1": 10}
    records = [_record("a1", "alice", 900, in_flight=30), _record("b1", "bob", 90, in_flight=10)]
    assert shares(records, _settings(80), NOW_S) == {"a1": 10, "b1": 30}


def test_a_key_name_with_many_batches_gets_one_share_split_among_them() -> None:
    records = [_record(f"a{i}", "alice", 100) for i in range(4)] + [_record("b1", "bob", 100)]
    assert shares(records, _settings(80), NOW_S) == {
        "a0": 10,
        "a1": 10,
        "a2": 10,
        "a3": 10,
        "b1": 40,
    }


def test_weights_and_running_caps_are_fair_dispatch_s() -> None:
    records = [_record("a1", "alice", 100), _record("b1", "bob", 100)]
    weighted = _settings(80, tenant_weights=(("alice", 3),))
    assert shares(records, weighted, NOW_S) == {"a1": 60, "b1": 20}
    capped = _settings(80, tenant_max_running_overrides=(("alice", 5),))
    assert shares(records, capped, NOW_S) == {"a1": 5, "b1": 75}
    records[0] = _record("a1", "alice", 100, in_flight=5)
    assert shares(records, capped, NOW_S) == {"b1": 75}


def test_without_fair_dispatch_every_batch_is_of_one_turn() -> None:
    records = [_record(f"a{i}", "alice", 100) for i in range(3)] + [_record("b1", "bob", 100)]
    assert shares(records, _settings(80, fair_dispatch=False), NOW_S) == {
        "a0": 20,
        "a1": 20,
        "a2": 20,
        "b1": 20,
    }


def test_batches_that_feed_nothing_now_hold_room_with_their_lines_in_flight_only() -> None:
    others = [
        _record("v", "alice", 10, status="validating", validated="0"),
        _record("c", "alice", 10, in_flight=4, ending="cancelled", status="cancelling"),
        _record("d", "alice", 0, in_flight=6, feed_done="1"),
        _record("w", "alice", 10, in_flight=3, feed_waits_until=NOW_S + 1),
    ]
    records = [*others, _record("b1", "bob", 100)]
    assert shares(records, _settings(20), NOW_S) == {"b1": 20 - 4 - 6 - 3}
    others[3] = _record("w", "alice", 10, in_flight=3, feed_waits_until=NOW_S - 1)
    assert shares(others, _settings(20), NOW_S) == {"w": 7}
