"""chatq/gevent_patch.py: gevent's monkey-patching with one read of the entry points."""

from __future__ import annotations

from importlib import metadata

from chatq import gevent_patch
from tests.procs import python_output


def _names(group: str) -> list[str]:
    return sorted(ep.name for ep in metadata.entry_points(group=group))


def test_within_the_block_entry_points_answer_as_a_read_would_and_after_it_read_again() -> None:
    read = metadata.entry_points
    groups = ("pytest11", "gevent.plugins.monkey.will_patch_all", "no.such.group")
    expected = [_names(group) for group in groups]
    with gevent_patch.entry_points_read_once():
        assert metadata.entry_points is not read
        assert [_names(group) for group in groups] == expected
    assert metadata.entry_points is read
    assert expected[0] and expected[1] and not expected[2]


def test_patch_all_patches_as_gevent_does_and_greenlets_keep_no_spawn_tree() -> None:
    code = (
        "import socket, threading\n"
        "from importlib import metadata\n"
        "read = metadata.entry_points\n"
        "from chatq import gevent_patch\n"
        "gevent_patch.patch_all()\n"
        "from gevent import monkey\n"
        "assert monkey.is_module_patched('socket') and monkey.is_module_patched('threading')\n"
        "assert metadata.entry_points is read\n"
        "import gevent\n"
        "g = gevent.spawn(lambda: None)\n"
        "assert g.spawning_stack is None and g.spawn_tree_locals is None, 'a spawn tree'\n"
        "print('patched')\n"
    )
    assert python_output(code) == "patched"
